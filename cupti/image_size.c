// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The size of a module image, which is what bytes_pinned counts (docs/DESIGN.md
 * §4), as bpf/image_size.h defines it for the driver probes and for this
 * library alike: here the image is in our own memory.
 *
 * Only images the driver accepted are sized (dispatch.c sizes on a
 * successful return), so their headers can be trusted to be in bounds: a
 * read here is a plain copy, which cannot fail. The format tests read byte
 * by byte and stop at the first mismatch, so a short PTX string is never
 * read past its NUL.
 */
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include <linux/types.h>

#include "image_size.h"

static long image_read(void *dst, __u32 len, __u64 addr)
{
	memcpy(dst, (const void *)(uintptr_t)addr, len);
	return 0;
}

static __u64 image_strlen(__u64 addr)
{
	return strlen((const char *)(uintptr_t)addr);
}

#include "../bpf/image_size.h"

uint64_t tally_cupti_image_size(const void *image)
{
	return image_size((uintptr_t)image);
}

uint64_t tally_cupti_file_size(const char *path)
{
	struct stat st;

	if (!path || stat(path, &st) || st.st_size < 0)
		return 0;
	return (uint64_t)st.st_size;
}
