/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the malloc family's two files share: malloc.c (allocation, realloc,
 * aligned blocks) and free.c (free, its fast paths, the look-up of a small
 * block): the public names, the ends of slow operations, the look-up.
 */
#ifndef TALLY_ALLOC_API_H
#define TALLY_ALLOC_API_H

#include "internal.h"

/* C23, not yet in this libc's headers */
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);

/* The unit tests run the allocator beside the sanitizers' malloc, under
 * other names. */
#ifdef TALLY_ALLOC_PREFIX
#include "include/tally_alloc_prefixed.h"
#define TA(name) tally_p_##name
#else
#define TA(name) name
#endif

/* A slow part reached from a fast path: the operation is a slow one from
 * here on, and waits if the purger holds the heap. */
static inline void op_begin_tail(struct heap *h)
{
	op_begin(h);
	if (unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
}

/* malloc.c */
void op_end_slow(void);

/* free.c */
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
void small_lookup(void *p, struct small_ref *r, enum lookup_by by);
void tally_free(void *p, size_t expect_q);

#endif /* TALLY_ALLOC_API_H */
