// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Applies allocator records to the identity's terms, exactly as
 * bpf/contract/tally_events.h defines each record's movement.
 */
#include <errno.h>
#include <string.h>

#include "replay.h"

void tally_replay_init(struct tally_replay *r)
{
	memset(r, 0, sizeof(*r));
}

static void term_from(struct tally_replay *r, uint8_t term, int64_t bytes)
{
	if (term == TALLY_TERM_VIRGIN)
		r->virgin -= bytes;
	else
		r->returned -= bytes;
}

static void mark_take(const struct tally_replay *r, struct tally_replay_mark *k, uint64_t seq)
{
	*k = (struct tally_replay_mark){ r->mapped,	 r->live,	    r->rounding,
					 r->cache,	 r->span_free,	    r->returned,
					 r->virgin,	 r->hysteresis,	    r->segment_overhead,
					 r->large_count, r->spans_assigned, seq };
}

void tally_replay_mark_now(struct tally_replay *r)
{
	mark_take(r, &r->peak, r->records);
	mark_take(r, &r->peak_mapped, r->records);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		r->groups[g].changed = 0;
}

/* Group g is about to change by the record numbered seq: its live at the
 * peak is kept first if this is its first change since the peak. */
static void group_touch(struct tally_replay *r, uint32_t g, uint64_t seq)
{
	if (g >= r->groups_used)
		r->groups_used = g + 1;
	if (r->groups[g].changed <= r->peak.seq)
		r->groups[g].peak_live = r->groups[g].alloc_bytes - r->groups[g].dealloc_bytes;
	r->groups[g].changed = seq;
}

int64_t tally_replay_group_peak(const struct tally_replay *r, uint32_t group)
{
	if (group >= TALLY_MAX_GROUPS)
		return 0;
	if (r->groups[group].changed <= r->peak.seq)
		return r->groups[group].alloc_bytes - r->groups[group].dealloc_bytes;
	return r->groups[group].peak_live;
}

/*
 * Whether the figures now may be a moment of the process. The sum of
 * several heaps' batches is a staircase (model/peak.c) that may pass
 * through cuts no moment had; one certainly is where a term or a group's
 * live is negative: a thread's frees of another's blocks applied before
 * their allocations. No peak is taken at such a cut (tally demo's decode
 * frees what ingest allocates: top showed ingest's PEAK at -130722 in 1
 * run of 10, the peak taken where ingest was below zero).
 */
static bool cut_possible(const struct tally_replay *r)
{
	if (r->mapped < 0 || r->live < 0 || r->rounding < 0 || r->cache < 0 || r->span_free < 0 ||
	    r->returned < 0 || r->virgin < 0 || r->hysteresis < 0 || r->segment_overhead < 0)
		return false;
	for (uint32_t g = 0; g < r->groups_used; g++)
		if (r->groups[g].alloc_bytes < r->groups[g].dealloc_bytes)
			return false;
	return true;
}

/* After the record numbered seq: a new peak of live or of mapped. */
static void peaks_check(struct tally_replay *r, uint64_t seq)
{
	bool live = r->live > r->peak.live, mapped = r->mapped > r->peak_mapped.mapped;

	if (!(live || mapped) || !cut_possible(r))
		return;
	if (live)
		mark_take(r, &r->peak, seq);
	if (mapped)
		mark_take(r, &r->peak_mapped, seq);
}

static void group_alloc(struct tally_replay *r, uint16_t g, int64_t q)
{
	group_touch(r, g, r->records + 1);
	r->groups[g].alloc_bytes += q;
	r->groups[g].alloc_objs++;
}

static void group_dealloc(struct tally_replay *r, uint16_t g, int64_t q)
{
	group_touch(r, g, r->records + 1);
	r->groups[g].dealloc_bytes += q;
	r->groups[g].dealloc_objs++;
}

/* A run of one-word records (alloc, free, its FREE_META form, foreign free) of one group, the
 * bulk of any busy target's stream: one consumer must keep up with a thread
 * that does nothing but allocate (about 250 million records a second). The
 * model's figures are sums, so the run is summed in a few totals without a
 * branch per record (vectorised): all n, all bytes, and n, bytes and count
 * of the allocations, bytes of the frees; every figure follows from those
 * (a foreign free's bytes are the rest). Returns where the run ends: at a
 * record of another kind or group. */
