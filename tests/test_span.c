// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Spans through their states (alloc/span.c): claimed, bumped, freed into by
 * their owner and by another thread, emptied, reclaimed and reused, retired
 * and claimed again; at each step, where the span's 64 KiB are, term by term,
 * as span.c's header says, from the debug build's byte map (span_check.c).
 * The map is a walk of the span, not its counters, and sums to SPAN_SIZE only
 * when every slot is in exactly one place. Under ASan and UBSan, with the
 * allocator under tally_p_ names (as tests/test_alloc_unit.c), every batch
 * replayed and the heap's figures checked against the replay (alloc_oracle.c),
 * and every transition checked by span_check itself (TALLY_DEBUG).
 *
 * The classes used, and their geometry (layout.h):
 *   16 B     metadata at the span's start (slot_off 8192), 3584 slots
 *   200 B    (class 208) metadata in the segment header, slots across pages
 *   400 B    metadata in the segment header, 163 slots, a 336-byte tail
 *   4096 B   metadata inline in the descriptor, one slot a page, 16 slots
 *   8192 B   the same, 8 slots
 *   16384 B  the same, 4 slots
 *   32768 B  the same, 2 slots
 */
#define TALLY_DEBUG 1 /* the byte map's declarations (debug.h) */

#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "alloc_oracle.h"
#include "expect_abort.h"

void tally_alloc_test_purge_hold(int hold);

/* The span's byte map, which must account for every byte of it. */
static struct span_bytes map_of(const struct span *sp)
{
	struct span_bytes b;

	span_bytes_of(sp, &b);
	if (span_bytes_sum(&b) != SPAN_SIZE)
		fail_msg("span %u: the terms sum to %lu, not SPAN_SIZE", sp->index,
			 (unsigned long)span_bytes_sum(&b));
	assert_int_equal(b.stray_links, 0);
	return b;
}

/* The bytes at or above the bump cursor, and the tail past the last slot. */
static uint64_t above_bump(const struct span *sp)
{
	return SPAN_SIZE - sp->slot_off - (uint64_t)sp->bump * sp->size;
}

static void alloc_n(size_t q, void **v, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		v[i] = T(malloc)(q);
		assert_non_null(v[i]);
	}
}

static void free_n(void **v, unsigned n)
{
	for (unsigned i = 0; i < n; i++)
		T(free)(v[i]);
}

/* A sweep as the heap's tick would run it once the purge delay has passed
 * (the binary's delay is an hour: nothing moves unless a test says so). */
static void sweep_as_if_the_delay_passed(void)
{
	uint32_t saved = tally_purge_ms;

	tally_alloc_test_purge_hold(1);
	tally_purge_ms = 0;
	tally_alloc_collect(0);
	tally_purge_ms = saved;
	tally_alloc_test_purge_hold(0);
}

/* The first block of a class claims a span: its metadata is overhead, its
 * first page of slots is linked (span_free, less the block), the rest and the
 * tail are virgin. Three kinds of geometry. */
static void span__claim_puts_the_metadata_in_overhead_and_the_rest_in_virgin(void **state)
{
	static const struct {
		size_t q;
		uint32_t size, slot_off, first_bump;
	} k[] = {
		/* the slots up to the end of the first page past the metadata */
		{ 16, 16, 8192, (12288 - 8192) / 16 },
		/* slot 10 would cross into the second page */
		{ 400, 400, 0, 10 },
		{ 32768, 32768, 0, 1 },
	};
	(void)state;
	oracle_check("claim: before");
	uint64_t assigned = oracle_stats().spans_assigned;
	for (unsigned i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
		void *p = T(malloc)(k[i].q);
		struct span *sp = span_of(p);
		assert_int_equal(sp->state, SPAN_ACTIVE);
		assert_int_equal(sp->src_term, TALLY_TERM_VIRGIN);
		assert_int_equal(sp->size, k[i].size);
		assert_int_equal(sp->slot_off, k[i].slot_off);
		assert_int_equal(sp->bump, k[i].first_bump);
		struct span_bytes b = map_of(sp);
		assert_int_equal(b.segment_overhead, k[i].slot_off);
		assert_int_equal(b.held, k[i].size);
		assert_int_equal(b.cache, 0);
		assert_int_equal(b.span_free, (uint64_t)(k[i].first_bump - 1) * k[i].size);
		assert_int_equal(b.virgin, above_bump(sp));
		assert_int_equal(b.returned + b.hysteresis, 0);
		T(free)(p);
		/* the bin's current span stays active when it empties */
		assert_int_equal(sp->state, SPAN_ACTIVE);
		assert_int_equal(map_of(sp).span_free, (uint64_t)k[i].first_bump * k[i].size);
	}
	oracle_check("claim: after");
	assert_int_equal(oracle_stats().spans_assigned - assigned, 3);
}

