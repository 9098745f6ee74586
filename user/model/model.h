/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What tally knows about its target, rebuilt from the ring buffer's messages:
 * the byte identity and per-group memory (through the replay), the groups'
 * names, yields, rejections and CPU, the threads and their groups, and how
 * much was received and lost. Pure code (docs/STYLE.md rule 8): messages in, numbers
 * out; the loader and the views do the I/O.
 */
#ifndef TALLY_MODEL_H
#define TALLY_MODEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/contract/sdk_registry.h"
#include "../../bpf/contract/tally_events.h"
#include "alloc_state.h"
#include "gpu.h"
#include "injected.h"
#include "oom.h"
#include "replay.h"
#include "sites.h"

#define MODEL_MAX_RULES 32

struct model_group {
	char name[TALLY_GROUP_NAME_MAX];
	bool known;    /* registered, named by a rule, or charged something */
	bool rule;     /* named by a --group rule (ids from the top) */
	bool occupied; /* a thread was in it: CPU may be charged to it */
	uint64_t yields, rejects;
};

struct model_thread {
	uint32_t tid;
	uint32_t group;	    /* current group as the SDK says */
	int32_t rule_group; /* group given by a --group rule, or -1 */
	bool alive;
	char comm[TALLY_COMM_LEN];
};

/* Per heap: records numbered below `applied` are in the figures already
 * (read from memory); batches from the ring may come in any order above it. */
struct model_heap {
	uint64_t id;
	uint64_t applied; /* records below are in (from the ring, a read, or pending) */
	uint64_t seeded;  /* ... below this from a late attach's state read, whose
			   * sample records are not in the sites */
	uint64_t done;	  /* every record below came in: pending from here may be applied */
	uint64_t limit;	  /* records numbered from here on are past the cut */
	uint64_t wait;	  /* holding: done must reach this (0: nothing awaited) */
	/* its last hand-over, and its last that moved live (CLOCK_MONOTONIC
	 * ns; 0: none yet): the windows model_peak_note compares */
	uint64_t handed_ns, moved_ns;
};

/* The moment of a peak (docs/DESIGN.md §11). The records of a batch were
 * made between its heap's previous hand-over (from_ns; 0: the heap's first
 * batch, made since the thread began) and its own (at_ns); the replay's
 * order within a heap is the heap's own. The peak is a moment of the
 * process unless another heap moved live within that window (`crossed`):
 * the order between two heaps' records there is not known. */
struct model_peak {
	uint64_t at_ns, from_ns;
	uint64_t heap;
	bool crossed;
};

/* --group NAME=GLOB: threads whose name matches join group NAME. */
struct model_rule {
	char name[TALLY_GROUP_NAME_MAX];
	char glob[64];
	uint32_t group;
};

struct model {
	struct tally_replay replay;
	struct gpu_model gpu;
	struct sites sites; /* heap profile by call site */
	struct model_group groups[TALLY_MAX_GROUPS];
	struct model_thread *threads;
	size_t nthreads, cap_threads;
	struct model_heap *heaps;
	size_t nheaps, cap_heaps;
	struct model_rule rules[MODEL_MAX_RULES];
	unsigned nrules;
	uint64_t received;  /* messages */
	uint64_t records;   /* allocator records applied */
	uint64_t skipped;   /* records already in a state read from memory */
	uint64_t malformed; /* messages or records refused */
	/* an SDK group registered with the id of a --group rule's group (the SDK
	 * counts up from 1, rules down from 255): their figures merge */
	uint32_t collided_id; /* 0: none */
	/* threads the SDK's registry had no slot for (more than TALLY_MAX_THREADS
	 * in groups): at a late attach their current groups are unknown */
	uint32_t registry_threads_dropped;
	/* the final read of a running target (model_cut): records past each
	 * heap's position then, and every record of a heap made after it, are
	 * left out, so that the figures are those of that one moment */
	bool cut;
	uint64_t past_cut; /* records left out */
	/* a view's cut (model_hold): the same limits, but records past them are
	 * applied at model_release; `held` tells the caller to keep the message
	 * it just gave, `waiting` counts heaps whose earlier batches are still
	 * in the ring */
	bool holding, held;
	unsigned waiting;
	char collided_sdk[TALLY_GROUP_NAME_MAX];
	bool have_inprocess;	     /* the allocator handed over its own figures at exit */
	bool inprocess_threads_held; /* ... while other threads held records (exit() as they ran) */
	uint64_t inprocess[TALLY_STATS_FIELDS];
	uint64_t resident_at_exit;
	bool exited;	 /* the last thread is gone */
	int exit_status; /* then: its wait status, as the kernel had it */
	bool saw_alloc;	 /* any allocator batch or state: the target uses tally's allocator */
	struct injected injected; /* --inject: libtally_interpose.so's figures */
	/* forked while other threads of its parent lived: their heaps were
	 * copied as they were, maybe in the middle of an operation (until an
	 * exec replaces the image) */
	bool fork_threads;
	/* forked: the counters began as a copy of the parent's (until an exec) */
	bool inherited;
	/* the moment of the message being applied (its hand-over), or of the
	 * read of pending records (set by the session before
	 * model_apply_pending): CLOCK_MONOTONIC ns */
	uint64_t now_ns;
	struct model_peak peak, peak_mapped; /* of replay.peak, replay.peak_mapped */
	/* the last hand-over that moved live, and the start of its window
	 * (the tree's peak, model/tree_peak.c) */
	uint64_t live_moved_ns, moved_from_ns;
	/* when its image began (an exec, a fork, a seed; 0: not seen): no heap
	 * of it made a record before, the first batch's window starts here */
	uint64_t image_ns;
	bool peak_seeded; /* the peaks count from a state read from memory (attach) */
	/* the OOM killer chose it (oom.killed), and what it saw */
	struct model_oom oom;
};

