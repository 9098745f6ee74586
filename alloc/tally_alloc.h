/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tally's allocator: statistics of a process whose malloc is libtally_alloc.
 *
 * Every byte the allocator has mapped is in exactly one term, always:
 *
 *   mapped == live + rounding + cache + span_free + returned + virgin
 *             + hysteresis + segment_overhead
 *
 * (DESIGN.md §2). The identity holds exactly whenever no thread is inside
 * the allocator.
 */
#ifndef TALLY_ALLOC_H
#define TALLY_ALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_stats {
	uint64_t mapped;     /* bytes mapped from the OS: segments, large mappings, metadata */
	uint64_t live;	     /* bytes requested by callers and not yet freed */
	uint64_t rounding;   /* slot (or page-rounded mapping) minus requested, over live blocks */
	uint64_t cache;	     /* freed by another thread, parked until the owner drains it */
	uint64_t span_free;  /* free slots below the bump cursor whose pages are resident */
	uint64_t returned;   /* free slots and retired spans handed back with madvise */
	uint64_t virgin;     /* never touched: above bump cursors, unclaimed spans, tails */
	uint64_t hysteresis; /* empty spans and pooled large mappings kept for reuse */
	uint64_t segment_overhead; /* segment headers and allocator metadata */
	uint64_t large_count;	   /* live direct mappings */
	uint64_t spans_assigned;   /* spans currently assigned to a size class */
};

/* Per resource group, lifetime counters over requested sizes (DESIGN.md §3). */
struct tally_group_stats {
	uint64_t allocated_bytes;
	uint64_t allocated_objects;
	uint64_t deallocated_bytes;
	uint64_t deallocated_objects;
};

/* Process-wide figures (all heaps merged, plus large mappings); 0 or -errno. */
int tally_alloc_stats(struct tally_stats *out);
/* Lifetime counters of one group (0 .. 255); 0 or -EINVAL. */
int tally_alloc_group_stats(uint32_t group, struct tally_group_stats *out);
/*
 * Calling thread: drain foreign frees and sweep. force != 0: return every free
 * page and empty span now, ignoring the purge delay (also for the heaps that
 * exited threads left behind), and unmap the large-mapping pool.
 */
void tally_alloc_collect(int force);

uint64_t tally_stats_accounted(const struct tally_stats *s);
bool tally_stats_balanced(const struct tally_stats *s);
uint64_t tally_stats_predicted_resident(const struct tally_stats *s);
void tally_stats_merge(struct tally_stats *into, const struct tally_stats *other);

/*
 * Internal hook between libtally.so (the SDK) and the allocator: the SDK calls
 * it when the calling thread's current group changes. Not for applications.
 */
void tally_alloc__set_group(uint32_t group);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_ALLOC_H */
