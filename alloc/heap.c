// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heaps: one per thread, no lock on the fast path. A heap outlives its thread:
 * at thread exit it is orphaned (its live blocks stay valid, frees to them go
 * to its foreign lists) and the next new thread adopts it, so nothing leaks
 * or is stranded. Time-driven work (purge delay, partial batches) runs at
 * ticks: every 512 allocations from a span, and every TICK_OPS slow-path
 * operations, the heap reads the clock; for a heap whose owner stops calling
 * the allocator, the purger does it (purge.c). The heap decides what its spans
 * become (a bin refilled from which span, heap_refill; empty spans retired at
 * sweeps); span.c carries each change out, and segment.c hands out the spans.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "purge.h"

/* A thread without a heap points at this one: its direct table is empty, so
 * the malloc fast path falls through to the slow path without a NULL test,
 * and no span names it as owner, so the free fast path does too. */
struct span tally_span_none;
struct heap tally_heap_none = { .direct = { [0 ... DIRECT_TOTAL - 1] = &tally_span_none } };
__thread struct heap *tally_tls_heap __attribute__((tls_model("initial-exec"))) = &tally_heap_none;
__thread void *tally_tls_freeing __attribute__((tls_model("initial-exec")));
__thread bool tally_tls_exited __attribute__((tls_model("initial-exec")));
__thread struct heap *tally_tls_internal __attribute__((tls_model("initial-exec")));
uint32_t tally_purge_ms = PURGE_MS_DEFAULT;
pthread_mutex_t tally_heaps_lock = PTHREAD_MUTEX_INITIALIZER;
struct heap *tally_heaps;      /* every heap ever made, under the lock */
static struct heap *orphans;   /* heaps without a thread, under the lock */
static pthread_key_t heap_key; /* its destructor orphans the heap */
static bool heaps_ready;       /* global init done, under the lock */
static uint64_t heap_next_id = 1;

static void heap_thread_exit(void *arg);

static void heaps_init(void)
{
	const char *e = getenv("TALLY_ALLOC_PURGE_MS");
	if (e && *e) {
		char *end;
		unsigned long v = strtoul(e, &end, 10);
		if (!*end && v <= PURGE_MS_MAX)
			tally_purge_ms = (uint32_t)v;
	}
	classes_init();
	sample_init();
	pthread_key_create(&heap_key, heap_thread_exit);
	heaps_ready = true;
}

void *heap_meta_alloc(struct heap *h, size_t len)
{
	len = (len + OS_PAGE - 1) & ~(OS_PAGE - 1);
	void *p = os_map(len);
	if (!p)
		return NULL;
	os_touch(p, len);
	h->stats.mapped += len;
	h->stats.segment_overhead += len;
	ev(h, TALLY_EV_META_MAP, 0, 0, 0, len);
	return p;
}

/* A heap of no thread yet, in the registry; under tally_heaps_lock. */
struct heap *heap_new_locked(void)
{
	size_t len = (sizeof(struct heap) + OS_PAGE - 1) & ~(OS_PAGE - 1);
	struct heap *h = os_map(len);
	if (!h)
		return NULL;
	os_touch(h, len);
	h->id = heap_next_id++;
	h->gbins[0] = h->bins0;
	h->bins = h->bins0;
	sample_redraw(h);
	/* the heap's own mapping is metadata; its record goes out with the first batch */
	h->stats.mapped += len;
	h->stats.segment_overhead += len;
	ev(h, TALLY_EV_META_MAP, 0, 0, 0, len);
	h->all_next = tally_heaps;
	tally_heaps = h;
	return h;
}

/* Every span of the heap answers to thread pointer tp from now on (0: none):
 * a thread that exits leaves its heap to whoever adopts it, and a later
 * thread may get the same thread pointer. */
void heap_set_owner(struct heap *h, uintptr_t tp)
{
	h->tp = tp;
	for (struct segment *seg = h->segs; seg; seg = seg->next)
		for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++)
			seg->spans[i].owner_tp = tp;
}

