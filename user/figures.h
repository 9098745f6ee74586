/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The figures every view shows (snapshot, top, record, serve), read from a
 * session the same way everywhere: the replayed identity with
 * libtally_alloc; in glibc mode only what glibc can say (live, rounding,
 * large mappings) and the glibc probes' per-group counts.
 */
#ifndef TALLY_FIGURES_H
#define TALLY_FIGURES_H

#include <stdbool.h>
#include <stdint.h>

#include "session.h"

extern const char *const figures_stat_names[TALLY_STATS_FIELDS];

const char *figures_allocator(const struct session *s); /* "tally", "glibc" or "none" */
const char *figures_cuda(const struct session *s);	/* "cupti", "driver" or "none" */
/* The eleven Stats fields in struct tally_stats order; the mask of those known. */
unsigned figures_stats(const struct session *s, uint64_t v[TALLY_STATS_FIELDS]);
void figures_stats_array(const struct tally_stats *st, uint64_t v[TALLY_STATS_FIELDS]);

struct figures_group {
	uint64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs;
	int64_t live_bytes;
	uint64_t cpu_ns;
	bool shown; /* named, or charged something: the groups a view lists */
};
void figures_group(const struct session *s, uint32_t g, struct figures_group *out);

#endif /* TALLY_FIGURES_H */