static uint32_t word_run_end(const __u64 *words, uint32_t pos, uint32_t count)
{
	__u64 key = words[pos] & 0xff00;

	for (; pos < count; pos++) {
		__u64 w = words[pos];
		if ((w & 0xff00) != key)
			break;
		/* a FREE_META whose entry no block has ends the run, for
		 * tally_ev_next to refuse */
		if ((uint8_t)(w - TALLY_EV_ALLOC) > TALLY_EV_FREE_FOREIGN - TALLY_EV_ALLOC &&
		    ((uint8_t)w != TALLY_EV_FREE_META ||
		     tally_meta_requested((__u32)(w >> 40), (__u32)(w >> 16) & TALLY_EV_WORD_MAX) <
			     0))
			break;
	}
	return pos;
}

/* A run's word's n: a FREE_META's requested size from its metadata entry
 * (word_run_end refused the entries no block has) */
static inline uint64_t word_n(uint64_t w)
{
	uint64_t n = (w >> 16) & TALLY_EV_WORD_MAX;

	if ((w & 0xff) == TALLY_EV_FREE_META)
		n = (uint64_t)tally_meta_requested((__u32)(w >> 40), (__u32)n);
	return n;
}

/* words[pos..end), all of group g, summed into the figures. */
__attribute__((target_clones("avx2", "default"), optimize("tree-vectorize"))) static void
word_run_sum(struct tally_replay *r, const __u64 *words, uint32_t pos, uint32_t end, uint32_t g)
{
	uint64_t n_all = 0, b_all = 0, n_a = 0, b_a = 0, c_a = 0, b_f = 0;

	for (uint32_t i = pos; i < end; i++) {
		uint64_t w = words[i], t = w & 0xff;
		uint64_t n = word_n(w), b = w >> 40;
		uint64_t ma = -(uint64_t)(t == TALLY_EV_ALLOC),
			 mf = -(uint64_t)(t == TALLY_EV_FREE || t == TALLY_EV_FREE_META);
		n_all += n;
		b_all += b;
		n_a += n & ma;
		b_a += b & ma;
		c_a -= ma;
		b_f += b & mf;
	}
	int64_t n_freed = (int64_t)(n_all - n_a), b_freed = (int64_t)(b_all - b_a);
	r->live += (int64_t)n_a - n_freed;
	r->rounding += ((int64_t)b_a - (int64_t)n_a) - (b_freed - n_freed);
	r->span_free += (int64_t)b_f - (int64_t)b_a;
	r->cache += b_freed - (int64_t)b_f;
	r->groups[g].alloc_bytes += (int64_t)n_a;
	r->groups[g].alloc_objs += (int64_t)c_a;
	r->groups[g].dealloc_bytes += n_freed;
	r->groups[g].dealloc_objs += (int64_t)(end - pos - c_a);
	r->live_moves += end - pos;
}

/* Where in words[pos..end) live, from `from`, is highest above `above`:
 * the index, or end when it never passes it. */
static uint32_t word_run_crest(const __u64 *words, uint32_t pos, uint32_t end, int64_t from,
			       int64_t above)
{
	uint32_t at = end;

	for (uint32_t i = pos; i < end; i++) {
		uint64_t w = words[i];
		int64_t n = (int64_t)word_n(w);
		from += (w & 0xff) == TALLY_EV_ALLOC ? n : -n;
		if (from > above) {
			above = from;
			at = i;
		}
	}
	return at;
}

uint32_t tally_replay_word_run(struct tally_replay *r, const __u64 *words, uint32_t pos,
			       uint32_t count, int32_t rule)
{
	uint32_t g = (uint32_t)(words[pos] >> 8) & 0xff, end = word_run_end(words, pos, count);

	if (end == pos)
		return pos;
	if (rule >= 0 && g == 0)
		g = (uint32_t)rule;
	/* the records are numbered from r->records + 1 (the caller counts them) */
	group_touch(r, g, r->records + (end - pos));
	/* what the run changes, kept to sum it again in two parts */
	const int64_t live0 = r->live, rounding0 = r->rounding, span_free0 = r->span_free,
		      cache0 = r->cache;
	const __typeof__(r->groups[0]) group0 = r->groups[g];
	word_run_sum(r, words, pos, end, g);
	/* no allocation of the run can have passed the peak: done */
	if (live0 + (r->groups[g].alloc_bytes - group0.alloc_bytes) <= r->peak.live)
		return end;
	uint32_t at = word_run_crest(words, pos, end, live0, r->peak.live);
	if (at == end)
		return end;
	/* again, in two parts, the peak's figures taken between them */
	r->live = live0;
	r->rounding = rounding0;
	r->span_free = span_free0;
	r->cache = cache0;
	r->groups[g] = group0;
	r->live_moves -= end - pos;
	word_run_sum(r, words, pos, at + 1, g);
	/* (only g moves in the run: g below zero at its crest is below zero
	 * all along it) */
	if (cut_possible(r)) {
		r->groups[g].changed = r->records + (at + 1 - pos);
		mark_take(r, &r->peak, r->records + (at + 1 - pos));
	}
	if (at + 1 < end) {
		group_touch(r, g, r->records + (end - pos));
		word_run_sum(r, words, at + 1, end, g);
	}
	return end;
}