struct heap *heap_get_slow(void)
{
	struct heap *h;

	pthread_mutex_lock(&tally_heaps_lock);
	if (!heaps_ready)
		heaps_init();
	h = orphans;
	if (h) {
		orphans = h->orphan_next;
		h->orphan_next = NULL;
	} else {
		h = heap_new_locked();
	}
	if (h) {
		/* owned from here on, for the purger too (it looks under the lock);
		 * until this call returns, the thread is busy in it */
		h->orphaned = false;
		h->busy = 1; /* op_begin, seen by the purger through the lock */
		atomic_store_explicit(&h->purge, PURGE_NONE, memory_order_relaxed);
		h->purge_due_ms = 0;
		/* an orphan may have been read as it was: the operation that
		 * adopts it comes after its answer */
		if (ev_tracing())
			cut_poll(h);
	}
	pthread_mutex_unlock(&tally_heaps_lock);
	if (!h)
		return NULL;
	h->tid = os_gettid();
	heap_set_owner(h, thread_pointer());
	h->group = 0;
	h->bins = h->bins0;
	heap_direct_fill(h);
	h->tick = TICK_OPS;
	h->now_ms = os_now_ms();
	if (!h->last_sweep_ms)
		h->last_sweep_ms = h->last_flush_ms = h->now_ms;
	tally_tls_heap = h;
	if (!tally_tls_exited)
		pthread_setspecific(heap_key, h);
	/* The operation began on tally_heap_none and goes on with h; and
	 * pthread_setspecific may have called malloc, whose op_end said "not
	 * busy" in the middle of it. Say it now (heap_get then looks at
	 * h->purge, as at the start of any operation). */
	op_begin(h);
	/* while traced, the process's first heap hands over its first records
	 * (its own mapping) at once: a target that dies before a batch fills is
	 * then known to use this allocator, its figures flagged, not "none" */
	static bool said_here;
	if (ev_tracing() && !__atomic_exchange_n(&said_here, true, __ATOMIC_RELAXED))
		ev_flush(h);
	return h;
}

/* Hand over what is pending and leave the heap to the next thread. */
void heap_release(struct heap *h)
{
	op_start(h);
	if (atomic_load_explicit(&h->purge, memory_order_acquire))
		heap_settle(h);
	foreign_batch_flush(h);
	heap_drain_xspans(h);
	if (ev_tracing())
		ev_flush(h);
	h->sample.p = NULL; /* a borrowed heap's: no stack worth the unwinding */
	tally_tls_heap = &tally_heap_none;
	pthread_mutex_lock(&tally_heaps_lock);
	/* under the lock, where the purger is not: it may have turned the fast
	 * paths off meanwhile (this thread was busy), and an orphan's spans say 0 */
	heap_set_owner(h, 0);
	atomic_store_explicit(&h->purge, PURGE_NONE, memory_order_relaxed);
	/* op_end, here: once unlocked, a new thread may adopt h and be busy in it */
	h->busy = 0;
	h->orphaned = true;
	h->orphan_next = orphans;
	orphans = h;
	pthread_mutex_unlock(&tally_heaps_lock);
}

/*
 * Thread exit (the heap key's destructor). glibc still calls free after the
 * last destructor (the dlerror buffer, in __libc_thread_freeres), and other
 * libraries' destructors may allocate: from here on each call borrows a heap
 * and hands it back at its end (op_end_slow), or its records would wait in a
 * heap no thread will flush, owned by a thread pointer the next thread may
 * reuse.
 */
static void heap_thread_exit(void *arg)
{
	heap_release(arg);
	tally_tls_exited = true;
}

void heap_direct_fill(struct heap *h)
{
	for (unsigned i = 0; i < DIRECT_ENTRIES; i++)
		h->direct[i] = heap_direct_entry(h, h->bins[tally_class_small[i]].head);
	for (unsigned c = 0; c < CLASS_COUNT; c++)
		h->direct[DIRECT_CLASS(c)] = heap_direct_entry(h, h->bins[c].head);
}

