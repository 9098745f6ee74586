/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * How the public figures are derived from heaps and spans (struct heap_stats
 * says why they are derived rather than counted). Shared by the allocator
 * (stats.c, reading its own memory) and by the tracer (user/os/remote.c, reading
 * a copy of a target's memory for a late attach), so that both derive them
 * the same way. A span's metadata is passed separately: the tracer's copy of
 * it is not where span_meta(sp) points.
 */
#ifndef TALLY_STATS_WALK_H
#define TALLY_STATS_WALK_H

#include "internal.h"

#define WALK_LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

/* A span's allocations and what its owner has freed of them: allocated less
 * what is still held in the metadata, less what other threads freed. */
static inline struct span_frees stats_span_frees(const struct span *sp, const uint16_t *meta)
{
	uint64_t held = 0; /* requested bytes live, or freed by another thread but not drained */
	uint32_t bump = WALK_LOAD(sp->bump);
	uint32_t size = WALK_LOAD(sp->size);

	for (uint32_t i = 0; i < bump; i++) {
		uint16_t m = __atomic_load_n(&meta[i], __ATOMIC_RELAXED);
		if (m != META_FREE)
			held += meta_requested(size, m);
	}
	uint64_t acc = WALK_LOAD(sp->acc);
	uint64_t abytes = WALK_LOAD(sp->abytes) + (acc & ACC_BYTES);
	uint64_t nalloc = WALK_LOAD(sp->nalloc) + (acc >> ACC_SHIFT);
	uint64_t xbytes = WALK_LOAD(sp->xbytes);
	uint64_t used = WALK_LOAD(sp->used) & ~USED_SLOW;
	uint64_t ndrained = WALK_LOAD(sp->ndrained);
	return (struct span_frees){ abytes, nalloc, abytes - held - xbytes,
				    nalloc - used - ndrained };
}

static inline void stats_walk_heap(struct stats_walk *w, const struct heap *h)
{
	w->t.mapped += WALK_LOAD(h->stats.mapped);
	w->t.segment_overhead += WALK_LOAD(h->stats.segment_overhead);
	w->t.virgin += WALK_LOAD(h->stats.virgin);
	w->t.returned += WALK_LOAD(h->stats.returned);
	w->t.hysteresis += WALK_LOAD(h->stats.hysteresis);
	w->t.cache += WALK_LOAD(h->stats.cache);
	w->t.pool += WALK_LOAD(h->stats.pool);
	w->t.large_live += WALK_LOAD(h->stats.large_live);
	w->t.large_round += WALK_LOAD(h->stats.large_round);
	w->t.large_count += WALK_LOAD(h->stats.large_count);
	w->t.spans_assigned += WALK_LOAD(h->stats.spans_assigned);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++) {
		struct group_ctr *c = &w->groups[g];
		int64_t ab = WALK_LOAD(h->group_counters[g].alloc_bytes),
			db = WALK_LOAD(h->group_counters[g].dealloc_bytes);
		c->alloc_bytes += ab;
		c->alloc_objs += WALK_LOAD(h->group_counters[g].alloc_objs);
		c->dealloc_bytes += db;
		c->dealloc_objs += WALK_LOAD(h->group_counters[g].dealloc_objs);
		w->live += ab - db;
	}
}

/* An assigned span (state != SPAN_UNASSIGNED) with its metadata. */
static inline void stats_walk_span(struct stats_walk *w, const struct span *sp,
				   const uint16_t *meta)
{
	struct span_frees fr = stats_span_frees(sp, meta);
	struct group_ctr *c = &w->groups[WALK_LOAD(sp->group) % TALLY_MAX_GROUPS];

	w->slots += (int64_t)(WALK_LOAD(sp->used) & ~USED_SLOW) * WALK_LOAD(sp->size);
	w->live += (int64_t)(fr.abytes - fr.bytes);
	c->alloc_bytes += (int64_t)fr.abytes;
	c->alloc_objs += (int64_t)fr.nalloc;
	c->dealloc_bytes += (int64_t)fr.bytes;
	c->dealloc_objs += (int64_t)fr.objs;
}

static inline void stats_walk_finish(const struct stats_walk *w, struct tally_stats *out)
{
	const struct heap_stats *t = &w->t;

	*out = (struct tally_stats){
		.mapped = (uint64_t)t->mapped,
		.live = (uint64_t)w->live,
		.rounding = (uint64_t)(w->slots - t->cache - (w->live - t->large_live) +
				       t->large_round),
		.cache = (uint64_t)t->cache,
		.span_free = (uint64_t)(t->pool - w->slots),
		.returned = (uint64_t)t->returned,
		.virgin = (uint64_t)t->virgin,
		.hysteresis = (uint64_t)t->hysteresis,
		.segment_overhead = (uint64_t)t->segment_overhead,
		.large_count = (uint64_t)t->large_count,
		.spans_assigned = (uint64_t)t->spans_assigned,
	};
}

#endif /* TALLY_STATS_WALK_H */
