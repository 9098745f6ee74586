// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * free and its relatives. The fast path takes a block of the calling
 * thread's heap back into its span's free list; a block of another thread's
 * heap goes, as fast, onto its span's foreign-free list (the owner drains it
 * at its next refill); anything else (large blocks, aligned pointers inside
 * a slot, bad pointers, a heap the purger holds) is a slow operation, as in
 * malloc.c, whose header says how the purger fits in.
 */
#include <errno.h>
#include <stdlib.h>

#include "api.h"
#include "purge.h"

static const char *const lookup_never[] = {
	"free of a pointer it never allocated",
	"realloc of a pointer it never allocated",
	"malloc_usable_size of a pointer it never allocated",
};
static const char *const lookup_freed[] = {
	"double free or free of a pointer it never allocated",
	"realloc of a freed block or of a pointer it never allocated",
	"malloc_usable_size of a freed block or of a pointer it never allocated",
};
static const char *const lookup_inside[] = {
	"free of a pointer into the middle of a block",
	"realloc of a pointer into the middle of a block",
	"malloc_usable_size of a pointer into the middle of a block",
};

void small_lookup(void *p, struct small_ref *r, enum lookup_by by)
{
	struct span *sp = span_of(p);
	uint32_t off = (uint32_t)((uintptr_t)p & (SPAN_SIZE - 1));

	if (unlikely(sp->state == SPAN_UNASSIGNED || off < sp->slot_off))
		tally_fatal(lookup_never[by], p);
	uint32_t i = span_slot_index(sp, p);
	if (unlikely(i >= sp->bump))
		tally_fatal(lookup_never[by], p);
	char *slot = span_slot(sp, i);
	uint16_t m = span_meta(sp)[i];
	if (unlikely(!meta_owned(m)))
		tally_fatal(lookup_freed[by], p);
	if (unlikely(slot != (char *)p && !(m & META_ALIGNED)))
		tally_fatal(lookup_inside[by], p);
	r->sp = sp;
	r->idx = i;
	r->slot = slot;
	r->meta = m;
	r->q = meta_requested(sp->size, m);
}

/* A chain of blocks, head to tail linked through their first words, onto
 * sp's foreign-free list in one exchange (and, the list going non-empty, the
 * span onto its owner's list of spans to drain). */
static void xfree_push(struct span *sp, void *head, void *tail)
{
	void *top = atomic_load_explicit(&sp->xfree, memory_order_relaxed);
	do {
		*(void **)tail = top;
	} while (!atomic_compare_exchange_weak_explicit(
		&sp->xfree, &top, head, memory_order_release, memory_order_relaxed));
	if (!top) {
		struct heap *owner = sp->heap;
		struct span *x = atomic_load_explicit(&owner->xspans, memory_order_relaxed);
		do {
			sp->xnext = x;
		} while (!atomic_compare_exchange_weak_explicit(
			&owner->xspans, &x, sp, memory_order_release, memory_order_relaxed));
	}
}

/* The freeing heap h takes a foreign free's figures: the block's slot into
 * its cache, q bytes into its group's frees. */
static void foreign_figures(struct heap *h, struct span *sp, size_t q)
{
	h->stats.cache += sp->size;
	struct group_ctr *g = &h->group_counters[sp->group];
	g->dealloc_bytes += q;
	g->dealloc_objs++;
}

/* A block of another heap's span, its metadata marked META_FOREIGN by the
 * caller, onto the span's foreign-free list; h takes the figures. */
static void foreign_push(struct heap *h, struct span *sp, void *slot, size_t q)
{
	xfree_push(sp, slot, slot);
	foreign_figures(h, sp, q);
}

/* The untraced foreign frees of one span wait in the freeing heap's chain
 * (h->xb_*) and go onto its xfree list together: when a free goes to
 * another span, at XB_MAX of them, at the heap's tick and at its thread's
 * exit. One exchange per chain, where one per block cost a fifth of
 * xmalloc's time (perf, cpu-clock: foreign_push 20.5 %), the span's line
 * bouncing between the two CPUs at every free. Until then they are the
 * freeing heap's cache, as they are on the list until the owner drains it;
 * the owner's span counts them used, so it stays assigned. */
#define XB_MAX 64

void foreign_batch_flush(struct heap *h)
{
	if (h->xb_span) {
		xfree_push(h->xb_span, h->xb_head, h->xb_tail);
		h->xb_span = NULL;
		h->xb_n = 0;
	}
}

