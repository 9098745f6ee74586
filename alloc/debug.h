/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Invariant checks of the debug build, in the spirit of mimalloc's
 * mi_assert_internal: compiled only with TALLY_DEBUG (the sanitizer build of
 * the unit tests), and nothing at all otherwise, not even the evaluation of
 * their arguments. A failed check is a bug of the allocator's: it says which
 * and stops, as tally_fatal does.
 */
#ifndef TALLY_ALLOC_DEBUG_H
#define TALLY_ALLOC_DEBUG_H

#include "span.h"

#ifdef TALLY_DEBUG
void tally_assert_fail(const char *what, const char *file, int line) __attribute__((noreturn));
#define TALLY_ASSERT_INTERNAL(cond)                                                                \
	((cond) ? (void)0 : tally_assert_fail(#cond, __FILE__, __LINE__))
#else
#define TALLY_ASSERT_INTERNAL(cond) ((void)0)
#endif

/*
 * Where a span's bytes are, term by term (span.c's header says it by state),
 * found by a walk of its metadata, its free list and its page bitmap rather
 * than read from its counters, which the walk is then checked against.
 */
struct span_bytes {
	uint64_t segment_overhead;
	/* live + rounding + cache: slots allocated, or freed by another thread
	 * and not drained (their metadata is not free) */
	uint64_t held;
	/* of held: foreign frees in flight (exact while no other thread frees
	 * into the span) */
	uint64_t cache;
	uint64_t span_free;
	uint64_t returned;
	uint64_t virgin;
	uint64_t hysteresis;
	uint64_t parked_bytes; /* of returned: free slots' bytes on discarded pages */
	uint32_t free_slots;   /* on the free list */
	uint32_t parked_slots; /* free, with a discarded page (not on the free list) */
	uint32_t stray_links;  /* links to no free slot of the span: 0, or 1 (the walk stops) */
};

#ifdef TALLY_DEBUG
/* The byte map of sp; its owner's (or the purger's, or under the heaps lock
 * for an orphan), as for any transition. */
void span_bytes_of(const struct span *sp, struct span_bytes *out);
uint64_t span_bytes_sum(const struct span_bytes *b);
/* Every byte of the span in exactly one term, as its state says and its
 * counters agree: TALLY_ASSERT_INTERNAL on each. */
void span_check(const struct span *sp);
#define SPAN_CHECK(sp) span_check(sp)
#else
#define SPAN_CHECK(sp) ((void)0)
#endif

#endif /* TALLY_ALLOC_DEBUG_H */
