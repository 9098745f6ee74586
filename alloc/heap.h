/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Heaps (heap.c): one per thread, no lock on the fast path. A heap owns its
 * segments, its bins and its counters, and decides what its spans become:
 * when a bin is refilled from which span, when empty spans retire, when
 * pages go back.
 */
#ifndef TALLY_ALLOC_HEAP_H
#define TALLY_ALLOC_HEAP_H

#include <pthread.h>
#include <sys/uio.h>

#include "../bpf/contract/tally_events.h"
#include "bin.h"
#include "common/fence.h"
#include "common/ring.h"
#include "include/tally_alloc.h"

#define PURGE_MS_DEFAULT 1000
#define PURGE_MS_MAX 3600000 /* TALLY_ALLOC_PURGE_MS: an hour at most */
#define TICK_OPS 1024	     /* slow-path operations between two looks at the clock */
#define FLUSH_MS 50	     /* a partial batch waits at most about this long when traced */

/*
 * Per-heap counters, written only by the heap's owner (plain adds, read with
 * relaxed loads and merged). Signed: a foreign free adds to the freeing heap
 * what the allocating heap subtracts. The eleven public terms are derived, so
 * that the fast paths count as little as they can:
 *   live      = the sum over groups of allocated - deallocated bytes
 *   slots     = the sum over spans of used * size (allocated or in a
 *               foreign-free list)
 *   rounding  = slots - cache - (live - large_live) + large_round
 *   span_free = pool - slots
 */
struct heap_stats {
	int64_t mapped;
	int64_t segment_overhead;
	int64_t virgin;
	int64_t returned;
	int64_t hysteresis;
	int64_t cache;
	int64_t pool; /* resident slot bytes below bump cursors: free, live or cached */
	int64_t large_live;
	int64_t large_round;
	int64_t large_count;
	int64_t spans_assigned;
};

/* A group's lifetime counters: a heap's, plus the shares of its spans
 * (struct span: abytes ...), which stats.c adds when it reads them. */
struct group_ctr {
	int64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs;
};

/* A heap's figures as the walk of stats_walk.h sums them: its counters and
 * its spans' (the public terms are derived from a sum of these: linear, so
 * one heap's can be taken alone, and the sum of every heap's is the
 * process's). */
struct stats_walk {
	struct heap_stats t;
	int64_t slots; /* sum over assigned spans of used * size */
	int64_t live;
	struct group_ctr groups[TALLY_MAX_GROUPS];
};

/* Discards are gathered and handed to the kernel in one call (os_discard_many):
 * a madvise costs about 100 us on these VMs whatever its length. */
#define DISCARD_BATCH 128

/* A heap's sampling for heap profiles (sample.c), owner-only. */
struct heap_sample {
	uint64_t rate;	  /* the mean the current gap was drawn with (0: none) */
	uint64_t rng;	  /* xorshift64* state */
	bool busy;	  /* unwinding: allocations meanwhile are not sampled */
	bool large;	  /* the pending block is a large mapping */
	uint16_t group;	  /* ... charged to this group */
	void *p;	  /* the pending block (NULL: none) */
	size_t q;	  /* ... its requested bytes */
	uint64_t p_rate;  /* ... the rate of the gap it ended */
	uint64_t dropped; /* blocks that ended a gap while one was pending */
};

/* struct heap's handing: who hands its batch over. The tracer reads it too
 * (user/os/remote.c, for the OOM program): while the owner hands over, seq
 * and the batch's count are not of one moment. */
enum heap_hand { HAND_FREE = 0, HAND_OWNER = 1, HAND_EXIT = 2 };

struct heap {
	/* the current span of the current group's bin for every request of at
	 * most DIRECT_MAX bytes, by direct_index(size): one load from size to
	 * span; then for every class, by DIRECT_CLASS(class); never NULL
	 * (tally_span_none, whose free list is empty, stands for none) */
	struct span *direct[DIRECT_TOTAL];
	struct bin *bins;	 /* the current group's bins */
	uint32_t group;		 /* the current group */
	int32_t tick;		 /* operations left until the next tick */
	struct heap_stats stats; /* see above */
	struct group_ctr group_counters[TALLY_MAX_GROUPS];
	struct bin *gbins[TALLY_MAX_GROUPS]; /* per-group bin tables, created on first use */
	struct bin bins0[CLASS_COUNT];	     /* root's bins */
	struct segment *segs;
	_Atomic(struct span *) xspans; /* spans whose xfree went non-empty */
	/* this thread's foreign frees into one span of another heap, not yet on
	 * its xfree list (free.c: foreign_batch); owner-only, as the figures
	 * those frees moved already */
	struct span *xb_span;
	void *xb_head, *xb_tail;
	uint32_t xb_n;
	struct span *dirty;		  /* spans with local frees since their last reclaim */
	struct span *lru_head, *lru_tail; /* every empty span, oldest first (bin.h) */
	uint64_t now_ms;		  /* coarse clock, updated at ticks */
	uint64_t last_sweep_ms;
	uint64_t last_flush_ms;
	struct heap *all_next;	  /* registry of every heap */
	struct heap *orphan_next; /* orphan list */
	bool orphaned;
	uint32_t tid;
	uintptr_t tp; /* the owning thread's thread pointer (spans' owner_tp); 0: orphaned */
	uint64_t id;
	uint64_t seq; /* records handed over so far */
	/* who hands its batch over (events.c, enum heap_hand): its owner, a
	 * moment at a time, or the exit hand-over, which took its records for
	 * good */
	_Atomic uint8_t handing;
	/* idle purge (purge.c) */
	uint64_t busy;	       /* 1 inside a slow operation of the owner (op_begin) */
	struct heap *acct;     /* NULL, or the heap a purge counts and records in */
	_Atomic uint8_t purge; /* enum purge_state; written under tally_heaps_lock */
	uint64_t purge_due_ms; /* the purger's: when its sweep is due (0: not known yet) */
	uint32_t purge_kicks;  /* spans that became reclaimable, until the purger runs */
	uint32_t ndiscard;     /* pages ranges waiting in discard[] (heap_discard) */
	struct iovec discard[DISCARD_BATCH];
	struct heap_sample sample;
	/* the shared ring its full batches go to while traced (ring.c) */
	struct ring_state ring;
	/* bytes the thread may allocate while traced before its next sample:
	 * beside the batch header, which the traced fast path writes too */
	int64_t sample_left;
	/* The hand-over of a cut (cut.c, docs/DESIGN.md §8): the tracer's last
	 * request this heap answered, and where its stream stood then; the
	 * owner writes cut_pos, then cut_gen (release), and only at the start
	 * of an operation. Beside sample_left: the traced fast paths read it. */
	uint64_t cut_gen;
	uint64_t cut_pos;
	struct tally_batch batch;
	/* with a request for figures (CUT_FIGURES): the heap's at cut_pos,
	 * written before cut_gen (last: its pages are touched only then) */
	struct stats_walk cut_walk;
};

