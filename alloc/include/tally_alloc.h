/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tally's allocator: statistics of a process whose malloc is libtally_alloc.
 *
 * Every byte the allocator has mapped is in exactly one term, always:
 *
 *   mapped == live + rounding + cache + span_free + returned + virgin
 *             + hysteresis + segment_overhead
 *
 * (docs/DESIGN.md §2). The identity holds exactly whenever no thread is inside
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

/*
 * Every Stats field, written once: X(field, metric, unit, help). The struct, the
 * probe's array, the JSON writer, the trace, the Prometheus renderer and the
 * top view all expand this list; a new term is one line here. `metric` is
 * the Prometheus name after "tally_stats_". The first nine are the identity
 * (bytes), in its order.
 */
#define TALLY_STATS_X(X)                                                                           \
	X(mapped, "mapped_bytes", "bytes",                                                         \
	  "Bytes the allocator mapped from the OS (the identity's left side)")                     \
	X(live, "live_bytes", "bytes", "Bytes requested by callers and not yet freed")             \
	X(rounding, "rounding_bytes", "bytes",                                                     \
	  "Slot (or page-rounded mapping) minus requested bytes, over live allocations")           \
	X(cache, "cache_bytes", "bytes",                                                           \
	  "Bytes freed by another thread, parked on a foreign-free list")                          \
	X(span_free, "span_free_bytes", "bytes",                                                   \
	  "Free slots below the bump cursor whose pages are resident")                             \
	X(returned, "returned_bytes", "bytes",                                                     \
	  "Free bytes whose pages were handed back with madvise: mapped, not resident")            \
	X(virgin, "virgin_bytes", "bytes", "Mapped bytes never touched")                           \
	X(hysteresis, "hysteresis_bytes", "bytes",                                                 \
	  "Empty spans and pooled large mappings retained rather than returned")                   \
	X(segment_overhead, "segment_overhead_bytes", "bytes",                                     \
	  "Segment headers and allocator metadata")                                                \
	X(large_count, "large_objects", "count", "Live direct mappings (large allocations)")       \
	X(spans_assigned, "spans_assigned", "count", "Spans currently assigned to a size class")

struct tally_stats {
#define TALLY_STATS_FIELD(field, metric, unit, help) uint64_t field;
	TALLY_STATS_X(TALLY_STATS_FIELD)
#undef TALLY_STATS_FIELD
};

/* The fields as an array, in TALLY_STATS_X's order (the probe's, the views'):
 * the struct is exactly that array. */
enum {
#define TALLY_STATS_INDEX(field, metric, unit, help) TALLY_STAT_##field,
	TALLY_STATS_X(TALLY_STATS_INDEX)
#undef TALLY_STATS_INDEX
		TALLY_STATS_COUNT
};
#ifndef __cplusplus
_Static_assert(sizeof(struct tally_stats) == TALLY_STATS_COUNT * sizeof(uint64_t),
	       "struct tally_stats is an array of its fields");
#endif

static inline void tally_stats_to_array(const struct tally_stats *s, uint64_t *v)
{
	__builtin_memcpy(v, s, sizeof(*s));
}

static inline void tally_stats_from_array(struct tally_stats *s, const uint64_t *v)
{
	__builtin_memcpy(s, v, sizeof(*s));
}

/* Per resource group, lifetime counters over requested sizes (docs/DESIGN.md §3). */
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