/* Allocation past the linked slots links the next page's worth: virgin ->
 * span_free; once every slot is linked only the tail stays virgin. */
static void span__bump_links_the_next_page_of_slots_from_virgin(void **state)
{
	void *v[163];
	(void)state;
	alloc_n(400, v, 10); /* the ten slots linked by the claim */
	struct span *sp = span_of(v[0]);
	assert_int_equal(sp->bump, 10);
	struct span_bytes b0 = map_of(sp);
	alloc_n(400, v + 10, 1);
	assert_ptr_equal(span_of(v[10]), sp);
	assert_int_equal(sp->bump, 20); /* 8192 / 400: the second page's end */
	struct span_bytes b1 = map_of(sp);
	assert_int_equal(b0.virgin - b1.virgin, 10 * 400);
	assert_int_equal(b1.span_free - b0.span_free, 10 * 400 - 400);
	assert_int_equal(b1.held - b0.held, 400);
	alloc_n(400, v + 11, 163 - 11);
	assert_int_equal(sp->bump, sp->nslots);
	b1 = map_of(sp);
	assert_int_equal(b1.held, 163 * 400);
	assert_int_equal(b1.span_free, 0);
	assert_int_equal(b1.virgin, SPAN_SIZE - 163 * 400); /* the tail: never a slot */
	oracle_check("bump");
	free_n(v, 163);
	assert_int_equal(map_of(sp).span_free, 163 * 400);
}

/* The owner's free: held (live + rounding) -> span_free, slot by slot. */
static void span__owner_free_moves_the_slot_from_held_to_span_free(void **state)
{
	void *v[20];
	(void)state;
	alloc_n(400, v, 20);
	struct span *sp = span_of(v[0]);
	struct span_bytes b0 = map_of(sp);
	free_n(v, 5);
	struct span_bytes b1 = map_of(sp);
	assert_int_equal(b0.held - b1.held, 5 * 400);
	assert_int_equal(b1.span_free - b0.span_free, 5 * 400);
	assert_int_equal(b1.virgin, b0.virgin);
	assert_int_equal(span_used(sp), 15);
	oracle_check("owner free");
	free_n(v + 5, 15);
}

static void *free_in_thread(void *p)
{
	T(free)(p);
	return NULL;
}

/* Another thread's free parks the slot on the span's foreign list (cache,
 * still held in the metadata) until the owner drains it: cache -> span_free. */
static void span__foreign_free_is_cache_until_the_owner_drains_it(void **state)
{
	(void)state;
	void *p = T(malloc)(400);
	struct span *sp = span_of(p);
	struct span_bytes b0 = map_of(sp);
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, free_in_thread, p), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	struct span_bytes b1 = map_of(sp);
	assert_int_equal(b1.cache, 400);
	assert_int_equal(b1.held, b0.held);
	assert_true(span_meta(sp)[span_slot_index(sp, p)] & META_FOREIGN);
	oracle_check("foreign free");
	assert_int_equal(oracle_stats().cache, 400);
	tally_alloc_collect(0); /* drains; the purge delay (an hour) keeps the rest */
	struct span_bytes b2 = map_of(sp);
	assert_int_equal(b2.cache, 0);
	assert_int_equal(b0.held - b2.held, 400);
	assert_int_equal(b2.span_free - b0.span_free, 400);
	oracle_check("drained");
	assert_int_equal(oracle_stats().cache, 0);
}