/*
 * The owner's side of the purge protocol (purge.c), at the start of an
 * operation that found h->purge set: wait until the purger is done with the
 * heap (it holds the lock while PURGE_BUSY), turn the fast paths back on, and
 * sweep if the purger could not.
 */
void heap_settle(struct heap *h)
{
	pthread_mutex_lock(&tally_heaps_lock);
	uint8_t was = atomic_load_explicit(&h->purge, memory_order_relaxed);
	atomic_store_explicit(&h->purge, PURGE_NONE, memory_order_relaxed);
	h->purge_due_ms = 0; /* the owner is back: the purger looks afresh */
	heap_direct_fill(h);
	heap_set_owner(h, h->tp);
	pthread_mutex_unlock(&tally_heaps_lock);
	if (was == PURGE_POKED) {
		h->now_ms = os_now_ms();
		h->last_sweep_ms = h->now_ms;
		heap_sweep(h, false);
	}
}

/* Page ranges to hand back, gathered over a sweep: the pages are not written
 * before heap_discard_flush (a sweep frees, it never allocates). */
void heap_discard(struct heap *h, void *p, size_t len)
{
	if (h->ndiscard == DISCARD_BATCH)
		heap_discard_flush(h);
	h->discard[h->ndiscard++] = (struct iovec){ p, len };
}

void heap_discard_flush(struct heap *h)
{
	os_discard_many(h->discard, h->ndiscard);
	h->ndiscard = 0;
}

static struct bin *heap_bins_for(struct heap *h, uint32_t group)
{
	if (group >= TALLY_MAX_GROUPS)
		return NULL;
	if (!h->gbins[group])
		h->gbins[group] = heap_meta_alloc(h, sizeof(struct bin) * CLASS_COUNT);
	return h->gbins[group];
}

void heap_drain_xspans(struct heap *h)
{
	struct span *sp = atomic_exchange_explicit(&h->xspans, NULL, memory_order_acq_rel);
	while (sp) {
		/* read the link before draining: once xfree is empty a pusher may
		 * push the span again, and that writes xnext */
		struct span *next = sp->xnext;
		span_drain(h, sp);
		sp = next;
	}
}

/* A span the owner's fast paths may be using while the purger sweeps (purge.c):
 * the current span of its bin (malloc's), or skip (that of the block a free is
 * at). Bins' heads change only on the owner's slow paths. */
static bool heap_span_in_use(const struct heap *h, const struct span *sp, const struct span *skip)
{
	return sp == skip || h->gbins[sp->group][sp->cls].head == sp;
}

/* owned: the purger's sweep of an owned heap, which leaves the spans in use
 * alone (on the dirty list, for the owner's next sweep). */
static void heap_sweep_dirty(struct heap *h, bool force, bool owned, const struct span *skip)
{
	struct span *sp = h->dirty, *keep = NULL;

	h->dirty = NULL;
	while (sp) {
		struct span *next = sp->dirty_next;
		if (sp->state == SPAN_ACTIVE &&
		    ((!force && h->now_ms - sp->stamp_ms < tally_purge_ms) ||
		     (owned && heap_span_in_use(h, sp, skip)))) {
			sp->dirty_next = keep;
			keep = sp;
		} else {
			span_set_flags(sp, sp->flags & ~SPAN_DIRTY);
			if (sp->state == SPAN_ACTIVE)
				span_reclaim(h, sp);
		}
		sp = next;
	}
	h->dirty = keep;
}

/* force: every active span gives back its free pages, and the empty ones
 * (the bins' current spans included) are retired. */
static void heap_sweep_all(struct heap *h)
{
	for (struct segment *seg = h->segs; seg; seg = seg->next) {
		for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
			struct span *sp = &seg->spans[i];
			if (sp->state != SPAN_ACTIVE)
				continue;
			if (span_used(sp) == 0)
				span_make_empty(h, sp);
			else
				span_reclaim(h, sp);
		}
	}
	while (h->lru_head)
		span_retire(h, h->lru_head);
}

