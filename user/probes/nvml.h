/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The NVIDIA management library (libnvidia-ml.so.1, installed with the
 * driver): the device memory the driver itself counts for a process, which
 * a late attach cannot rebuild from the driver's calls. Loaded when first
 * asked, never linked: most machines have no GPU.
 */
#ifndef TALLY_NVML_H
#define TALLY_NVML_H

#include <stdint.h>
#include <sys/types.h>

struct nvml;
/* 0, or -ENOENT without the library (TALLY_NVML names another file), or
 * -ENODEV when it has no device or will not start. */
int nvml_open(struct nvml **out);
/* pid's device memory over every GPU: 0, or -ENOENT when it has no
 * compute context on any, or the driver does not say. */
int nvml_process_memory(struct nvml *n, pid_t pid, uint64_t *bytes);
void nvml_close(struct nvml *n);

#endif /* TALLY_NVML_H */