int tally_replay_record(struct tally_replay *r, const struct tally_ev *e)
{
	int64_t n = e->n, b = (int64_t)e->bytes;

	if (e->group >= TALLY_MAX_GROUPS || e->term > 1)
		goto bad;
	switch (e->type) {
	case TALLY_EV_SEG_MAP:
		r->mapped += b;
		r->segment_overhead += n;
		r->virgin += b - n;
		break;
	case TALLY_EV_META_MAP:
		if (e->term)
			b = -b;
		r->mapped += b;
		r->segment_overhead += b;
		break;
	case TALLY_EV_SPAN_CLAIM:
		term_from(r, e->term, n);
		r->segment_overhead += n;
		r->spans_assigned++;
		break;
	case TALLY_EV_BUMP:
		term_from(r, e->term, b);
		r->span_free += b;
		break;
	case TALLY_EV_ALLOC:
	case TALLY_EV_FREE:
	case TALLY_EV_FREE_FOREIGN: {
		/* one arithmetic for them: the run's (a record of these is always
		 * one word, its figures 24 bits each) */
		if (e->n > TALLY_EV_WORD_MAX || e->bytes > TALLY_EV_WORD_MAX)
			goto bad;
		__u64 w = tally_ev_word(e->type, e->group, e->n, (__u32)e->bytes);
		tally_replay_word_run(r, &w, 0, 1, -1);
		break;
	}
	case TALLY_EV_DRAIN:
		r->cache -= b;
		r->span_free += b;
		break;
	case TALLY_EV_RECLAIM:
		r->span_free -= b;
		r->returned += b;
		break;
	case TALLY_EV_UNRECLAIM:
		r->returned -= b;
		r->span_free += b;
		break;
	case TALLY_EV_SPAN_EMPTY:
		r->span_free -= b;
		r->segment_overhead -= n;
		r->hysteresis += b + n;
		break;
	case TALLY_EV_SPAN_REFILL:
		r->span_free += b;
		r->segment_overhead += n;
		r->hysteresis -= b + n;
		break;
	case TALLY_EV_SPAN_RETIRE:
		r->hysteresis -= b;
		r->virgin -= n;
		r->returned += b + n;
		r->spans_assigned--;
		break;
	case TALLY_EV_REALLOC:
		r->live_moves++;
		r->live += b - n;
		r->rounding -= b - n;
		group_dealloc(r, e->group, n);
		group_alloc(r, e->group, b);
		break;
	case TALLY_EV_LARGE_ALLOC:
		if (e->term == TALLY_LARGE_POOL)
			r->hysteresis -= b + n;
		else
			r->mapped += b + n;
		r->live += b;
		r->live_moves++;
		r->rounding += n;
		r->large_count++;
		group_alloc(r, e->group, b);
		break;
	case TALLY_EV_LARGE_FREE:
		if (e->term == TALLY_LARGE_POOL)
			r->hysteresis += b + n;
		else
			r->mapped -= b + n;
		r->live -= b;
		r->live_moves++;
		r->rounding -= n;
		r->large_count--;
		group_dealloc(r, e->group, b);
		break;
	case TALLY_EV_POOL_UNMAP:
		r->hysteresis -= b;
		r->mapped -= b;
		break;
	case TALLY_EV_RING: /* the transport's (user/probes/heap_rings.c) */
		break;
	default:
		goto bad;
	}
	r->records++;
	peaks_check(r, r->records);
	return 0;
bad:
	r->rejected++;
	return -EINVAL;
}

