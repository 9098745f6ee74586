// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The replay on synthetic record sequences: each record moves exactly the
 * bytes bpf/contract/tally_events.h says, sequences balance, order does not matter,
 * and malformed input is refused rather than applied.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../user/model/replay.h"

static struct tally_ev E(uint8_t type, uint8_t term, uint16_t group, uint32_t n, uint64_t bytes) {
	return (struct tally_ev){ .type = type,
				  .term = term,
				  .group = group,
				  .n = n,
				  .bytes = bytes };
}

static struct tally_stats
apply(const struct tally_ev *evs, size_t n)
{
	struct tally_replay r;
	struct tally_stats s;
	tally_replay_init(&r);
	for (size_t i = 0; i < n; i++)
		assert_int_equal(tally_replay_record(&r, &evs[i]), 0);
	tally_replay_stats(&r, &s);
	return s;
}

#define SEG (4u << 20)
#define HDR 12288u

/* a segment, a span of 104-byte slots, some allocations and frees */
static const struct tally_ev base_seq[] = {
	{ TALLY_EV_SEG_MAP, 0, 0, HDR, SEG },
	{ TALLY_EV_SPAN_CLAIM, TALLY_TERM_VIRGIN, 0, 1248, 0 },
	{ TALLY_EV_BUMP, TALLY_TERM_VIRGIN, 0, 0, 2808 },
	{ TALLY_EV_ALLOC, 0, 3, 100, 104 },
	{ TALLY_EV_ALLOC, 0, 3, 97, 104 },
	{ TALLY_EV_ALLOC, 0, 0, 1, 104 },
	{ TALLY_EV_FREE, 0, 3, 97, 104 },
};

static void replay__segment_span_and_slots_balance(void **state)
{
	(void)state;
	struct tally_stats s = apply(base_seq, 7);
	assert_int_equal(s.mapped, SEG);
	assert_int_equal(s.segment_overhead, HDR + 1248);
	assert_int_equal(s.live, 101);
	assert_int_equal(s.rounding, 4 + 103);
	assert_int_equal(s.span_free, 2808 - 208);
	assert_int_equal(s.virgin, SEG - HDR - 1248 - 2808);
	assert_int_equal(s.spans_assigned, 1);
	assert_true(tally_stats_balanced(&s));
	assert_int_equal(tally_stats_predicted_resident(&s), HDR + 1248 + 2808);
}

static void replay__foreign_free_parks_bytes_in_cache_until_drained(void **state)
{
	(void)state;
	struct tally_ev seq[9];
	memcpy(seq, base_seq, sizeof(base_seq));
	seq[7] = E(TALLY_EV_FREE_FOREIGN, 0, 3, 100, 104);
	struct tally_stats s = apply(seq, 8);
	assert_int_equal(s.cache, 104);
	assert_int_equal(s.live, 1);
	assert_true(tally_stats_balanced(&s));
	seq[8] = E(TALLY_EV_DRAIN, 0, 0, 0, 104);
	s = apply(seq, 9);
	assert_int_equal(s.cache, 0);
	assert_int_equal(s.span_free, 2808 - 104);
	assert_true(tally_stats_balanced(&s));
}

