// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading the figures: every heap's counters merged. Each heap's owner writes
 * its counters without atomics; this reads them with relaxed loads, so the
 * sum is exact whenever no thread is inside the allocator.
 */
#include <errno.h>

#include "internal.h"

#define LOAD(x) __atomic_load_n(&(x), __ATOMIC_RELAXED)

TALLY_API int tally_alloc_stats(struct tally_stats *out)
{
	struct heap_stats t = { 0 };
	int64_t slots = 0, live = 0; /* see struct heap_stats */

	if (!out)
		return -EINVAL;
	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		t.mapped += LOAD(h->st.mapped);
		t.segment_overhead += LOAD(h->st.segment_overhead);
		t.virgin += LOAD(h->st.virgin);
		t.returned += LOAD(h->st.returned);
		t.hysteresis += LOAD(h->st.hysteresis);
		t.cache += LOAD(h->st.cache);
		t.pool += LOAD(h->st.pool);
		t.large_live += LOAD(h->st.large_live);
		t.large_round += LOAD(h->st.large_round);
		t.large_count += LOAD(h->st.large_count);
		t.spans_assigned += LOAD(h->st.spans_assigned);
		for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
			live += LOAD(h->gc[g].alloc_bytes) - LOAD(h->gc[g].dealloc_bytes);
		for (struct segment *seg = h->segs; seg; seg = seg->next) {
			for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
				struct span *sp = &seg->spans[i];
				if (LOAD(sp->state) == SPAN_UNASSIGNED)
					continue;
				struct span_frees fr = span_owner_frees(sp);
				slots += (int64_t)LOAD(sp->used) * LOAD(sp->size);
				live += (int64_t)(fr.abytes - fr.bytes);
			}
		}
	}
	pthread_mutex_unlock(&tally_heaps_lock);
	*out = (struct tally_stats){
		.mapped = (uint64_t)t.mapped,
		.live = (uint64_t)live,
		.rounding = (uint64_t)(slots - t.cache - (live - t.large_live) + t.large_round),
		.cache = (uint64_t)t.cache,
		.span_free = (uint64_t)(t.pool - slots),
		.returned = (uint64_t)t.returned,
		.virgin = (uint64_t)t.virgin,
		.hysteresis = (uint64_t)t.hysteresis,
		.segment_overhead = (uint64_t)t.segment_overhead,
		.large_count = (uint64_t)t.large_count,
		.spans_assigned = (uint64_t)t.spans_assigned,
	};
	return 0;
}

TALLY_API int tally_alloc_group_stats(uint32_t group, struct tally_group_stats *out)
{
	int64_t ab = 0, ao = 0, db = 0, dobj = 0;

	if (!out || group >= TALLY_MAX_GROUPS)
		return -EINVAL;
	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		ab += LOAD(h->gc[group].alloc_bytes);
		ao += LOAD(h->gc[group].alloc_objs);
		db += LOAD(h->gc[group].dealloc_bytes);
		dobj += LOAD(h->gc[group].dealloc_objs);
		/* and the shares of the spans of that group (struct span) */
		for (struct segment *seg = h->segs; seg; seg = seg->next) {
			for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
				struct span *sp = &seg->spans[i];
				if (LOAD(sp->group) != group || LOAD(sp->state) == SPAN_UNASSIGNED)
					continue;
				struct span_frees fr = span_owner_frees(sp);
				ab += (int64_t)fr.abytes;
				ao += (int64_t)fr.nalloc;
				db += (int64_t)fr.bytes;
				dobj += (int64_t)fr.objs;
			}
		}
	}
	pthread_mutex_unlock(&tally_heaps_lock);
	*out = (struct tally_group_stats){ (uint64_t)ab, (uint64_t)ao, (uint64_t)db,
					   (uint64_t)dobj };
	return 0;
}