static inline void foreign_batch(struct heap *h, struct span *sp, void *p)
{
	if (h->xb_span != sp) {
		foreign_batch_flush(h);
		h->xb_span = sp;
		h->xb_tail = p;
		h->xb_head = NULL;
	}
	*(void **)p = h->xb_head;
	h->xb_head = p;
	if (++h->xb_n >= XB_MAX)
		foreign_batch_flush(h);
}

static void small_free_foreign(struct heap *h, struct small_ref *r)
{
	struct span *sp = r->sp;
	uint16_t old = __atomic_fetch_or(&span_meta(sp)[r->idx], META_FOREIGN, __ATOMIC_RELAXED);
	if (unlikely(old != r->meta))
		tally_fatal("double free (two threads at once)", r->slot);
	foreign_push(h, sp, r->slot, r->q);
	ev(h, TALLY_EV_FREE_FOREIGN, 0, sp->group, (uint32_t)r->q, sp->size);
}

static inline void small_free(struct heap *h, struct small_ref *r)
{
	struct span *sp = r->sp;
	if (ev_tracing())
		sample_freeing(h, sp, r->slot);

	if (unlikely(sp->heap != h)) {
		small_free_foreign(h, r);
	} else {
		uint32_t s = sp->size;
		span_meta(sp)[r->idx] = META_FREE;
		span_push_free(sp, r->slot);
		ev(h, TALLY_EV_FREE, 0, sp->group, (uint32_t)r->q, s);
		if (unlikely(span_used_dec(sp)))
			span_free_slow(h, sp);
	}
	if (unlikely(--h->tick <= 0))
		heap_tick(h);
}

__attribute__((noinline)) void tally_free(void *p, size_t expect_q)
{
	if (!p)
		return;
	struct heap *h = heap_get();
	if (unlikely(!h))
		tally_fatal("no heap for a free (out of memory)", p);
	if (likely(seg_map_has(p))) {
		struct small_ref r;
		small_lookup(p, &r, BY_FREE);
		if (unlikely(expect_q != SIZE_MAX && expect_q != r.q))
			tally_fatal("free_sized with a size other than the one allocated", p);
		small_free(h, &r);
		return;
	}
	if (!large_free(h, p, expect_q))
		tally_fatal("free of a pointer it never allocated (or a wrong free_sized size)", p);
}

__attribute__((noinline)) static void free_slow(void *p, size_t expect_q)
{
	op_start(tally_tls_heap);
	tally_free(p, expect_q);
	op_end_slow();
}

__attribute__((noinline)) static void free_traced(void *p);

/* What the free fast path leaves to the end: the span needs seeing to, or a
 * traced batch is full. A tail call, so that the fast path saves no register. */
__attribute__((noinline, cold)) static void free_tail(struct span *sp, bool slow, bool full)
{
	struct heap *h = tally_tls_heap;
	op_begin_tail(h);
	if (slow)
		span_free_slow(h, sp);
	if (full)
		ev_flush(h);
	op_end(h);
	purge_poll();
}

/* What the foreign free's fast path leaves to a slow operation: the heap's
 * tick. */
__attribute__((noinline, cold)) static void foreign_tail(struct heap *h)
{
	op_begin_tail(h);
	heap_tick(h);
	op_end(h);
	purge_poll();
}

/*
 * A block of another thread's heap, untraced: pushed on its span's
 * foreign-free list, as small_free_foreign does, without the slow
 * operation around it. The calling thread's own heap takes the figures (its
 * cache and the group's frees: owner-only counters, which the purger never
 * writes) and nothing else of it is touched, so a purge of it may be under
 * way. Anything unusual goes the slow way: no heap yet, the block not
 * allocated (a double free, or a foreign free in flight), a span of the
 * thread's own heap (the purger has turned its owner_tp off).
 */
__attribute__((noinline)) static void free_foreign(struct span *sp, void *p, uint16_t *cell)
{
	struct heap *h = tally_tls_heap;
	uint16_t m = __atomic_load_n(cell, __ATOMIC_RELAXED);

	if (unlikely(h == &tally_heap_none || sp->heap == h || !meta_owned(m) ||
		     atomic_load_explicit(&h->purge, memory_order_relaxed))) {
		free_slow(p, SIZE_MAX);
		return;
	}
	/* a plain store, not the slow path's fetch-or: only this thread frees
	 * the block (two threads freeing it at once is a double free the slow
	 * path alone catches), and the owner writes other entries */
	__atomic_store_n(cell, m | META_FOREIGN, __ATOMIC_RELAXED);
	foreign_figures(h, sp, meta_requested(sp->size, m));
	foreign_batch(h, sp, p);
	if (unlikely(--h->tick <= 0))
		foreign_tail(h);
}