int tally_replay_words(struct tally_replay *r, const __u64 *words, uint32_t pos, uint32_t count,
		       int32_t rule, uint64_t *applied, uint64_t *refused)
{
	while (pos < count) {
		struct tally_ev e;
		uint32_t end = tally_replay_word_run(r, words, pos, count, rule);
		if (end != pos) {
			r->records += end - pos;
			*applied += end - pos;
			pos = end;
			continue;
		}
		uint32_t at = pos;
		if (tally_ev_next(words, count, &pos, &e))
			return -EINVAL;
		if (tally_ev_is_sample(e.type)) {
			if (rule >= 0 && e.group == 0)
				e.group = (uint16_t)rule;
			r->samples++;
			if (r->on_sample)
				r->on_sample(r->sample_ctx, &e, &words[at + 2]);
			(*applied)++;
			continue;
		}
		/* a thread grouped by name: what it charges to root is its group's */
		if (rule >= 0 && e.group == 0 &&
		    (e.type == TALLY_EV_REALLOC || e.type == TALLY_EV_LARGE_ALLOC ||
		     e.type == TALLY_EV_LARGE_FREE))
			e.group = (uint16_t)rule;
		if (tally_replay_record(r, &e))
			(*refused)++;
		else
			(*applied)++;
	}
	return 0;
}

int tally_replay_batch(struct tally_replay *r, const void *data, size_t bytes)
{
	const struct tally_batch *b = data;
	struct tally_ev e;
	uint32_t pos = 0;
	int err = 0;

	if (tally_batch_check(b, bytes, TALLY_SRC_BIT(TALLY_SRC_ALLOC))) {
		r->rejected++;
		return -EINVAL;
	}
	/* a batch cut inside a record is refused whole */
	while (pos < b->count) {
		if (tally_ev_next(b->words, b->count, &pos, &e)) {
			r->rejected++;
			return -EINVAL;
		}
	}
	/* the path tally's model takes (model_apply_records) */
	uint64_t applied = 0, refused = 0;
	tally_replay_words(r, b->words, 0, b->count, -1, &applied, &refused);
	if (refused)
		err = -EINVAL;
	r->batches++;
	return err;
}

uint64_t tally_msg_batch_valid(const struct tally_msg_batch *mb, size_t len)
{
	const size_t at = offsetof(struct tally_msg_batch, batch);

	if (len < at || mb->bytes > sizeof(mb->batch))
		return 0;
	return mb->bytes < len - at ? mb->bytes : len - at;
}

int tally_replay_each(const struct tally_batch *b, uint64_t valid, __u32 sources,
		      void (*fn)(void *ctx, const struct tally_ev *e, const __u64 *extra),
		      void *ctx)
{
	uint32_t pos = 0;

	if (tally_batch_check(b, valid, sources))
		return -EINVAL;
	while (pos < b->count) {
		struct tally_ev e;
		uint32_t at = pos;
		if (tally_ev_next(b->words, b->count, &pos, &e))
			return -EINVAL;
		fn(ctx, &e, &b->words[at + 2]);
	}
	return 0;
}

void tally_replay_mark_stats(const struct tally_replay_mark *k, struct tally_stats *out)
{
	*out = (struct tally_stats){
		.mapped = (uint64_t)k->mapped,
		.live = (uint64_t)k->live,
		.rounding = (uint64_t)k->rounding,
		.cache = (uint64_t)k->cache,
		.span_free = (uint64_t)k->span_free,
		.returned = (uint64_t)k->returned,
		.virgin = (uint64_t)k->virgin,
		.hysteresis = (uint64_t)k->hysteresis,
		.segment_overhead = (uint64_t)k->segment_overhead,
		.large_count = (uint64_t)k->large_count,
		.spans_assigned = (uint64_t)k->spans_assigned,
	};
}

void tally_replay_stats(const struct tally_replay *r, struct tally_stats *out)
{
	struct tally_replay_mark k;

	mark_take(r, &k, r->records);
	tally_replay_mark_stats(&k, out);
}

int tally_replay_group(const struct tally_replay *r, uint32_t group, struct tally_group_stats *out)
{
	if (group >= TALLY_MAX_GROUPS)
		return -EINVAL;
	*out = (struct tally_group_stats){
		.allocated_bytes = (uint64_t)r->groups[group].alloc_bytes,
		.allocated_objects = (uint64_t)r->groups[group].alloc_objs,
		.deallocated_bytes = (uint64_t)r->groups[group].dealloc_bytes,
		.deallocated_objects = (uint64_t)r->groups[group].dealloc_objs,
	};
	return 0;
}
