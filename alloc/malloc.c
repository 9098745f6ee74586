// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The malloc family. Small requests (up to 32 KiB) come from the calling
 * thread's heap without a lock; larger ones, and alignments the classes cannot
 * serve, from large.c. C++ new/delete reach these through libstdc++.
 *
 * The purger (purge.c) may sweep the heap of a thread that is in a fast path
 * meanwhile, but never in a slow one: every other path is a slow operation,
 * op_begin to op_end (heap.h), and gets the heap from heap_get, which
 * waits for the purger and restores what it turned off. The fast paths
 * publish only what free is freeing (tally_tls_freeing); purge.c says why
 * that is enough.
 */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "purge.h"

/* C23, not yet in this libc's headers */
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);

/* The unit tests run the allocator beside the sanitizers' malloc, under
 * other names. */
#ifdef TALLY_ALLOC_PREFIX
#include "tally_alloc_prefixed.h"
#define TA(name) tally_p_##name
#else
#define TA(name) name
#endif

/* A slow part reached from a fast path: the operation is a slow one from
 * here on, and waits if the purger holds the heap. */
static void op_begin_tail(struct heap *h)
{
	op_begin(h);
	if (unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
}

/* The span's fold and the heap's tick every 512 allocations, a full traced
 * batch, a sample (sample.c): a tail call, so that the fast path saves no
 * register. `end`: from the fast path, whose operation it ends. */
__attribute__((noinline, cold)) static void *tick_and_return(struct heap *h, struct span *sp,
							     void *p, size_t q, bool end)
{
	if (end)
		op_begin_tail(h);
	if ((int64_t)sp->acc < 0) {
		span_fold_acc(sp);
		heap_tick(h);
	}
	if (h->sample_left < 0 && ev_tracing())
		sample_mark(h, p, q, sp->group, false);
	if (h->batch.count == TALLY_BATCH_WORDS)
		ev_flush(h);
	if (end) {
		op_end(h);
		purge_poll();
		if (unlikely(h->sample.p))
			sample_run(h);
	}
	return p;
}

/* Take the head slot of a span whose free list is not empty, for q bytes
 * whose metadata is m; `traced` is a constant at each call site, so the
 * untraced fast path carries no record; `end` too: the fast path's pop is no
 * slow operation (the slow ones end where they began). */
static inline __attribute__((always_inline)) void *
span_pop_as(struct heap *h, struct span *sp, size_t q, uint16_t m, bool traced, bool end)
{
	struct free_slot *p = sp->free;
	free_link_check(p, p->next);
	sp->free = p->next;
	/* the next allocation of the class takes the new head: its line has
	 * time to arrive (the load of the next link is what the fast path
	 * waits on) */
	__builtin_prefetch(p->next, 1, 3);
	sp->cells[span_cell_product(sp, p) >> 32] = m;
	sp->used++;
	bool full = traced && ev_word(h, sp, TALLY_EV_ALLOC, (uint32_t)q);
	bool sample = traced && (h->sample_left -= (int64_t)q) < 0;
	/* every 512 allocations the counter turns negative: fold, and tick */
	uint64_t acc = sp->acc + ((1ULL << ACC_SHIFT) | q);
	sp->acc = acc;
	if (unlikely((int64_t)acc < 0 || full || sample))
		return tick_and_return(h, sp, p, q, end);
	return p;
}

static inline void *span_pop(struct heap *h, struct span *sp, size_t q, uint16_t flag)
{
	return span_pop_as(h, sp, q, meta_encode(sp->size, q) | flag, ev_tracing(), false);
}

static void *small_alloc(struct heap *h, unsigned cls, size_t q, uint16_t flag)
{
	struct span *sp = h->bins[cls].head;

	if (unlikely(!sp || !sp->free)) {
		sp = heap_refill(h, cls);
		if (unlikely(!sp))
			return NULL;
	}
	return span_pop(h, sp, q, flag);
}

__attribute__((noinline)) static void *tally_malloc(size_t q, bool zero)
{
	struct heap *h = heap_get();
	void *p;

	if (unlikely(!h)) {
		errno = ENOMEM;
		return NULL;
	}
	if (likely(q <= CLASS_MAX)) {
		p = small_alloc(h, size_to_class(q), q, 0);
		if (p && zero)
			memset(p, 0, q);
	} else {
		/* a fresh mapping is zero; large_alloc clears a pooled one */
		p = large_alloc(h, q, 0, zero);
	}
	if (unlikely(!p))
		errno = ENOMEM;
	return p;
}

/* Where a small block lives and what it holds; aborts on a pointer the
 * allocator never gave out or one already freed. */
struct small_ref {
	struct span *sp;
	uint32_t idx;
	char *slot;
	uint16_t meta;
	size_t q;
};

/* Who looks a pointer up, for the diagnostic: each says what it was asked. */
enum lookup_by { BY_FREE, BY_REALLOC, BY_USABLE_SIZE };
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

static inline void small_lookup(void *p, struct small_ref *r, enum lookup_by by)
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

/* A span's foreign-free list went non-empty: tell the owner which span to
 * drain. */
static void xspans_push(struct span *sp)
{
	struct heap *owner = sp->heap;
	struct span *top = atomic_load_explicit(&owner->xspans, memory_order_relaxed);
	do {
		sp->xnext = top;
	} while (!atomic_compare_exchange_weak_explicit(
		&owner->xspans, &top, sp, memory_order_release, memory_order_relaxed));
}

static void small_free_foreign(struct heap *h, struct small_ref *r)
{
	struct span *sp = r->sp;
	uint16_t old = __atomic_fetch_or(&span_meta(sp)[r->idx], META_FOREIGN, __ATOMIC_RELAXED);
	if (unlikely(old != r->meta))
		tally_fatal("double free (two threads at once)", r->slot);
	void *head = atomic_load_explicit(&sp->xfree, memory_order_relaxed);
	do {
		*(void **)r->slot = head;
	} while (!atomic_compare_exchange_weak_explicit(
		&sp->xfree, &head, r->slot, memory_order_release, memory_order_relaxed));
	if (!head)
		xspans_push(sp);
	uint32_t s = sp->size;
	h->stats.cache += s;
	struct group_ctr *g = &h->group_counters[sp->group];
	g->dealloc_bytes += r->q;
	g->dealloc_objs++;
	ev(h, TALLY_EV_FREE_FOREIGN, 0, sp->group, (uint32_t)r->q, s);
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

__attribute__((noinline)) static void tally_free(void *p, size_t expect_q)
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

/* Aligned blocks: inside a slot when the class can hold the padding, else a
 * direct mapping aligned by trimming. */
static void *tally_aligned(size_t align, size_t q)
{
	struct heap *h = heap_get();
	void *p = NULL;

	if (unlikely(!h))
		goto out;
	if (align <= SLOT_ALIGN)
		return tally_malloc(q, false);
	/* every slot is SLOT_ALIGN-aligned: at most align - SLOT_ALIGN bytes of
	 * padding; the pointer must stay inside its slot even for q == 0 */
	size_t need = (q ? q : 1) + align - SLOT_ALIGN;
	if (need >= q && need <= CLASS_MAX) {
		unsigned cls = size_to_class(need);
		size_t s = tally_classes[cls].size;
		if (meta_fits((uint32_t)s, q)) {
			char *slot = small_alloc(h, cls, q, META_ALIGNED);
			if (!slot)
				goto out;
			return (void *)(((uintptr_t)slot + align - 1) & ~(uintptr_t)(align - 1));
		}
	}
	p = large_alloc(h, q, align, false);
out:
	if (!p)
		errno = ENOMEM;
	return p;
}

/* The end of an operation that took a slow path (the thread's heap may be
 * another than at its start: the first call of a thread gets one). */
static void op_end_slow(void)
{
	struct heap *h = tally_tls_heap;

	/* a thread past its exit hand-over borrowed a heap for this call:
	 * hand it back, with the call's records */
	if (unlikely(tally_tls_exited) && h != &tally_heap_none)
		heap_release(h);
	else
		op_end(h);
	purge_poll();
	if (unlikely(h->sample.p))
		sample_run(h);
}

/* Where the fast paths give up: slow operations. */
__attribute__((noinline)) static void *malloc_slow(size_t n, bool zero)
{
	op_begin(tally_tls_heap);
	void *p = tally_malloc(n, zero);
	op_end_slow();
	return p;
}

__attribute__((noinline)) static void free_slow(void *p, size_t expect_q)
{
	op_begin(tally_tls_heap);
	tally_free(p, expect_q);
	op_end_slow();
}

static void *aligned_op(size_t align, size_t q)
{
	op_begin(tally_tls_heap);
	void *p = tally_aligned(align, q);
	op_end_slow();
	return p;
}

/* The fast path of the classes above DIRECT_MAX: the class from the size,
 * its current span from the direct table's class entries. Out of line, so
 * that the small path stays as short as it was. */
static inline __attribute__((always_inline)) void *medium_as(struct heap *h, size_t n, bool traced)
{
	struct span *sp = h->direct[DIRECT_CLASS(size_to_class(n))];
	if (likely(sp->free))
		return span_pop_as(h, sp, n, meta_encode(sp->size, n), traced, true);
	return malloc_slow(n, false);
}

__attribute__((noinline)) static void *malloc_medium(struct heap *h, size_t n)
{
	return medium_as(h, n, false);
}

__attribute__((noinline)) static void *malloc_medium_traced(struct heap *h, size_t n)
{
	return medium_as(h, n, true);
}

static bool pow2(size_t a)
{
	return a && !(a & (a - 1));
}

/* The fast path: a small request whose bin has a slot ready. Everything else
 * (first call of a thread, refills, large blocks) goes through tally_malloc.
 * (Folding the semaphore into the size test, as free does, measured slower
 * here: the separate test is one fused compare-and-branch.) */
static inline __attribute__((always_inline)) void *malloc_as(size_t n, bool traced)
{
	struct heap *h = tally_tls_heap;
	if (likely(n <= DIRECT_MAX)) {
		struct span *sp = h->direct[direct_index(n)];
		if (likely(sp->free)) /* a class below META_Q_LIMIT */
			return span_pop_as(h, sp, n, (uint16_t)(n + 1), traced, true);
	} else if (n <= CLASS_MAX) {
		return traced ? malloc_medium_traced(h, n) : malloc_medium(h, n);
	}
	return malloc_slow(n, false);
}

/* While a tracer is attached: the same fast path, with its records. */
__attribute__((noinline)) static void *malloc_traced(size_t n)
{
	return malloc_as(n, true);
}

TALLY_API void *TA(malloc)(size_t n)
{
	if (unlikely(ev_tracing()))
		return malloc_traced(n);
	return malloc_as(n, false);
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
	void *head = atomic_load_explicit(&sp->xfree, memory_order_relaxed);
	do {
		*(void **)p = head;
	} while (!atomic_compare_exchange_weak_explicit(&sp->xfree, &head, p, memory_order_release,
							memory_order_relaxed));
	if (!head)
		xspans_push(sp);
	h->stats.cache += sp->size;
	struct group_ctr *g = &h->group_counters[sp->group];
	g->dealloc_bytes += meta_requested(sp->size, m);
	g->dealloc_objs++;
	if (unlikely(--h->tick <= 0))
		foreign_tail(h);
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
		if (!traced && ev_tracing())
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
	if (unlikely(traced && sp->sampled) && span_sample_hit(sp, prod >> 32))
		sample_forget_fast(p);
	bool full = traced &&
		    ev_word(tally_tls_heap, sp, TALLY_EV_FREE, meta_requested(sp->size, *cell));
	/* a relaxed atomic store, so that it is an immediate store rather than
	 * a zeroed register and a store */
	__atomic_store_n(cell, META_FREE, __ATOMIC_RELAXED);
	span_push_free(sp, p);
	if (unlikely(span_used_dec(sp)))
		free_tail(sp, true, full);
	else if (unlikely(full))
		free_tail(sp, false, true);
}

/* While a tracer is attached: the same fast path, with its records. */
__attribute__((noinline)) static void free_traced(void *p)
{
	free_as(p, true);
}

TALLY_API void TA(free)(void *p)
{
	/* before the look at the span's owner_tp, which the purger turns off
	 * before it reads this (purge.c) */
	__atomic_store_n(&tally_tls_freeing, p, __ATOMIC_RELEASE);
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
#if defined(TALLY_ALLOC_TEST_SINK)
	free_traced(p); /* recording always on */
#else
	free_as(p, false);
#endif
}

TALLY_API void *TA(calloc)(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	/* a small block from the fast path is cleared here; a large one may
	 * be a fresh mapping, zero already, that a memset would fault in */
	if (total > CLASS_MAX)
		return malloc_slow(total, true);
	void *p = TA(malloc)(total);
	if (p)
		memset(p, 0, total);
	return p;
}

static void *realloc_op(void *p, size_t n);

TALLY_API void *TA(realloc)(void *p, size_t n)
{
	op_begin(tally_tls_heap);
	void *np = realloc_op(p, n);
	op_end_slow();
	return np;
}

static void *realloc_op(void *p, size_t n)
{
	if (!p)
		return tally_malloc(n, false);
	if (n == 0) { /* as glibc: free and return NULL */
		tally_free(p, SIZE_MAX);
		return NULL;
	}
	struct heap *h = heap_get();
	if (unlikely(!h)) {
		errno = ENOMEM;
		return NULL;
	}
	size_t old_q;
	if (seg_map_has(p)) {
		struct small_ref r;
		small_lookup(p, &r, BY_REALLOC);
		struct span *sp = r.sp;
		if (n <= CLASS_MAX && size_to_class(n) == sp->cls && sp->group == h->group &&
		    sp->heap == h && !(r.meta & META_ALIGNED)) {
			/* same slot: live and rounding trade bytes. As an allocation
			 * of n and a free of the old size by the owner: the span's
			 * counters take the allocation, the metadata the free. */
			span_meta(sp)[r.idx] = meta_encode(sp->size, n);
			sp->abytes += n;
			sp->nalloc++;
			ev(h, TALLY_EV_REALLOC, 0, sp->group, (uint32_t)r.q, n);
			if (ev_tracing())
				sample_resized(h, p, p, n, sp->group, false);
			return p;
		}
		old_q = r.q;
	} else {
		size_t len;
		if (!large_size(p, &old_q, &len))
			tally_fatal("realloc of a pointer it never allocated", p);
		if (n > CLASS_MAX) {
			void *np = large_realloc(h, p, n);
			if (!np)
				errno = ENOMEM;
			return np;
		}
	}
	void *np = tally_malloc(n, false);
	if (!np)
		return NULL;
	memcpy(np, p, old_q < n ? old_q : n);
	tally_free(p, SIZE_MAX);
	return np;
}

TALLY_API void *TA(reallocarray)(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return TA(realloc)(p, total);
}

TALLY_API int TA(posix_memalign)(void **out, size_t align, size_t n)
{
	if (!pow2(align) || align % sizeof(void *))
		return EINVAL;
	void *p = aligned_op(align, n);
	if (!p)
		return ENOMEM;
	*out = p;
	return 0;
}

/*
 * memalign and aligned_alloc as glibc has them (programs written against it
 * rely on it): an alignment up to SLOT_ALIGN (16) is malloc's own, one that
 * is not a power of two is rounded up to the next, and only one past
 * SIZE_MAX / 2 + 1 (no power of two to round to) is refused with EINVAL.
 * posix_memalign alone checks its argument (POSIX says EINVAL).
 */
static void *memalign_glibc(size_t align, size_t n)
{
	if (align <= SLOT_ALIGN)
		return malloc_slow(n, false);
	if (align > SIZE_MAX / 2 + 1) {
		errno = EINVAL;
		return NULL;
	}
	if (!pow2(align))
		align = (size_t)1 << (64 - __builtin_clzll(align));
	return aligned_op(align, n);
}

TALLY_API void *TA(aligned_alloc)(size_t align, size_t n)
{
	return memalign_glibc(align, n);
}

TALLY_API void *TA(memalign)(size_t align, size_t n)
{
	return memalign_glibc(align, n);
}

TALLY_API void *TA(valloc)(size_t n)
{
	return aligned_op(OS_PAGE, n);
}

TALLY_API void *TA(pvalloc)(size_t n)
{
	size_t r = (n + OS_PAGE - 1) & ~(OS_PAGE - 1);
	if (r < n) {
		errno = ENOMEM;
		return NULL;
	}
	return aligned_op(OS_PAGE, r ? r : OS_PAGE);
}

TALLY_API size_t TA(malloc_usable_size)(void *p)
{
	if (!p)
		return 0;
	if (seg_map_has(p)) {
		struct small_ref r;
		small_lookup(p, &r, BY_USABLE_SIZE);
		return (size_t)(r.slot + r.sp->size - (char *)p);
	}
	size_t q, len;
	if (!large_size(p, &q, &len))
		tally_fatal("malloc_usable_size of a pointer it never allocated", p);
	return len;
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