static void replay__reclaim_empty_retire_and_reuse(void **state)
{
	(void)state;
	struct tally_ev seq[] = {
		base_seq[0],
		base_seq[1],
		base_seq[2],
		E(TALLY_EV_RECLAIM, 0, 0, 0, 1000),
		E(TALLY_EV_UNRECLAIM, 0, 0, 0, 400),
		E(TALLY_EV_SPAN_EMPTY, 0, 0, 1248, 2808 - 600),
		E(TALLY_EV_SPAN_REFILL, 0, 0, 1248, 2808 - 600),
		E(TALLY_EV_SPAN_EMPTY, 0, 0, 1248, 2808 - 600),
	};
	struct tally_stats s = apply(seq, 8);
	assert_int_equal(s.hysteresis, 1248 + 2208);
	assert_int_equal(s.returned, 600);
	assert_int_equal(s.span_free, 0);
	assert_true(tally_stats_balanced(&s));
	/* retire: hysteresis and the span's virgin rest -> returned */
	uint32_t virgin = 65536 - 1248 - 2808;
	struct tally_ev all[9];
	memcpy(all, seq, sizeof(seq));
	all[8] = E(TALLY_EV_SPAN_RETIRE, 0, 0, virgin, 1248 + 2208);
	s = apply(all, 9);
	assert_int_equal(s.hysteresis, 0);
	assert_int_equal(s.returned, 65536);
	assert_int_equal(s.spans_assigned, 0);
	assert_int_equal(s.segment_overhead, HDR);
	assert_true(tally_stats_balanced(&s));
}

static void replay__large_fresh_pool_and_unmap(void **state)
{
	(void)state;
	struct tally_ev seq[] = {
		E(TALLY_EV_LARGE_ALLOC, TALLY_LARGE_FRESH, 2, 4096 - 100, 40960 + 100),
		E(TALLY_EV_LARGE_FREE, TALLY_LARGE_POOL, 2, 4096 - 100, 40960 + 100),
		E(TALLY_EV_LARGE_ALLOC, TALLY_LARGE_POOL, 5, 45056 - 45000, 45000),
	};
	struct tally_stats s = apply(seq, 3);
	assert_int_equal(s.mapped, 45056);
	assert_int_equal(s.live, 45000);
	assert_int_equal(s.rounding, 56);
	assert_int_equal(s.hysteresis, 0);
	assert_int_equal(s.large_count, 1);
	assert_true(tally_stats_balanced(&s));
	struct tally_ev more[] = {
		seq[0],
		seq[1],
		seq[2],
		E(TALLY_EV_LARGE_FREE, TALLY_LARGE_POOL, 5, 56, 45000),
		E(TALLY_EV_POOL_UNMAP, 0, 0, 0, 45056),
	};
	s = apply(more, 5);
	assert_int_equal(s.mapped, 0);
	assert_int_equal(s.large_count, 0);
	assert_int_equal(tally_stats_accounted(&s), 0);
}

static void replay__realloc_in_place_trades_live_for_rounding(void **state)
{
	(void)state;
	struct tally_ev seq[8];
	memcpy(seq, base_seq, sizeof(base_seq));
	seq[7] = E(TALLY_EV_REALLOC, 0, 3, 100, 104);
	struct tally_stats s = apply(seq, 8);
	assert_int_equal(s.live, 105);
	assert_int_equal(s.rounding, 0 + 103);
	assert_true(tally_stats_balanced(&s));
}

static void replay__groups_count_requested_bytes_and_objects(void **state)
{
	(void)state;
	struct tally_replay r;
	struct tally_group_stats g;
	tally_replay_init(&r);
	for (int i = 0; i < 7; i++)
		assert_int_equal(tally_replay_record(&r, &base_seq[i]), 0);
	struct tally_ev ev = E(TALLY_EV_REALLOC, 0, 3, 100, 60);
	assert_int_equal(tally_replay_record(&r, &ev), 0);
	assert_int_equal(tally_replay_group(&r, 3, &g), 0);
	assert_int_equal(g.allocated_bytes, 100 + 97 + 60);
	assert_int_equal(g.allocated_objects, 3);
	assert_int_equal(g.deallocated_bytes, 97 + 100);
	assert_int_equal(g.deallocated_objects, 2);
	assert_int_equal(tally_replay_group(&r, 0, &g), 0);
	assert_int_equal(g.allocated_bytes, 1);
	assert_int_equal(tally_replay_group(&r, TALLY_MAX_GROUPS, &g), -EINVAL);
}

