/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The CUDA driver's uprobes (bpf/cuda.bpf.c) for one target. */
#ifndef TALLY_CUDA_H
#define TALLY_CUDA_H

#include <stdint.h>
#include <sys/types.h>

#include "../../bpf/tally_events.h"
#include "../model/sources.h" /* struct cuda_figures */

/* tally.bpf.c's maps that the driver probes write into. */
struct cuda_shared {
	int events_fd, lost_fd, threads_fd;
};

struct cuda_trace;
struct cuda_trace *cuda_trace_open(pid_t tgid, const struct cuda_shared *maps, int *err);
/* Entry and return probes on every entry point the driver at `libcuda` has;
 * -ENOENT when it has none. */
int cuda_trace_attach(struct cuda_trace *c, pid_t pid, const char *libcuda);
/* sched_yield in the target's libc, for os_yields. */
int cuda_trace_attach_yield(struct cuda_trace *c, pid_t pid, const char *libc);
void cuda_trace_read(const struct cuda_trace *c, struct cuda_figures *f);
void cuda_trace_close(struct cuda_trace *c);

#endif /* TALLY_CUDA_H */