void heap_sweep(struct heap *h, bool force)
{
	heap_drain_xspans(h);
	heap_sweep_dirty(h, force, false, NULL);
	if (force)
		heap_sweep_all(h);
	while (h->lru_head && h->now_ms - h->lru_head->stamp_ms >= tally_purge_ms)
		span_retire(h, h->lru_head);
	heap_discard_flush(h);
	large_sweep(h, force);
}

/*
 * The purger's sweep of a heap whose owner may be in a fast path meanwhile
 * (purge.c): as heap_sweep without force, but it leaves alone what those may
 * touch (the spans in use, the foreign-free lists, the heap's records) and
 * counts and records what it moves in acct.
 */
void heap_purge_sweep(struct heap *h, const struct span *skip, struct heap *acct)
{
	h->acct = acct;
	h->now_ms = acct->now_ms;
	heap_sweep_dirty(h, false, true, skip);
	while (h->lru_head && h->now_ms - h->lru_head->stamp_ms >= tally_purge_ms)
		span_retire(h, h->lru_head);
	heap_discard_flush(h);
	h->acct = NULL;
}

/* When a sweep of h will next have something to do (UINT64_MAX: nothing
 * pending); by whoever may touch the heap. owned: for heap_purge_sweep,
 * which leaves the spans in use (skip) and the foreign frees alone. */
uint64_t heap_due(const struct heap *h, bool owned, const struct span *skip)
{
	uint64_t due = UINT64_MAX;

	if (!owned && atomic_load_explicit(&h->xspans, memory_order_relaxed))
		return 0;
	for (const struct span *sp = h->dirty; sp; sp = sp->dirty_next) {
		if (sp->state != SPAN_ACTIVE)
			return 0;
		if (owned && heap_span_in_use(h, sp, skip))
			continue;
		if (sp->stamp_ms + tally_purge_ms < due)
			due = sp->stamp_ms + tally_purge_ms;
	}
	if (h->lru_head && h->lru_head->stamp_ms + tally_purge_ms < due)
		due = h->lru_head->stamp_ms + tally_purge_ms;
	return due;
}

/* Sweep a heap no thread owns, on behalf of `by` (its clock and thread id),
 * under the heaps lock. */
static void orphan_sweep(struct heap *o, const struct heap *by, bool force)
{
	/* no owner answers for it: the sweep does, before it moves anything */
	if (ev_tracing())
		cut_poll(o);
	o->now_ms = by->now_ms;
	o->tid = by->tid;
	/* no owner writes the chain of an orphan (a fork's child orphans the
	 * heaps of the threads it has not) */
	foreign_batch_flush(o);
	heap_sweep(o, force);
	if (ev_tracing())
		ev_flush(o);
}

/* The purger: every orphan whose sweep is due, on behalf of `by`, under the
 * heaps lock. Returns when the next one is due (UINT64_MAX: never). */
uint64_t heap_sweep_orphans(struct heap *by)
{
	uint64_t next = UINT64_MAX;

	for (struct heap *o = orphans; o; o = o->orphan_next) {
		uint64_t due = heap_due(o, false, NULL);
		if (due <= by->now_ms) {
			orphan_sweep(o, by, false);
			due = heap_due(o, false, NULL);
		}
		if (due < next)
			next = due;
	}
	return next;
}

/* An orphan's foreign frees and retained spans would wait for an adopter
 * forever; live threads sweep them at their ticks, one at a time. */
static void heap_sweep_an_orphan(struct heap *self)
{
	if (pthread_mutex_trylock(&tally_heaps_lock))
		return;
	struct heap *o = orphans;
	if (o) {
		/* rotate, so that every orphan gets its turn */
		orphans = o->orphan_next;
		o->orphan_next = NULL;
		struct heap **tail = &orphans;
		while (*tail)
			tail = &(*tail)->orphan_next;
		*tail = o;
		orphan_sweep(o, self, false);
	}
	pthread_mutex_unlock(&tally_heaps_lock);
}

