/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * GPU figures per group (docs/DESIGN.md §4), rebuilt from GPU records: from the
 * CUPTI library's batches or from the driver uprobes, kept apart so that a
 * process fed by both is not counted twice. Pure code.
 */
#ifndef TALLY_GPU_H
#define TALLY_GPU_H

#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"

enum gpu_source { GPU_SRC_CUPTI = 0, GPU_SRC_DRIVER = 1, GPU_SOURCES };

struct gpu_group {
	uint64_t kernels_launched;
	uint64_t graph_launches;
	uint64_t failed_launches;
	int64_t device_bytes; /* gauge: device memory allocated and not freed */
	int64_t host_pinned;  /* gauge: pinned host memory */
	int64_t image_bytes;  /* gauge: module and library images loaded */
};

struct gpu_model {
	bool seen[GPU_SOURCES];
	struct gpu_group groups[GPU_SOURCES][TALLY_MAX_GROUPS];
	char **names; /* kernel names by id (CUPTI), NULL where unknown */
	/* CUPTI refused the subscriber: its reason ("" when it did not) */
	char cupti_refused[160];
	uint32_t nnames;
};

void gpu_init(struct gpu_model *g);
void gpu_free(struct gpu_model *g);
/* dst: a copy of src that owns its kernel names; -ENOMEM. */
int gpu_copy(struct gpu_model *dst, const struct gpu_model *src);
/* One GPU record; `name` points at the words after a KERNEL_NAME record. */
int gpu_apply(struct gpu_model *g, enum gpu_source src, const struct tally_ev *e,
	      const __u64 *name);
/* The source the figures come from: CUPTI's when it spoke, else the driver's. */
enum gpu_source gpu_source_of(const struct gpu_model *g);
const char *gpu_kernel_name(const struct gpu_model *g, uint32_t id);

#endif /* TALLY_GPU_H */
