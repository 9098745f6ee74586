// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The figures every view shows (figures.h). */
#include <string.h>

#include "figures.h"

const char *const figures_stat_names[TALLY_STATS_FIELDS] = {
	"mapped", "live",	"rounding",	    "cache",	   "span_free",	     "returned",
	"virgin", "hysteresis", "segment_overhead", "large_count", "spans_assigned",
};

const char *figures_allocator(const struct session *s)
{
	static const char *const names[] = { "tally", "glibc", "none" };

	return names[s->allocator];
}

const char *figures_cuda(const struct session *s)
{
	if (s->model.gpu.seen[GPU_SRC_CUPTI])
		return "cupti";
	if (s->model.gpu.seen[GPU_SRC_DRIVER] || s->cuda_fig.entry_points)
		return "driver";
	return "none";
}

void figures_stats_array(const struct tally_stats *st, uint64_t v[TALLY_STATS_FIELDS])
{
	uint64_t f[TALLY_STATS_FIELDS] = { st->mapped,	    st->live,	       st->rounding,
					   st->cache,	    st->span_free,     st->returned,
					   st->virgin,	    st->hysteresis,    st->segment_overhead,
					   st->large_count, st->spans_assigned };
	memcpy(v, f, sizeof(f));
}

unsigned figures_stats(const struct session *s, uint64_t v[TALLY_STATS_FIELDS])
{
	const struct glibc_figures *gf = s->glibc_fig;
	struct tally_stats st;

	memset(v, 0, TALLY_STATS_FIELDS * sizeof(v[0]));
	if (s->allocator == SESSION_ALLOC_TALLY) {
		model_stats(&s->model, &st);
		figures_stats_array(&st, v);
		return (1u << TALLY_STATS_FIELDS) - 1;
	}
	if (s->allocator == SESSION_ALLOC_GLIBC && gf) {
		v[1] = gf->live;
		v[2] = gf->rounding;
		v[9] = gf->large_count;
		return 1u << 1 | 1u << 2 | 1u << 9;
	}
	return 0;
}

void figures_group(const struct session *s, uint32_t g, struct figures_group *out)
{
	const struct glibc_figures *gf = s->glibc_fig;
	const struct model_group *mg = &s->model.groups[g];

	memset(out, 0, sizeof(*out));
	if (g >= TALLY_MAX_GROUPS)
		return;
	if (s->allocator == SESSION_ALLOC_GLIBC && gf) {
		out->alloc_bytes = gf->alloc_bytes[g];
		out->alloc_objs = gf->alloc_objs[g];
		out->dealloc_bytes = gf->dealloc_bytes[g];
		out->dealloc_objs = gf->dealloc_objs[g];
	} else {
		out->alloc_bytes = (uint64_t)s->model.rp.groups[g].alloc_bytes;
		out->alloc_objs = (uint64_t)s->model.rp.groups[g].alloc_objs;
		out->dealloc_bytes = (uint64_t)s->model.rp.groups[g].dealloc_bytes;
		out->dealloc_objs = (uint64_t)s->model.rp.groups[g].dealloc_objs;
	}
	out->live_bytes = (int64_t)(out->alloc_bytes - out->dealloc_bytes);
	out->cpu_ns = mg->cpu_ns;
	out->shown = mg->known || out->alloc_objs || out->dealloc_objs || mg->os_yields;
}