static void replay__order_of_batches_does_not_matter(void **state)
{
	(void)state;
	struct tally_ev rev[7];
	for (int i = 0; i < 7; i++)
		rev[i] = base_seq[6 - i];
	struct tally_stats a = apply(base_seq, 7), b = apply(rev, 7);
	assert_memory_equal(&a, &b, sizeof(a));
}

static void replay__malformed_input_is_refused(void **state)
{
	(void)state;
	struct tally_replay r;
	static struct tally_batch b;
	tally_replay_init(&r);

	struct tally_ev bad_type = E(99, 0, 0, 0, 1), bad_group = E(TALLY_EV_ALLOC, 0, 300, 1, 16);
	struct tally_ev bad_term = E(TALLY_EV_BUMP, 7, 0, 0, 16);
	assert_int_equal(tally_replay_record(&r, &bad_type), -EINVAL);
	assert_int_equal(tally_replay_record(&r, &bad_group), -EINVAL);
	assert_int_equal(tally_replay_record(&r, &bad_term), -EINVAL);
	assert_int_equal(r.rejected, 3);
	assert_int_equal(r.records, 0);

	b.magic = TALLY_BATCH_MAGIC;
	b.version = TALLY_BATCH_VERSION;
	b.source = TALLY_SRC_ALLOC;
	b.count = 0;
	tally_ev_put(b.words, &b.count, &base_seq[0]);
	tally_ev_put(b.words, &b.count, &base_seq[1]);
	uint32_t used = b.count;
	size_t full = offsetof(struct tally_batch, words) + used * sizeof(b.words[0]);
	assert_int_equal(tally_replay_batch(&r, &b, full - 1), -EINVAL); /* truncated */
	b.magic = 0;
	assert_int_equal(tally_replay_batch(&r, &b, full), -EINVAL);
	b.magic = TALLY_BATCH_MAGIC;
	b.count = TALLY_BATCH_WORDS + 1;
	assert_int_equal(tally_replay_batch(&r, &b, sizeof(b)), -EINVAL);
	b.count = used - 1; /* a two-word record cut in half */
	assert_int_equal(tally_replay_batch(&r, &b, full), -EINVAL);
	b.count = used;
	assert_int_equal(r.records, 0);
	assert_int_equal(tally_replay_batch(&r, &b, full), 0);
	assert_int_equal(r.records, 2);
	assert_int_equal(r.batches, 1);
	assert_int_equal(r.mapped, SEG);
}

/* The traced free's word carries the slot's raw metadata entry
 * (TALLY_EV_FREE_META): tally_ev_next hands every reader a FREE of the
 * requested size, in both encodings (requested + 1 below
 * TALLY_META_Q_LIMIT, rounding + 1 above, the aligned bit ignored), and
 * refuses an entry no allocated block has. */