/*
 * A slow operation: every call into the allocator that may touch the calling
 * thread's heap beyond the fast paths runs between op_begin and op_end, which
 * set and clear the heap's busy word: the purger (purge.c) reads it, after a
 * membarrier, to know that none is in flight. The fast paths publish less
 * (purge.c says what). A thread without a heap writes tally_heap_none's,
 * which nobody reads.
 */
static inline __attribute__((always_inline)) void op_begin(struct heap *h)
{
	h->busy = 1;
	/* the frequent side of common/fence.h's pair: the compiler must not
	 * move the operation's loads above the store; the processor may, and
	 * the purger's fence_heavy takes care of that */
	fence_light();
}
static inline __attribute__((always_inline)) void op_end(struct heap *h)
{
	/* release: a purger that reads 0 sees every store of the operation */
	__atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
}

/* The heap whose counters and records take a sweep's byte movements: the
 * heap itself, or the purger's own while it sweeps another thread's. */
static inline struct heap *heap_acct(struct heap *h)
{
	return h->acct ? h->acct : h;
}

extern __thread struct heap *tally_tls_heap __attribute__((tls_model("initial-exec")));
/* The block the thread's free is at (the free fast path's one store): the
 * purger leaves that block's span alone (purge.c). */
extern __thread void *tally_tls_freeing __attribute__((tls_model("initial-exec")));
/* Past the thread's exit hand-over: each call borrows a heap (heap.c). */
extern __thread bool tally_tls_exited __attribute__((tls_model("initial-exec")));
/* While the allocator's own code calls what may malloc (purge_start's
 * pthread_create): the heap that pays for those blocks as metadata, and the
 * thread's tally_tls_heap is tally_heap_none meanwhile, so that every call
 * takes a slow path, where malloc.c tells them apart. NULL otherwise. */
extern __thread struct heap *tally_tls_internal __attribute__((tls_model("initial-exec")));
void heap_release(struct heap *h);
extern struct heap tally_heap_none;
extern struct span tally_span_none;
extern uint32_t tally_purge_ms;
extern pthread_mutex_t tally_heaps_lock;
extern struct heap *tally_heaps; /* registry, under tally_heaps_lock */
struct heap *heap_get_slow(void);
void heap_settle(struct heap *h);
/* The calling thread's thread pointer (%fs:0 on x86-64): one load, with no
 * look-up of the heap's TLS slot, for the free path's "is it mine". */
static inline uintptr_t thread_pointer(void)
{
	return (uintptr_t)__builtin_thread_pointer();
}
/* The calling thread's heap, for a slow path inside op_begin/op_end: if the
 * purger has turned its fast paths off, they are restored (heap_settle) before
 * the heap is touched. */
static inline struct heap *heap_get(void)
{
	struct heap *h = tally_tls_heap;
	if (unlikely(h == &tally_heap_none))
		h = heap_get_slow();
	if (h && unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
	return h;
}
struct span *heap_refill(struct heap *h, unsigned cls);
void heap_drain_xspans(struct heap *h);
void heap_tick(struct heap *h);
/* free.c: h's chain of foreign frees onto its span's list; owner-only */
void foreign_batch_flush(struct heap *h);
void heap_sweep(struct heap *h, bool force);
void heap_purge_sweep(struct heap *h, const struct span *skip, struct heap *acct);
uint64_t heap_due(const struct heap *h, bool owned, const struct span *skip);
uint64_t heap_sweep_orphans(struct heap *by);
void heap_set_owner(struct heap *h, uintptr_t tp);
void heap_direct_fill(struct heap *h);
/* A direct[] entry: none while the purger has the fast paths off (the owner
 * fills the table anew when it settles). */
static inline struct span *heap_direct_entry(struct heap *h, struct span *head)
{
	return head && !atomic_load_explicit(&h->purge, memory_order_relaxed) ? head :
										&tally_span_none;
}
void *heap_meta_alloc(struct heap *h, size_t len);
struct heap *heap_new_locked(void);
void heap_discard(struct heap *h, void *p, size_t len);
void heap_discard_flush(struct heap *h);

#endif /* TALLY_ALLOC_HEAP_H */
