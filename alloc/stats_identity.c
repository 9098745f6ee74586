// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The identity's arithmetic on struct tally_stats, shared by the allocator
 * and tally's replay (a sum of balanced snapshots is balanced).
 */
#include <stdint.h>

#include "include/tally_alloc.h"

/* exported from libtally_alloc.so; plain functions where user/ links this file */
#ifndef TALLY_IDENTITY_API
#define TALLY_IDENTITY_API __attribute__((visibility("default")))
#endif

TALLY_IDENTITY_API uint64_t tally_stats_accounted(const struct tally_stats *s)
{
	return s->live + s->rounding + s->cache + s->span_free + s->returned + s->virgin +
	       s->hysteresis + s->segment_overhead;
}

/* The identity holds, and honestly: no term is negative. A rebuild that lost
 * records can have a term below zero (2^64 - x as unsigned) and still sum to
 * mapped modulo 2^64; that is no balance. */
TALLY_IDENTITY_API bool tally_stats_balanced(const struct tally_stats *s)
{
	uint64_t t[TALLY_STATS_COUNT];

	tally_stats_to_array(s, t);

	for (unsigned i = 0; i < sizeof(t) / sizeof(t[0]); i++)
		if ((int64_t)t[i] < 0)
			return false;
	return tally_stats_accounted(s) == s->mapped;
}

/* Resident if the identity's terms are right: all but never-touched and
 * handed-back bytes. Compared with /proc/PID/smaps by tally. */
TALLY_IDENTITY_API uint64_t tally_stats_predicted_resident(const struct tally_stats *s)
{
	return s->mapped - s->virgin - s->returned;
}

TALLY_IDENTITY_API void tally_stats_merge(struct tally_stats *into, const struct tally_stats *o)
{
	into->mapped += o->mapped;
	into->live += o->live;
	into->rounding += o->rounding;
	into->cache += o->cache;
	into->span_free += o->span_free;
	into->returned += o->returned;
	into->virgin += o->virgin;
	into->hysteresis += o->hysteresis;
	into->segment_overhead += o->segment_overhead;
	into->large_count += o->large_count;
	into->spans_assigned += o->spans_assigned;
}
