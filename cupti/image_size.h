/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * image_size.c's calls, apart from internal.h so that a test can build that
 * file without the CUDA toolkit (tests/test_image_size.c).
 */
#ifndef TALLY_CUPTI_IMAGE_SIZE_H
#define TALLY_CUPTI_IMAGE_SIZE_H

#include <stdint.h>

/* Bytes of a module image as the driver reads it (PTX text, a 64-bit cubin
 * ELF, a fatbin or a fatbin wrapper pointing at one), as bpf/image_size.h
 * defines it for both sides. 0 when the format is none of these, or image is
 * NULL. */
uint64_t tally_cupti_image_size(const void *image);
/* Bytes of the file at path (cuLibraryLoadFromFile); 0 when it cannot be
 * stat'ed. */
uint64_t tally_cupti_file_size(const char *path);

#endif /* TALLY_CUPTI_IMAGE_SIZE_H */
