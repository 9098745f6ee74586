/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What tally reads beside the ring buffer, as plain values: the BPF side's
 * counters (lost messages, CPU per group, the driver's and glibc's probes),
 * the target's memory (its allocator's own Stats) and /proc. The core
 * (session.c) fills a struct figures_sources at each tick; figures_build
 * (figures.h) reads it with the model. Nothing here does I/O.
 */
#ifndef TALLY_SOURCES_H
#define TALLY_SOURCES_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../alloc/include/tally_alloc.h"
#include "../../bpf/contract/tally_events.h"

/* glibc mode's figures (glibc.h), from bpf/glibc.bpf.c's counters. */
struct glibc_figures {
	/* over blocks allocated since attach and still live */
	uint64_t live;	      /* requested bytes */
	uint64_t rounding;    /* malloc_usable_size() - requested, bytes */
	uint64_t large_count; /* blocks that are mmapped chunks */
	/* per group, lifetime, requested sizes; a free is charged to the group
	 * the block was allocated in, realloc is a free and an allocation */
	uint64_t alloc_bytes[TALLY_MAX_GROUPS], alloc_objs[TALLY_MAX_GROUPS];
	uint64_t dealloc_bytes[TALLY_MAX_GROUPS], dealloc_objs[TALLY_MAX_GROUPS];
	uint64_t calls;		/* calls of the family (outermost ones) */
	uint64_t untracked;	/* blocks the block map could not hold: not exact */
	uint64_t unknown_frees; /* frees of blocks not allocated since attach (or untracked) */
	uint64_t unseen_frees;	/* --inject: blocks given again whose free was not seen */
	uint64_t nested; /* calls glibc made inside another traced call (not counted twice) */
	uint64_t lost;	 /* returns or frees the probes missed: not exact */
};

/* Every block allocated since attach is accounted. */
static inline bool glibc_figures_exact(const struct glibc_figures *f)
{
	return !f->untracked && !f->lost;
}

/* The CUDA driver's probes' counters (cuda.h), for one process. */
struct cuda_figures {
	uint64_t untracked;	/* allocations the block map could not hold */
	uint64_t unknown_frees; /* frees of blocks allocated before the attach */
	uint64_t os_yields[TALLY_MAX_GROUPS];
	unsigned entry_points; /* driver entry points probed (also once let go) */
	bool late;	       /* the driver was mapped before tally came */
	bool hold_timed_out;   /* its probes came after the loader's hold gave up */
	bool attach_failed;    /* mapped, and its probes could not be attached */
	bool cupti_took_over;  /* CUPTI spoke: the driver's probes were let go */
	bool have_device_memory_used;
	uint64_t device_memory_used; /* the driver's own figure (NVML), bytes */
};

/* The most a late attach keeps aside while it reads the target's state
 * (session.h: SESSION_DEFER_MAX); past it, deferred_dropped counts. */
#define SOURCES_DEFER_MAX_MB 64

/* Whose figures the memory figures are: libtally_alloc's records, glibc
 * mode's probes, or nobody's yet. */
enum figures_allocator { FIGURES_ALLOC_TALLY, FIGURES_ALLOC_GLIBC, FIGURES_ALLOC_NONE };

/* A cgroup path, and a container id (64 hex digits). */
#define SOURCES_CGROUP_MAX 4096
#define SOURCES_CONTAINER_MAX 65
/* A command line as ps shows it, escaped and cut (target_cmdline). */
#define SOURCES_CMDLINE_MAX 256

struct figures_sources {
	/* the target */
	pid_t pid;
	pid_t ns_pid; /* in its own PID namespace (pid when the same) */
	pid_t ppid;
	char cgroup[SOURCES_CGROUP_MAX];       /* its cgroup v2 path, or "" */
	char container[SOURCES_CONTAINER_MAX]; /* the id its cgroup names, or "" */
	char comm[TALLY_COMM_LEN];
	char cmdline[SOURCES_CMDLINE_MAX]; /* as last read, or "" */
	bool late;			   /* attached to a running process */
	bool gone;			   /* it has exited */
	bool have_exit;			   /* ... and how is known: */
	int exit_status;		   /* its wait status */
	bool cupti;			   /* started with the CUPTI library injected */
	uint64_t start_ns;		   /* CLOCK_MONOTONIC at attach */
	uint64_t born_ns;  /* a process of the tree: its fork (0: before the attach) */
	uint64_t ended_ns; /* ... and its end (0: running) */
	uint64_t now_ns;   /* ... and at this tick */
	enum figures_allocator allocator;
	/* the ring: only what was lost between the state read at attach and
	 * the cut at the end counts; the rest is in the state read, or past
	 * the figures */
	uint64_t lost_msgs, lost_words;
	uint64_t lost_outside_read;
	uint64_t in_place;	   /* batches read from the heaps' shared rings */
	uint64_t malformed_bpf;	   /* batches the BPF side refused */
	uint64_t procs_unfollowed; /* new processes of the tree the BPF side had no room for */
	uint64_t cpu_lost;	   /* CPU intervals it had no room to charge */
	uint64_t strays;	   /* messages of processes the tree did not know */
	/* a process of the tree other than the root */
	bool not_read;		   /* found running at attach (-f): its state then was not read */
	bool held_unread;	   /* running: records its threads hold were not read */
	uint64_t deferred_dropped; /* messages past what a late attach keeps aside */
	bool cut_torn;		   /* a thread's records below this tick's cut were not all in */
	/* CPU per group (the scheduler's probes), the driver's and glibc's */
	uint64_t cpu_ns[TALLY_MAX_GROUPS];
	struct cuda_figures cuda;
	bool have_glibc;
	struct glibc_figures glibc;
	bool injected;	      /* -p --inject: glibc's figures come from libtally_interpose.so */
	bool injected_execed; /* ... and it exec'd since: the new program is not injected */
	const char *foreign_alloc; /* FIGURES_ALLOC_NONE: the malloc it runs on, untraced */
	bool inject_uncut;	   /* ... the interposer did not answer the cut at the end */
	bool uninjected;	   /* -p --inject -f: a descendant the injection did not reach */
	/* the allocator's state read from the target's memory */
	bool late_consistent;	   /* at attach, no heap moved during the read */
	bool have_final_inprocess; /* read from a target still running at the end */
	bool final_consistent;	   /* ... while no heap moved */
	struct tally_stats final_inprocess;
	bool have_resident;
	uint64_t resident; /* resident bytes of the allocator's mappings */
};

#endif /* TALLY_SOURCES_H */
