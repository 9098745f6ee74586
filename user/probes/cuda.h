/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The CUDA driver's uprobes (bpf/cuda.bpf.c): per process of the tree, on
 * the driver it maps, wherever that is; attached as it loads it (the probe
 * on the dynamic loader holds it meanwhile), or at once when it had it
 * before tally came.
 */
#ifndef TALLY_CUDA_H
#define TALLY_CUDA_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../bpf/contract/tally_events.h"
#include "../model/sources.h" /* struct cuda_figures */

/* tally.bpf.c's maps that the driver probes write into or read. */
struct cuda_shared {
	int events_fd, lost_fd, threads_fd, procs_fd;
};

struct cuda_trace;
/* root: the process whose driver probes' map counters are its; driver:
 * whether a driver may be probed at all (false: sched_yield's probe alone,
 * the driver's maps left at one entry). */
struct cuda_trace *cuda_trace_open(pid_t root, const struct cuda_shared *maps, bool driver,
				   int *err);
/* The probe on the dynamic loader at `ldso` for process pid (-1: every
 * process of the tree that maps it): 0, or -ENOENT when it has no debugger
 * hook tally knows. */
int cuda_trace_follow_loader(struct cuda_trace *c, pid_t pid, const char *ldso);
/* The driver's probes for process pid, if it has one mapped: 0 (also when
 * it has none: -ENOENT then), or a negative errno. `late`: mapped before
 * tally came (what it did then is not known). The loader's hold on pid, if
 * any, is let go either way. */
int cuda_trace_attach_mapped(struct cuda_trace *c, pid_t pid, bool late);
/* A driver load the loader's probe saw (TALLY_MSG_DRIVER_LOAD or _HELD). */
void cuda_trace_on_msg(struct cuda_trace *c, const struct tally_msg_driver *m, bool verbose);
/* CUPTI speaks for pid and covers every figure: its driver probes go. */
void cuda_trace_cupti_spoke(struct cuda_trace *c, pid_t pid, bool verbose);
/* pid has ended: its probes go, and what the maps keep of it (its pid may
 * come back as another process). c may be NULL (no GPU probes). */
void cuda_trace_forget(struct cuda_trace *c, pid_t pid);
/* sched_yield in the root's libc, for os_yields (the tree's other processes
 * get theirs with their driver). */
int cuda_trace_attach_yield(struct cuda_trace *c, pid_t pid, const char *libc);
/* pid's figures. */
void cuda_trace_read(struct cuda_trace *c, pid_t pid, struct cuda_figures *f);
void cuda_trace_close(struct cuda_trace *c);

#endif /* TALLY_CUDA_H */