void model_init(struct model *m);
/* Another process's model: empty, with like's --group rules (like may be NULL). */
int model_init_like(struct model *m, const struct model *like);
/* A forked child's: parent's figures and heap positions as they are now, one
 * thread (tid) in the group of parent's parent_tid. -ENOMEM. */
int model_fork(struct model *m, const struct model *parent, uint32_t parent_tid, uint32_t tid);
void model_free(struct model *m);
/* exec: the old image's figures end (its allocator and SDK start anew) */
void model_exec(struct model *m);
/* A rule; -EINVAL for a bad NAME=GLOB, -ENOSPC past MODEL_MAX_RULES. The
 * group's id is the registered one with that name or one from the top. */
int model_add_rule(struct model *m, const char *spec);
/* One ring buffer message; -EINVAL (counted) when malformed. */
int model_apply(struct model *m, const void *data, size_t len);
/* The record words of one heap, the first numbered seq_first, from `tid`'s
 * batch (bpf/contract/tally_events.h: struct tally_batch). */
void model_apply_records(struct model *m, uint64_t heap_id, uint64_t seq_first, uint32_t tid,
			 const __u64 *words, uint32_t count);
/* Records a live heap has not handed over yet, read from its memory. */
/* The final cut: heap heap_id's figures end at record number pos. */
void model_cut(struct model *m, uint64_t heap_id, uint64_t pos);
/* A view's cut: model_hold, then each heap's position read with its pending
 * records (seq_first: where they begin); records past it are held back
 * until model_release. model_hold_reached: that heap's records below pos are
 * all in. */
void model_hold(struct model *m);
void model_hold_at(struct model *m, uint64_t heap_id, uint64_t seq_first, uint64_t pos);
bool model_hold_reached(const struct model *m, uint64_t heap_id, uint64_t pos);
void model_release(struct model *m);
void model_apply_pending(struct model *m, uint64_t heap_id, uint64_t seq_first, uint32_t tid,
			 const __u64 *words, uint32_t count);
/* Start from a state read from memory (late attach): figures, and each
 * heap's position, below which records are skipped. */
void model_seed_alloc(struct model *m, const struct remote_alloc *ra);
/* Group names and counters read from the SDK's registry. absolute: the
 * counters replace what the messages counted (a final read of a live target). */
void model_seed_registry(struct model *m, const struct tally_registry *reg, bool absolute);
/* A thread seen in /proc (late attach) or renamed: its name, for the rules.
 * Returns the rule group it now belongs to, or -1. */
int32_t model_thread_named(struct model *m, uint32_t tid, const char *comm);
struct model_thread *model_thread(struct model *m, uint32_t tid, bool create);
/* The group a thread's CPU is charged to: its rule's, unless the SDK put it
 * in another group than root. */
uint32_t model_thread_group(const struct model_thread *t);

void model_stats(const struct model *m, struct tally_stats *out);
/* After heap h's records were applied (model_apply_records): the peaks'
 * moments, if they moved, and whether another heap crossed their window
 * (model/peak.c). seq_before, moves_before: the replay's peak.seq,
 * peak_mapped.seq and live_moves before them. */
void model_peak_note(struct model *m, struct model_heap *h, const uint64_t before[3]);
/* Both peaks from the figures as they are now, at now_ns. */
void model_peak_restart(struct model *m);
/* The replayed figures with each heap's pending records (read from a running
 * process's memory) added, into *out; m is left as it is. false when a
 * heap's copy was torn or batches before its pending records are still on
 * their way: then *out is not of one moment. */
bool model_preview(const struct model *m, const struct remote_alloc *ra, struct tally_replay *out);

#endif /* TALLY_MODEL_H */