void heap_tick(struct heap *h)
{
	h->tick = TICK_OPS;
	foreign_batch_flush(h);
	h->now_ms = os_now_ms();
	if (h->now_ms - h->last_sweep_ms >= tally_purge_ms / 4) {
		h->last_sweep_ms = h->now_ms;
		heap_sweep(h, false);
		heap_sweep_an_orphan(h);
	}
	if (ev_tracing() && h->batch.count && h->now_ms - h->last_flush_ms >= FLUSH_MS)
		ev_flush(h);
}

/*
 * The slow path of a small allocation (malloc.c): make the head of the bin
 * of class cls a span with a non-empty free list, or return NULL when memory
 * is exhausted. The heap's own work comes first (its tick, the foreign frees
 * waiting for it), then a span of the bin; else the heap's oldest empty span,
 * given to the class with its pages resident (span_repurpose: no fault and
 * no system call, where an unassigned span's pages fault in one by one),
 * else an unassigned span of its segments or of a new segment.
 */
struct span *heap_refill(struct heap *h, unsigned cls)
{
	struct bin *b = &h->bins[cls];
	struct span *sp;

	if (--h->tick <= 0)
		heap_tick(h);
	if (atomic_load_explicit(&h->xspans, memory_order_relaxed))
		heap_drain_xspans(h);
	sp = span_find_free(h, b);
	if (sp)
		return sp;
	if (h->lru_head) {
		sp = h->lru_head;
		span_repurpose(h, sp, cls);
		return sp;
	}
	sp = segment_claim_span(h);
	if (!sp)
		sp = segment_claim_new_span(h);
	if (!sp)
		return NULL;
	span_claim(h, sp, cls);
	return sp;
}

TALLY_API void tally_alloc_collect(int force)
{
	op_start(tally_tls_heap);
	struct heap *h = heap_get();
	if (!h)
		return;
	h->now_ms = os_now_ms();
	foreign_batch_flush(h);
	heap_sweep(h, force != 0);
	if (force) {
		pthread_mutex_lock(&tally_heaps_lock);
		for (struct heap *o = orphans; o; o = o->orphan_next)
			orphan_sweep(o, h, true);
		pthread_mutex_unlock(&tally_heaps_lock);
	}
	if (ev_tracing())
		ev_flush(h);
	op_end(h);
	purge_poll();
}

TALLY_API void tally_alloc__set_group(uint32_t group)
{
	op_start(tally_tls_heap);
	struct heap *h = heap_get();
	if (!h)
		return;
	struct bin *b = heap_bins_for(h, group);
	if (!b) /* unknown group or no memory for its bins: stay in root */
		group = 0, b = h->bins0;
	h->group = group;
	h->bins = b;
	heap_direct_fill(h);
	op_end(h);
}

/* fork: no lock may be held by a thread that will not exist in the child, and
 * the child adopts the heaps of the threads it did not inherit. */
static void fork_prepare(void)
{
	pthread_mutex_lock(&tally_heaps_lock);
	large_lock_prepare();
	segment_lock_prepare();
	sample_lock_prepare();
}

static void fork_parent(void)
{
	sample_lock_release();
	segment_lock_release();
	large_lock_release();
	pthread_mutex_unlock(&tally_heaps_lock);
}

static void fork_child(void)
{
	struct heap *self = tally_tls_heap != &tally_heap_none ? tally_tls_heap : NULL;

	sample_lock_release();
	segment_lock_release();
	large_lock_release();
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		/* the child's purger starts afresh, when its own frees ask for it */
		h->purge_kicks = 0;
		if (h == self || h->orphaned || h == tally_purge_heap)
			continue;
		heap_set_owner(h, 0);
		atomic_store_explicit(&h->purge, PURGE_NONE, memory_order_relaxed);
		h->orphaned = true;
		h->orphan_next = orphans;
		orphans = h;
	}
	if (self)
		self->tid = os_gettid();
	purge_fork_child();
	pthread_mutex_unlock(&tally_heaps_lock);
}

__attribute__((constructor)) static void heaps_ctor(void)
{
	pthread_atfork(fork_prepare, fork_parent, fork_child);
}
