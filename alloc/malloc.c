// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The malloc family but free (free.c). Small requests (up to 32 KiB) come
 * from the calling thread's heap without a lock, every class through a fast
 * path; larger ones, and alignments the classes cannot serve, from large.c.
 * C++ new/delete reach these through libstdc++.
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

#include "api.h"
#include "purge.h"

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

/*
 * *x += v and *x -= v, telling whether the result is negative: on x86-64
 * one instruction on memory whose sign flag the caller branches on (the
 * compiler loads, adds, stores, then tests a register, and joined the
 * traced path's three tests with setcc and or).
 */
static inline __attribute__((always_inline)) bool add_negative(uint64_t *x, uint64_t v)
{
#if defined(__x86_64__) && !defined(__clang__)
	bool neg;
	__asm__("addq %2, %0" : "+m"(*x), "=@ccs"(neg) : "er"(v) : "cc");
	return neg;
#else
	*x += v;
	return (int64_t)*x < 0;
#endif
}
static inline __attribute__((always_inline)) bool sub_negative(int64_t *x, int64_t v)
{
#if defined(__x86_64__) && !defined(__clang__)
	bool neg;
	__asm__("subq %2, %0" : "+m"(*x), "=@ccs"(neg) : "er"(v) : "cc");
	return neg;
#else
	*x -= v;
	return *x < 0;
#endif
}

/* What a traced pop that branched early leaves to its tail: the record and
 * the count, or the count alone. */
enum pop_left { POP_LEFT_RECORD, POP_LEFT_ACC };

__attribute__((noinline, cold)) static void *pop_tail(struct heap *h, struct span *sp, void *p,
						      size_t q, bool end, enum pop_left left)
{
	if (left == POP_LEFT_RECORD)
		(void)ev_word(h, sp, TALLY_EV_ALLOC, (uint32_t)q); /* a full batch: below */
	sp->acc += (1ULL << ACC_SHIFT) | q;
	return tick_and_return(h, sp, p, q, end);
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
	/* each update branches on its own flags, to a tail that makes the
	 * ones left (pop_tail) */
	if (traced) {
		if (unlikely(sub_negative(&h->sample_left, (int64_t)q)))
			return pop_tail(h, sp, p, q, end, POP_LEFT_RECORD);
		if (unlikely(ev_word(h, sp, TALLY_EV_ALLOC, (uint32_t)q)))
			return pop_tail(h, sp, p, q, end, POP_LEFT_ACC);
	}
	/* every 512 allocations the counter turns negative: fold, and tick */
	if (unlikely(add_negative(&sp->acc, (1ULL << ACC_SHIFT) | q)))
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

/* A block the allocator's own code asked for (heap.h: tally_tls_internal):
 * metadata of the heap that pays, never the program's (large.c). Its fresh
 * mapping is zero. */
__attribute__((noinline, cold)) static void *internal_alloc(size_t q, size_t align)
{
	struct heap *h = tally_tls_internal;
	op_begin_tail(h);
	void *p = large_alloc_internal(h, q, align);
	op_end(h);
	if (!p)
		errno = ENOMEM;
	return p;
}

__attribute__((noinline)) static void *tally_malloc(size_t q, bool zero)
{
	if (unlikely(tally_tls_internal))
		return internal_alloc(q, 0);
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

/* Aligned blocks: inside a slot when the class can hold the padding, else a
 * direct mapping aligned by trimming. */
static void *tally_aligned(size_t align, size_t q)
{
	if (unlikely(tally_tls_internal))
		return internal_alloc(q, align);
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
void op_end_slow(void)
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
	op_start(tally_tls_heap);
	void *p = tally_malloc(n, zero);
	op_end_slow();
	return p;
}

static void *aligned_op(size_t align, size_t q)
{
	op_start(tally_tls_heap);
	void *p = tally_aligned(align, q);
	op_end_slow();
	return p;
}

/*
 * A small request whose class's current span ran dry: its bin finds the
 * next span (heap_refill), without tally_malloc's sorting out of what the
 * request is, which the fast path knows already. (Through malloc_slow, a
 * refill cost 250 instructions in alloc-test, where one malloc in seven
 * needs one: a tenth of its frees land in spans filled long before, which
 * the next refill takes up one slot at a time.)
 */
__attribute__((noinline)) static void *malloc_refill(size_t n)
{
	struct heap *h = tally_tls_heap;
	if (unlikely(h == &tally_heap_none || tally_tls_internal))
		return malloc_slow(n, false);
	op_start(h);
	if (unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
	struct span *sp = heap_refill(h, size_to_class(n));
	void *p = likely(sp) ? span_pop(h, sp, n, 0) : NULL;
	op_end_slow();
	if (unlikely(!p))
		errno = ENOMEM;
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
	return malloc_refill(n);
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
static inline __attribute__((always_inline)) void *malloc_as(struct heap *h, size_t n, bool traced)
{
	if (likely(n <= DIRECT_MAX)) {
		struct span *sp = h->direct[direct_index(n)];
		if (likely(sp->free)) /* a class below META_Q_LIMIT */
			return span_pop_as(h, sp, n, (uint16_t)(n + 1), traced, true);
		return malloc_refill(n);
	} else if (n <= CLASS_MAX) {
		return traced ? malloc_medium_traced(h, n) : malloc_medium(h, n);
	}
	return malloc_slow(n, false);
}

/* The same, its heap's answer first (a cut's request: internal.h). */
__attribute__((noinline, cold)) static void *malloc_answer(size_t n)
{
	cut_poll(tally_tls_heap);
	return malloc_as(tally_tls_heap, n, true);
}

/* While a tracer is attached: the same fast path, with its records. */
__attribute__((noinline)) static void *malloc_traced(size_t n)
{
	struct heap *h = tally_tls_heap;
	/* a cut's request first (internal.h), out of line */
	if (cut_due(h))
		return malloc_answer(n);
	return malloc_as(h, n, true);
}

TALLY_API void *TA(malloc)(size_t n)
{
	if (unlikely(ev_tracing()))
		return malloc_traced(n);
	return malloc_as(tally_tls_heap, n, false);
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
	op_start(tally_tls_heap);
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
	/* every byte malloc_usable_size gave is the program's (Redis' sds
	 * writes its tail), so the move copies them all, as glibc, jemalloc
	 * and mimalloc do; the requested size lost the tail (redis-server
	 * preloaded read its config back corrupt and exited 1) */
	size_t old_usable;
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
		old_usable = (size_t)(r.slot + sp->size - (char *)p);
	} else {
		size_t old_q;
		if (!large_size(p, &old_q, &old_usable))
			tally_fatal("realloc of a pointer it never allocated", p);
		/* the allocator's own block stays its own (large.c) */
		if (n > CLASS_MAX || large_is_internal(p)) {
			void *np = large_realloc(h, p, n);
			if (!np)
				errno = ENOMEM;
			return np;
		}
	}
	void *np = tally_malloc(n, false);
	if (!np)
		return NULL;
	memcpy(np, p, old_usable < n ? old_usable : n);
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