static void replay__free_meta_word_reads_as_a_free_of_the_requested_size(void **state)
{
	(void)state;
	const uint32_t big = 24576; /* a class at or above TALLY_META_Q_LIMIT */
	__u64 w[6] = {
		tally_ev_word(TALLY_EV_FREE_META, 3, 97 + 1, 104),
		tally_ev_word(TALLY_EV_FREE_META, 4, (big - 20000 + 1) | 0x4000, big),
		tally_ev_word(TALLY_EV_FREE_META, 3, 0, 104),		  /* a free entry */
		tally_ev_word(TALLY_EV_FREE_META, 3, 0x8000, 104),	  /* bits 0..13 zero */
		tally_ev_word(TALLY_EV_FREE_META, 3, 105 + 1, 104),	  /* more than the slot */
		tally_ev_word(TALLY_EV_FREE_META, 3, 1u << 16 | 98, 104), /* not a u16 */
	};
	struct tally_ev e;
	uint32_t pos = 0;

	assert_true(TALLY_META_Q_LIMIT <= big);
	assert_int_equal(tally_ev_next(w, 6, &pos, &e), 0);
	assert_int_equal(e.type, TALLY_EV_FREE);
	assert_int_equal(e.group, 3);
	assert_int_equal(e.n, 97);
	assert_int_equal(e.bytes, 104);
	assert_int_equal(tally_ev_next(w, 6, &pos, &e), 0);
	assert_int_equal(e.type, TALLY_EV_FREE);
	assert_int_equal(e.group, 4);
	assert_int_equal(e.n, 20000);
	assert_int_equal(e.bytes, big);
	for (uint32_t i = 2; i < 6; i++) {
		pos = i;
		assert_int_equal(tally_ev_next(w, 6, &pos, &e), -1);
	}

	/* replayed: the same figures as the FREE it stands for (base_seq's
	 * last record) */
	struct tally_replay r;
	struct tally_stats got, want = apply(base_seq, sizeof(base_seq) / sizeof(base_seq[0]));
	tally_replay_init(&r);
	for (size_t i = 0; i + 1 < sizeof(base_seq) / sizeof(base_seq[0]); i++)
		assert_int_equal(tally_replay_record(&r, &base_seq[i]), 0);
	pos = 0;
	assert_int_equal(tally_ev_next(w, 1, &pos, &e), 0);
	assert_int_equal(tally_replay_record(&r, &e), 0);
	tally_replay_stats(&r, &got);
	assert_memory_equal(&got, &want, sizeof(got));

	/* in a batch's run of words: the same, and a bad entry refused */
	uint64_t applied = 0, refused = 0;
	__u64 run[2] = { tally_ev_word(TALLY_EV_ALLOC, 3, 97, 104), w[0] };
	assert_int_equal(tally_replay_words(&r, run, 0, 2, -1, &applied, &refused), 0);
	assert_int_equal(applied, 2);
	tally_replay_stats(&r, &got);
	assert_memory_equal(&got, &want, sizeof(got));
	run[1] = w[4];
	assert_int_equal(tally_replay_words(&r, run, 0, 2, -1, &applied, &refused), -EINVAL);
}

/* The one check every reader of user/ makes of a batch (tally_batch_check):
 * each fault on its own, and the first in the contract's order when there
 * are several, which heap_rings_before relies on (it goes on past a wrong
 * version or count, not past a wrong magic or source). */
static void replay__batch_check_names_the_first_fault(void **state)
{
	(void)state;
	static struct tally_batch b;
	const size_t hdr = offsetof(struct tally_batch, words);
	const __u32 alloc = TALLY_SRC_BIT(TALLY_SRC_ALLOC);

	b = (struct tally_batch){ .magic = TALLY_BATCH_MAGIC,
				  .version = TALLY_BATCH_VERSION,
				  .source = TALLY_SRC_ALLOC,
				  .count = 3 };
	assert_int_equal(tally_batch_check(&b, hdr + 24, alloc), TALLY_BATCH_FAULT_NONE);
	assert_int_equal(tally_batch_check(&b, sizeof(b), alloc), TALLY_BATCH_FAULT_NONE);
	assert_int_equal(tally_batch_check(&b, hdr - 1, alloc), TALLY_BATCH_FAULT_SHORT);
	assert_int_equal(tally_batch_check(&b, hdr + 23, alloc), TALLY_BATCH_FAULT_COUNT);
	assert_int_equal(tally_batch_check(&b, hdr + 24, TALLY_SRC_BIT(TALLY_SRC_CUPTI)),
			 TALLY_BATCH_FAULT_SOURCE);
	b.count = TALLY_BATCH_WORDS + 1;
	assert_int_equal(tally_batch_check(&b, ~0ull, alloc), TALLY_BATCH_FAULT_COUNT);
	b.count = 3;
	/* a source past the mask's 32 bits is no source, whatever the mask */
	b.source = 32 + TALLY_SRC_ALLOC;
	assert_int_equal(tally_batch_check(&b, hdr + 24, ~0u), TALLY_BATCH_FAULT_SOURCE);
	b.source = TALLY_SRC_ALLOC;
	b.version = TALLY_BATCH_VERSION + 1;
	assert_int_equal(tally_batch_check(&b, hdr + 24, alloc), TALLY_BATCH_FAULT_VERSION);
	/* several faults: the first in the contract's order */
	b.count = TALLY_BATCH_WORDS + 1;
	assert_int_equal(tally_batch_check(&b, hdr + 24, alloc), TALLY_BATCH_FAULT_VERSION);
	b.source = TALLY_SRC_CUPTI;
	assert_int_equal(tally_batch_check(&b, hdr + 24, alloc), TALLY_BATCH_FAULT_SOURCE);
	b.magic = 0;
	assert_int_equal(tally_batch_check(&b, hdr + 24, alloc), TALLY_BATCH_FAULT_MAGIC);
	assert_int_equal(tally_batch_check(&b, hdr - 1, alloc), TALLY_BATCH_FAULT_SHORT);
}

