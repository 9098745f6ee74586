/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * glibc mode: the loader of bpf/glibc.bpf.c, uprobes on libc's malloc family
 * for a target that does not use libtally_alloc. A probe hit per call (a
 * trap into the kernel at the entry, and but for free a syscall at the
 * return: 5 to 10 us a call on the project's VMs), so the target runs slower
 * while traced.
 *
 * The figures cover the blocks allocated since glibc_trace_attach() returned
 * or since the target's last exec, whichever is later: blocks allocated
 * before are not known (their frees count in unknown_frees), and an exec
 * starts every figure again from zero (the old image's blocks are gone; and
 * a command started by tally is attached before its exec, when the forked
 * child's own allocations are not the command's). Stats terms other than live, rounding and large_count have
 * no glibc meaning; the snapshot shows them as null.
 */
#ifndef TALLY_GLIBC_H
#define TALLY_GLIBC_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../model/sources.h" /* struct glibc_figures */

#define GLIBC_GROUPS TALLY_MAX_GROUPS

struct glibc_trace;

/* Open and load for target tgid. threads_fd: the main object's `threads` map
 * to share (current group per thread), or -1 for a private one (everything
 * in group 0). max_blocks: live blocks the map can hold, 0 for the default
 * (1M). Returns NULL with *err = -errno. */
struct glibc_trace *glibc_trace_open(pid_t tgid, int threads_fd, uint32_t max_blocks, int *err);

/* Attach to the libc the target maps (its path as in /proc/PID/maps), for
 * that process only, then arm the probes. -ENOENT when the file lacks one of
 * malloc, calloc, realloc, free, posix_memalign, memalign; -EALREADY when
 * attached already. */
int glibc_trace_attach(struct glibc_trace *g, pid_t pid, const char *libc_path);

/* Where the probes on entry `name` ("free", "malloc", ...) went: *offset
 * bytes past its first instruction (glibc_site.h). -ENOENT when it has
 * none: not attached, not in this libc, or an alias of an entry before it
 * in the loader's table (aligned_alloc of memalign, before glibc 2.38). */
int glibc_trace_site(const struct glibc_trace *g, const char *name, uint64_t *offset);

/* The figures now. */
int glibc_trace_read(struct glibc_trace *g, struct glibc_figures *out);

void glibc_trace_close(struct glibc_trace *g);

#endif /* TALLY_GLIBC_H */
