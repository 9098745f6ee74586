/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One set of module images, and the size bpf/image_size.h gives each, that
 * both of its users are tested against: the CUPTI library's
 * tally_cupti_image_size (tests/test_image_size.c, no CUDA toolkit needed)
 * and the driver probes of bpf/cuda.bpf.c, through the fake libcuda.so.1
 * (tests/gpu/image_workload.c, tests/gpu/run.sh). Cubins of nvcc's layouts,
 * PTX, fatbins bare and wrapped, and truncated or hostile ones.
 */
#ifndef TALLY_TESTS_IMAGE_FIXTURES_H
#define TALLY_TESTS_IMAGE_FIXTURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct image_fixture {
	/* also its group's name in tests/gpu: shorter than TALLY_GROUP_NAME_MAX */
	const char *name;
	size_t len;    /* bytes of the image in memory */
	uint64_t want; /* its size: what one load adds to bytes_pinned */
	/* the definition reads past len (a truncated image): `want` holds for
	 * a reader that cannot read there (the BPF side, when the image ends
	 * at a page nobody may read), not for a plain copy (the CUPTI
	 * library, which sizes only images the driver accepted) */
	bool reads_past_end;
	/* writes the len bytes of the image at buf, any alignment (a wrapper
	 * points into its own bytes: built where it is read) */
	void (*build)(unsigned char *buf);
};

extern const struct image_fixture image_fixtures[];
extern const size_t image_fixture_count;

#endif /* TALLY_TESTS_IMAGE_FIXTURES_H */