/* The peak: record by record, inside a run of one-word records as well as
 * at a record of its own, with the whole identity and each group's live
 * at that record, however the run that passed it was summed. */
static void replay__peak_inside_a_run_with_its_figures(void **state)
{
	struct tally_replay r, one;
	struct tally_stats at, st;
	__u64 w[8];
	uint64_t applied = 0, refused = 0;

	(void)state;
	tally_replay_init(&r);
	for (size_t i = 0; i < 3; i++) /* the segment, its span, the bump */
		assert_int_equal(tally_replay_record(&r, &base_seq[i]), 0);
	/* group 3: +100 +200 +300 -200 -100; group 0 then: +50 -50 */
	w[0] = tally_ev_word(TALLY_EV_ALLOC, 3, 100, 104);
	w[1] = tally_ev_word(TALLY_EV_ALLOC, 3, 200, 208);
	w[2] = tally_ev_word(TALLY_EV_ALLOC, 3, 300, 312);
	w[3] = tally_ev_word(TALLY_EV_FREE_META, 3, 200 + 1, 208); /* the traced free's form */
	w[4] = tally_ev_word(TALLY_EV_FREE_FOREIGN, 3, 100, 104);
	w[5] = tally_ev_word(TALLY_EV_ALLOC, 0, 50, 56);
	w[6] = tally_ev_word(TALLY_EV_FREE, 0, 50, 56);
	w[7] = tally_ev_word(TALLY_EV_ALLOC, 3, 400, 416);
	assert_int_equal(tally_replay_words(&r, w, 0, 7, -1, &applied, &refused), 0);
	assert_int_equal(refused, 0);
	assert_int_equal(r.peak.live, 600);
	assert_int_equal(r.peak.seq, 3 + 3);
	tally_replay_mark_stats(&r.peak, &at);
	assert_int_equal(at.live, 600);
	assert_int_equal(at.rounding, 4 + 8 + 12);
	assert_int_equal(at.span_free, 2808 - 624);
	/* the identity holds at the peak as it does now */
	assert_int_equal(at.mapped, at.live + at.rounding + at.cache + at.span_free + at.returned +
					    at.virgin + at.hysteresis + at.segment_overhead);
	assert_int_equal(tally_replay_group_peak(&r, 3), 600);
	assert_int_equal(tally_replay_group_peak(&r, 0), 0);
	/* summed in one go, the figures now are those of the plain sum */
	one = r;
	tally_replay_stats(&one, &st);
	assert_int_equal(st.live, 300);
	assert_int_equal(st.cache, 104);
	/* a new peak, in a record of its own: the group's peak follows */
	assert_int_equal(tally_replay_words(&r, w, 7, 8, -1, &applied, &refused), 0);
	assert_int_equal(r.peak.live, 700);
	assert_int_equal(tally_replay_group_peak(&r, 3), 700);
	assert_int_equal(r.live_moves, 8);
	/* the mapped peak: a large mapping, then its unmap */
	struct tally_ev big = E(TALLY_EV_LARGE_ALLOC, TALLY_LARGE_FRESH, 0, 4000, 1 << 20);
	assert_int_equal(tally_replay_record(&r, &big), 0);
	big.type = TALLY_EV_LARGE_FREE;
	assert_int_equal(tally_replay_record(&r, &big), 0);
	assert_int_equal(r.peak_mapped.mapped, SEG + (1 << 20) + 4000);
	assert_int_equal(r.peak_mapped.live, 700 + (1 << 20));
	assert_int_equal(r.peak.live, 700 + (1 << 20));
	assert_int_equal(tally_replay_group_peak(&r, 3), 700);
	assert_int_equal(tally_replay_group_peak(&r, 0), 1 << 20);
}