/* A span whose last block goes, and that is not its bin's current span,
 * becomes EMPTY: all of it is hysteresis. Used again when its bin runs out,
 * it is ACTIVE as before. */
static void span__last_free_makes_it_empty_and_reuse_active_again(void **state)
{
	void *v[17], *w[16];
	(void)state;
	alloc_n(4096, v, 17); /* 16 fill a span; the 17th claims the next */
	struct span *a = span_of(v[0]), *b = span_of(v[16]);
	assert_ptr_not_equal(a, b);
	assert_int_equal(a->bump, a->nslots);
	oracle_check("empty: before");
	uint64_t hyst = oracle_stats().hysteresis;
	free_n(v, 16);
	assert_int_equal(a->state, SPAN_EMPTY);
	struct span_bytes m = map_of(a);
	assert_int_equal(m.hysteresis, SPAN_SIZE);
	assert_int_equal(m.held + m.span_free + m.segment_overhead + m.virgin + m.returned, 0);
	oracle_check("empty");
	assert_int_equal(oracle_stats().hysteresis - hyst, SPAN_SIZE);
	/* b runs out (its 16 slots): the empty span is its bin's again */
	alloc_n(4096, w, 15);
	assert_int_equal(b->bump, b->nslots);
	void *p = T(malloc)(4096);
	assert_ptr_equal(span_of(p), a);
	assert_int_equal(a->state, SPAN_ACTIVE);
	m = map_of(a);
	assert_int_equal(m.hysteresis, 0);
	assert_int_equal(m.held, 4096);
	assert_int_equal(m.span_free, SPAN_SIZE - 4096);
	oracle_check("empty: used again");
	assert_int_equal(oracle_stats().hysteresis, hyst);
	T(free)(p);
	free_n(w, 15);
	T(free)(v[16]);
}

/*
 * A sweep after the purge delay hands back the pages of a live span that
 * hold only free slots (span_free -> returned; the slots with a page gone
 * leave the free list, parked); when the free list runs out, the parked
 * slots are taken back (returned -> span_free).
 */
static void span__reclaim_discards_free_pages_and_reuse_takes_them_back(void **state)
{
	enum { N = 315 }; /* every slot of a 208-byte span */
	static void *v[N], *w[N];
	(void)state;
	alloc_n(200, v, N);
	struct span *sp = span_of(v[0]);
	assert_int_equal(sp->size, 208);
	assert_int_equal(sp->nslots, N);
	assert_ptr_equal(span_of(v[N - 1]), sp);
	/* survivors on pages 0, 5, 10 and 15: slots 0, 100, 200, 300 and 314 */
	for (unsigned i = 0; i < N; i++)
		if (i % 100 && i != N - 1)
			T(free)(v[i]);
	assert_int_equal(sp->returned, 0);
	sweep_as_if_the_delay_passed();
	assert_int_equal(sp->state, SPAN_ACTIVE);
	assert_int_equal(sp->discarded, 0x7bde); /* pages 1-4, 6-9, 11-14 */
	struct span_bytes m = map_of(sp);
	/* free slots' bytes on those pages, and the tail's where the span had a
	 * former life (span_repurpose: its tail is returned, not virgin) */
	uint32_t tail = sp->src_term == TALLY_TERM_RETURNED ? SPAN_SIZE - N * 208 : 0;
	assert_int_equal(m.returned, 12 * OS_PAGE + tail);
	assert_int_equal(sp->returned, 12 * OS_PAGE);
	assert_true(m.parked_slots > 0);
	assert_int_equal(m.held, 5 * 208);
	assert_int_equal(m.span_free + m.returned + m.held, N * 208 + tail);
	oracle_check("reclaimed");
	/* allocate until the free list runs out and the parked slots come back */
	unsigned n = 0;
	while (sp->parked_slots) {
		assert_true(n < N);
		w[n++] = T(malloc)(200);
	}
	assert_int_equal(sp->discarded, 0);
	m = map_of(sp);
	assert_int_equal(m.returned, tail);
	assert_int_equal(m.held, (n + 5) * 208);
	assert_int_equal(m.span_free, (N - n - 5) * 208);
	oracle_check("unreclaimed");
	free_n(w, n);
	for (unsigned i = 0; i < N; i++)
		if (i % 100 == 0 || i == N - 1)
			T(free)(v[i]);
}

