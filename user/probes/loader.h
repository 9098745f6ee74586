/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bpf/tally.bpf.c's lifecycle for one target: open, size the ring, load,
 * attach (scheduler first, then the libraries' probes), poll, read the
 * counters, destroy.
 */
#ifndef TALLY_LOADER_H
#define TALLY_LOADER_H

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../bpf/contract/tally_events.h"

struct loader;
/* A message, taken: 0 to go on, LOADER_STOP to end the loader_consume it
 * came in (not an error: the rest stays in the ring), another -errno to end
 * it with that error, as libbpf's ring_buffer__consume does. */
typedef int (*loader_msg_fn)(void *ctx, const void *data, size_t len);
#define LOADER_STOP (-ECANCELED)

/* ring_bytes is rounded up to a power of two of at least a page. */
/* libbpf's messages on stderr only when verbose (-v). */
void loader_libbpf_messages(bool verbose);
/* Around a BPF object's load on this thread: with timing on, its phases
 * (loader_log.c), under the names given. */
void loader_log_begin(void);
void loader_log_end(const char *btf, const char *maps, const char *progs);
#define LOADER_LOG_END(obj)                                                                        \
	loader_log_end(obj " load: vmlinux BTF", obj " load: its BTF, maps",                       \
		       obj " load: CO-RE, verifier")
/* Open the object and make the maps it shares (loader_shared_fds,
 * loader_procs_fd), so that other objects may load while loader_load
 * loads this one. tgid: the root of the traced tree; follow: every
 * process it starts too. */
int loader_open(struct loader **out, pid_t tgid, bool follow, uint64_t ring_bytes, loader_msg_fn fn,
		void *ctx);
/* Load it (verify its programs) and map its ring; loader_close undoes a
 * failed one too. */
int loader_load(struct loader *l);
/* One more process of the tree (a running descendant, with -f). */
int loader_add_proc(struct loader *l, pid_t pid, pid_t ppid);
int loader_attach_sched(struct loader *l);
/* Where pid's allocator keeps its heaps (tally_heaps), for the OOM program
 * to read them if the OOM killer chooses it; an exec forgets it. */
int loader_oom_heaps(struct loader *l, pid_t pid, uint64_t heaps_addr);
/* USDT probes of libtally_alloc.so (batch, stats) and libtally.so (groups,
 * yields, rejects) in the file at `path`: for `pid` only, or when following
 * for every process that maps it (the BPF side keeps the tree's). */
int loader_attach_alloc(struct loader *l, pid_t pid, const char *path);
int loader_attach_sdk(struct loader *l, pid_t pid, const char *path);
/* tally:batch alone, in another producer (libtally_cupti.so). */
int loader_attach_batch(struct loader *l, pid_t pid, const char *path);
/* Hand the messages in the ring to the callback, at most a ring's size of
 * them (a busy target refills it as fast as it drains: the caller gets
 * control back to watch its deadline and signals); how many, or -errno. */
int loader_consume(struct loader *l);
/* The heaps' shared rings to the end, past any gap in a heap's order (a
 * batch the BPF ring lost): at the end of a trace. How many, or -errno. */
int loader_drain_rings(struct loader *l);
/* Whether some heap's batches come through a shared ring (heap_rings.h):
 * they are read by polling, which should then come often. */
bool loader_rings_active(const struct loader *l);
/* Batches read from them so far; from one process's (heap_rings_read_pid). */
uint64_t loader_rings_read(const struct loader *l);
uint64_t loader_rings_read_pid(struct loader *l, pid_t pid, bool forget);
/* The last loader_consume stopped at its bound, records still in the ring. */
bool loader_more(const struct loader *l);
void loader_lost(struct loader *l, struct tally_lost *sum);
/* A process's CPU per group, charged so far; forget: its entries go too (it
 * has ended and its figures are final). */
int loader_group_cpu(struct loader *l, pid_t pid, uint64_t cpu[TALLY_MAX_GROUPS], bool forget);
/* Add to cpu[] the intervals pid's running threads are in now (not charged yet). */
void loader_running_cpu(struct loader *l, pid_t pid, uint64_t now_ns,
			uint64_t cpu[TALLY_MAX_GROUPS]);
/* The group a thread's CPU is charged to from now on. */
int loader_set_thread_group(struct loader *l, pid_t pid, uint32_t tid, uint32_t group);
/* The ring buffer, lost counters and thread map, for objects that share them. */
void loader_shared_fds(struct loader *l, int *events_fd, int *lost_fd, int *threads_fd);
/*
 * serve --all: one loader's sched_switch program charges the CPU of every
 * session's processes, instead of one program per session run at every
 * context switch of the machine (make bench-agent: ~150 ns a switch a
 * session). The sessions' objects share its thread and CPU maps
 * (loader_share_cpu, after loader_open and before loader_load) and attach
 * no sched_switch program of their own; the charging loader follows each
 * session's processes (loader_cpu_follow) and, as any, the children they
 * fork.
 */
struct loader_cpu_share {
	int threads_fd, cpu_fd;
};
void loader_cpu_fds(struct loader *l, struct loader_cpu_share *out);
int loader_share_cpu(struct loader *l, const struct loader_cpu_share *sh);
/* pid's CPU charged by l from now on (a thread running now: from now). */
int loader_cpu_follow(struct loader *l, pid_t pid);
/* The map of the tree's processes, which the driver's probes share. */
int loader_procs_fd(struct loader *l);
void loader_close(struct loader *l);

#endif /* TALLY_LOADER_H */
