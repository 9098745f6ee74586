// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Applies allocator records to the identity's terms, exactly as
 * bpf/tally_events.h defines each record's movement.
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

static void group_alloc(struct tally_replay *r, uint16_t g, int64_t q)
{
	r->groups[g].alloc_bytes += q;
	r->groups[g].alloc_objs++;
}

static void group_dealloc(struct tally_replay *r, uint16_t g, int64_t q)
{
	r->groups[g].dealloc_bytes += q;
	r->groups[g].dealloc_objs++;
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
		r->span_free -= b;
		r->live += n;
		r->rounding += b - n;
		group_alloc(r, e->group, n);
		break;
	case TALLY_EV_FREE:
		r->live -= n;
		r->rounding -= b - n;
		r->span_free += b;
		group_dealloc(r, e->group, n);
		break;
	case TALLY_EV_FREE_FOREIGN:
		r->live -= n;
		r->rounding -= b - n;
		r->cache += b;
		group_dealloc(r, e->group, n);
		break;
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
		r->rounding -= n;
		r->large_count--;
		group_dealloc(r, e->group, b);
		break;
	case TALLY_EV_POOL_UNMAP:
		r->hysteresis -= b;
		r->mapped -= b;
		break;
	default:
		goto bad;
	}
	r->records++;
	return 0;
bad:
	r->rejected++;
	return -EINVAL;
}

int tally_replay_batch(struct tally_replay *r, const void *data, size_t bytes)
{
	const struct tally_batch *b = data;
	size_t hdr = offsetof(struct tally_batch, words);
	struct tally_ev e;
	uint32_t pos = 0;
	int err = 0;

	if (bytes < hdr || b->magic != TALLY_BATCH_MAGIC || b->version != TALLY_BATCH_VERSION ||
	    b->source != TALLY_SRC_ALLOC || b->count > TALLY_BATCH_WORDS ||
	    bytes < hdr + (size_t)b->count * sizeof(b->words[0])) {
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
	for (pos = 0; pos < b->count;) {
		tally_ev_next(b->words, b->count, &pos, &e);
		if (tally_replay_record(r, &e))
			err = -EINVAL;
	}
	r->batches++;
	return err;
}

void tally_replay_stats(const struct tally_replay *r, struct tally_stats *out)
{
	*out = (struct tally_stats){
		.mapped = (uint64_t)r->mapped,
		.live = (uint64_t)r->live,
		.rounding = (uint64_t)r->rounding,
		.cache = (uint64_t)r->cache,
		.span_free = (uint64_t)r->span_free,
		.returned = (uint64_t)r->returned,
		.virgin = (uint64_t)r->virgin,
		.hysteresis = (uint64_t)r->hysteresis,
		.segment_overhead = (uint64_t)r->segment_overhead,
		.large_count = (uint64_t)r->large_count,
		.spans_assigned = (uint64_t)r->spans_assigned,
	};
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