static void *retired_span; /* for the next test: a span retired here */

/* An EMPTY span retires after the purge delay: hysteresis and virgin ->
 * returned, the whole span, and it goes back to its segment. */
static void span__retire_after_the_delay_returns_the_whole_span(void **state)
{
	void *v[9];
	(void)state;
	alloc_n(8192, v, 9); /* 8 fill a span, the 9th claims the next */
	struct span *sp = span_of(v[0]);
	assert_ptr_not_equal(span_of(v[8]), sp);
	free_n(v, 8);
	assert_int_equal(sp->state, SPAN_EMPTY);
	oracle_check("retire: before");
	uint64_t assigned = oracle_stats().spans_assigned;
	sweep_as_if_the_delay_passed();
	assert_int_equal(sp->state, SPAN_UNASSIGNED);
	assert_int_equal(sp->src_term, TALLY_TERM_RETURNED);
	struct span_bytes m = map_of(sp);
	assert_int_equal(m.returned, SPAN_SIZE);
	assert_true(segment_of(sp)->free_mask & (1ULL << sp->index));
	oracle_check("retired");
	assert_true(oracle_stats().spans_assigned < assigned);
	retired_span = sp;
	T(free)(v[8]);
}

/* A retired span claimed again: its bytes at or above the bump cursor were
 * handed back, so they are returned, not virgin. */
static void span__claim_of_a_retired_span_keeps_its_untouched_bytes_returned(void **state)
{
	void *v[4 * SPANS_PER_SEGMENT];
	unsigned n = 0;
	(void)state;
	assert_non_null(retired_span);
	/* each claim takes the lowest unassigned span: the retired one comes */
	while (n < sizeof(v) / sizeof(v[0]) && (!n || span_of(v[n - 1]) != retired_span))
		v[n++] = T(malloc)(16384);
	struct span *sp = span_of(v[n - 1]);
	assert_ptr_equal(sp, retired_span);
	assert_int_equal(sp->state, SPAN_ACTIVE);
	assert_int_equal(sp->src_term, TALLY_TERM_RETURNED);
	struct span_bytes m = map_of(sp);
	assert_int_equal(m.virgin, 0);
	assert_int_equal(m.returned, above_bump(sp));
	assert_int_equal(m.held + m.span_free, (uint64_t)sp->bump * sp->size);
	oracle_check("claimed again");
	free_n(v, n);
}

/* A slot taken off the free list and not marked in use: in no term. */
static void lose_a_slot(void)
{
	void *p = T(malloc)(48);
	struct span *sp = span_of(p);
	sp->free = ((struct free_slot *)sp->free)->next;
	span_check(sp);
}

/* A block still in use put on the free list as well: in two terms. */
static void list_a_held_slot(void)
{
	void *p = T(malloc)(48);
	struct span *sp = span_of(p);
	span_push_free(sp, p);
	span_check(sp);
}

/* The counter of returned bytes off from the pages it counts. */
static void miscount_returned(void)
{
	void *p = T(malloc)(48);
	struct span *sp = span_of(p);
	sp->returned += 48;
	span_check(sp);
}

static void span_check__a_broken_span_stops_the_debug_build(void **state)
{
	(void)state;
	expect_abort(lose_a_slot, "internal check failed: span_bytes_sum(&b) == SPAN_SIZE");
	expect_abort(list_a_held_slot, "internal check failed: b.stray_links == 0");
	expect_abort(miscount_returned, "internal check failed: b.parked_bytes == sp->returned");
}