/* A cut no moment had is never the peak: group 2's foreign free applied
 * before its allocation (another heap's batch, later in the stream) leaves
 * it below zero while group 1 rises; the peak stays where every figure could
 * be the process's, and no group's peak is negative. Record by record and
 * as words (each a run of its own). */
static void replay__no_peak_at_a_cut_with_a_group_below_zero(void **state)
{
	(void)state;
	const struct tally_ev seq[] = {
		E(TALLY_EV_ALLOC, 0, 1, 100, 104),	/* live 100: the peak */
		E(TALLY_EV_FREE_FOREIGN, 0, 2, 50, 56), /* group 2 at -50 */
		E(TALLY_EV_ALLOC, 0, 1, 200, 208),	/* 250, over a group below 0 */
		E(TALLY_EV_FREE, 0, 1, 200, 208),	/* 50 */
		E(TALLY_EV_ALLOC, 0, 2, 50, 56),	/* 100: group 2's allocation */
	};
	const size_t n = sizeof(seq) / sizeof(seq[0]);

	for (int as_words = 0; as_words < 2; as_words++) {
		struct tally_replay r;
		uint64_t applied = 0, refused = 0;
		tally_replay_init(&r);
		for (size_t i = 0; i < 3; i++)
			assert_int_equal(tally_replay_record(&r, &base_seq[i]), 0);
		for (size_t i = 0; i < n; i++) {
			if (as_words) {
				__u64 w = tally_ev_word(seq[i].type, seq[i].group, seq[i].n,
							(__u32)seq[i].bytes);
				assert_int_equal(
					tally_replay_words(&r, &w, 0, 1, -1, &applied, &refused),
					0);
			} else {
				assert_int_equal(tally_replay_record(&r, &seq[i]), 0);
			}
		}
		assert_int_equal(r.live, 100);
		assert_int_equal(r.peak.live, 100);
		assert_int_equal(r.peak.seq, 3 + 1);
		assert_int_equal(tally_replay_group_peak(&r, 1), 100);
		assert_int_equal(tally_replay_group_peak(&r, 2), 0);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(replay__segment_span_and_slots_balance),
		cmocka_unit_test(replay__foreign_free_parks_bytes_in_cache_until_drained),
		cmocka_unit_test(replay__reclaim_empty_retire_and_reuse),
		cmocka_unit_test(replay__large_fresh_pool_and_unmap),
		cmocka_unit_test(replay__realloc_in_place_trades_live_for_rounding),
		cmocka_unit_test(replay__groups_count_requested_bytes_and_objects),
		cmocka_unit_test(replay__order_of_batches_does_not_matter),
		cmocka_unit_test(replay__malformed_input_is_refused),
		cmocka_unit_test(replay__free_meta_word_reads_as_a_free_of_the_requested_size),
		cmocka_unit_test(replay__batch_check_names_the_first_fault),
		cmocka_unit_test(replay__peak_inside_a_run_with_its_figures),
		cmocka_unit_test(replay__no_peak_at_a_cut_with_a_group_below_zero),
	};
	return cmocka_run_group_tests_name("replay", tests, NULL, NULL);
}
