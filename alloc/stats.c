// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Reading the figures: every heap's counters merged (stats_walk.h). Each
 * heap's owner writes its counters without atomics; the walk reads them with
 * relaxed loads, so the sum is exact whenever no thread is inside the
 * allocator.
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "stats_walk.h"

/* Every heap and every assigned span of theirs, under the heaps' lock. */
static void stats_walk_all(struct stats_walk *w)
{
	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		stats_walk_heap(w, h);
		for (struct segment *seg = h->segs; seg; seg = seg->next) {
			for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
				struct span *sp = &seg->spans[i];
				if (WALK_LOAD(sp->state) != SPAN_UNASSIGNED)
					stats_walk_span(w, sp, span_meta(sp));
			}
		}
	}
	pthread_mutex_unlock(&tally_heaps_lock);
}

/* The walk holds a counter set per group (8 KiB): on the stack of a thread
 * that may be small, so mapped, not malloc'd (the caller may be inside a
 * program whose malloc is this allocator, but not re-entrantly). */
static struct stats_walk *stats_walk_new(void)
{
	size_t len = (sizeof(struct stats_walk) + OS_PAGE - 1) & ~(OS_PAGE - 1);
	struct stats_walk *w = os_map(len);
	return w;
}

static void stats_walk_free(struct stats_walk *w)
{
	os_unmap(w, (sizeof(struct stats_walk) + OS_PAGE - 1) & ~(OS_PAGE - 1));
}

TALLY_API int tally_alloc_stats(struct tally_stats *out)
{
	struct stats_walk *w;

	if (!out)
		return -EINVAL;
	w = stats_walk_new();
	if (!w)
		return -ENOMEM;
	stats_walk_all(w);
	stats_walk_finish(w, out);
	stats_walk_free(w);
	return 0;
}

TALLY_API int tally_alloc_group_stats(uint32_t group, struct tally_group_stats *out)
{
	struct stats_walk *w;

	if (!out || group >= TALLY_MAX_GROUPS)
		return -EINVAL;
	w = stats_walk_new();
	if (!w)
		return -ENOMEM;
	stats_walk_all(w);
	const struct group_ctr *c = &w->groups[group];
	*out = (struct tally_group_stats){ (uint64_t)c->alloc_bytes, (uint64_t)c->alloc_objs,
					   (uint64_t)c->dealloc_bytes, (uint64_t)c->dealloc_objs };
	stats_walk_free(w);
	return 0;
}