/*
 * A class that needs a span while another class holds an empty one takes it
 * with its pages as they are (span_repurpose): no page is handed back and
 * faulted in again. Its slots on resident pages are linked at once
 * (span_free), those on pages a reclaim had handed back are parked
 * (returned), its new metadata is cleared, and the figures replay.
 */
static void span__an_empty_span_goes_to_another_class_with_its_pages(void **state)
{
	void *v[9];
	(void)state;
	tally_alloc_collect(1); /* no empty span anywhere: the next one is the LRU's head */
	alloc_n(8192, v, 9);	/* 8 fill span a, the 9th claims the next */
	struct span *a = span_of(v[0]);
	for (unsigned i = 1; i < 8; i++)
		T(free)(v[i]);
	sweep_as_if_the_delay_passed(); /* pages 2-15 hold only free slots: handed back */
	assert_int_equal(a->discarded, 0xfffc);
	T(free)(v[0]);
	assert_int_equal(a->state, SPAN_EMPTY);
	oracle_check("repurpose: before");
	struct tally_stats before = oracle_stats();
	void *p = T(malloc)(24); /* class 32: metadata at the span's start (page 0) */
	assert_ptr_equal(span_of(p), a);
	assert_int_equal(a->state, SPAN_ACTIVE);
	assert_int_equal(a->size, 32);
	assert_int_equal(a->slot_off, OS_PAGE);
	assert_int_equal(a->bump, a->nslots);
	assert_int_equal(a->discarded, 0xfffc); /* page 0, the metadata, written */
	struct span_bytes m = map_of(a);
	assert_int_equal(m.segment_overhead, OS_PAGE);
	assert_int_equal(m.held, 32);
	assert_int_equal(m.span_free, OS_PAGE - 32); /* page 1's slots */
	assert_int_equal(m.returned, 14 * OS_PAGE);
	assert_int_equal(m.hysteresis + m.virgin, 0);
	unsigned owned = 0;
	for (uint32_t i = 0; i < a->nslots; i++)
		owned += span_meta(a)[i] != META_FREE;
	assert_int_equal(owned, 1);
	oracle_check("repurposed");
	struct tally_stats after = oracle_stats();
	assert_int_equal(after.spans_assigned, before.spans_assigned);
	assert_int_equal(after.mapped, before.mapped);
	T(free)(p);
	T(free)(v[8]);
}

static void final__everything_freed_and_collected_leaves_nothing(void **state)
{
	(void)state;
	tally_alloc_collect(1);
	oracle_check("final");
	struct tally_stats s = oracle_stats();
	assert_int_equal(s.live, 0);
	assert_int_equal(s.rounding + s.cache + s.span_free + s.hysteresis, 0);
	assert_int_equal(s.spans_assigned, 0);
}

int main(void)
{
	/* an hour: spans move between states only when a test says so */
	setenv("TALLY_ALLOC_PURGE_MS", "3600000", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(span__claim_puts_the_metadata_in_overhead_and_the_rest_in_virgin),
		cmocka_unit_test(span__bump_links_the_next_page_of_slots_from_virgin),
		cmocka_unit_test(span__owner_free_moves_the_slot_from_held_to_span_free),
		cmocka_unit_test(span__foreign_free_is_cache_until_the_owner_drains_it),
		cmocka_unit_test(span__last_free_makes_it_empty_and_reuse_active_again),
		cmocka_unit_test(span__reclaim_discards_free_pages_and_reuse_takes_them_back),
		cmocka_unit_test(span__retire_after_the_delay_returns_the_whole_span),
		cmocka_unit_test(span__claim_of_a_retired_span_keeps_its_untouched_bytes_returned),
		cmocka_unit_test(span_check__a_broken_span_stops_the_debug_build),
		cmocka_unit_test(span__an_empty_span_goes_to_another_class_with_its_pages),
		cmocka_unit_test(final__everything_freed_and_collected_leaves_nothing),
	};
	return cmocka_run_group_tests_name("span", tests, NULL, NULL);
}