/* The end of the fast path: the block's slot goes back on its span's list. */
static inline __attribute__((always_inline)) void free_own(void *p, struct span *sp, uint16_t *cell,
							   bool traced)
{
	/* the entry as it is: the reader decodes it (TALLY_EV_FREE_META) */
	bool full = traced && ev_word(tally_tls_heap, sp, TALLY_EV_FREE_META, *cell);
	/* a relaxed atomic store, so that it is an immediate store rather than
	 * a zeroed register and a store */
	__atomic_store_n(cell, META_FREE, __ATOMIC_RELAXED);
	span_push_free(sp, p);
	if (unlikely(span_used_dec(sp)))
		free_tail(sp, true, full);
	else if (unlikely(full))
		free_tail(sp, false, true);
}

/* Traced, in a span that holds samples: the block may be one. */
__attribute__((noinline)) static void free_sampled(void *p, struct span *sp, uint16_t *cell)
{
	if (span_sample_hit(sp, (uint32_t)(span_cell_product(sp, p) >> 32)))
		sample_forget_fast(p);
	free_own(p, sp, cell, true);
}

/*
 * The fast path: a block of the calling thread's heap, freed exactly once,
 * not aligned. Anything else, and every check that fails, takes tally_free,
 * which sorts out which it was (and stops on a bad pointer). Untraced, the
 * first test also fails while a tracer is attached (arena_has_untraced),
 * which sends the call to the traced path.
 */
static inline __attribute__((always_inline)) void free_as(void *p, bool traced)
{
	if (unlikely(traced ? !arena_has(p) : !arena_has_untraced(p))) {
		/* untraced, the test fails for a block outside the arena or
		 * while a tracer is attached, which the traced path's own test
		 * tells apart (its slow path takes the first): no look at the
		 * semaphore here, 2 instructions a traced free */
		if (!traced)
			free_traced(p);
		else
			free_slow(p, SIZE_MAX);
		return;
	}
	struct span *sp = span_of(p);
	uint64_t prod = span_cell_product(sp, p);
	/* at a cell's start (with recip = ceil(2^32 / size), the low half of
	 * the product is below recip exactly when size divides the offset, for
	 * any offset inside a span; unassigned spans have recip 0), ours */
	if (unlikely((uint32_t)prod >= sp->recip)) {
		free_slow(p, SIZE_MAX);
		return;
	}
	if (unlikely(sp->owner_tp != thread_pointer())) {
		if (traced)
			free_slow(p, SIZE_MAX);
		else
			free_foreign(sp, p, &sp->cells[prod >> 32]);
		return;
	}
	uint16_t *cell = &sp->cells[prod >> 32];
	/* (the cells of the metadata itself, of the tail and of slots never
	 * handed out read as free) An aligned block whose pointer is at its
	 * cell's start is at its slot's start, and frees as any other. */
	if (unlikely(!meta_owned(*cell))) {
		free_slow(p, SIZE_MAX);
		return;
	}
	/* a block that may be sampled (its bit in its span's): out of line,
	 * so that the fast path makes no call and keeps no register */
	if (unlikely(traced && span_sample_maybe(sp, (uint32_t)(prod >> 32)))) {
		free_sampled(p, sp, cell);
		return;
	}
	free_own(p, sp, cell, traced);
}

/* The same, its heap's answer first (a cut's request: internal.h). */
__attribute__((noinline, cold)) static void free_answer(void *p)
{
	cut_poll(tally_tls_heap);
	free_as(p, true);
}

/* While a tracer is attached: the same fast path, with its records. */
__attribute__((noinline)) static void free_traced(void *p)
{
	/* a cut's request first (internal.h), out of line */
	if (cut_due(tally_tls_heap)) {
		free_answer(p);
		return;
	}
	free_as(p, true);
}

TALLY_API void TA(free)(void *p)
{
	/* before the look at the span's owner_tp, which the purger turns off
	 * before it reads this (purge.c): the frequent side of common/fence.h */
	__atomic_store_n(&tally_tls_freeing, p, __ATOMIC_RELEASE);
	fence_light();
#if defined(TALLY_ALLOC_TEST_SINK)
	free_traced(p); /* recording always on */
#else
	free_as(p, false);
#endif
}

TALLY_API void TA(free_sized)(void *p, size_t n)
{
	free_slow(p, n);
}

TALLY_API void TA(free_aligned_sized)(void *p, size_t align, size_t n)
{
	(void)align;
	free_slow(p, n);
}
