// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The figures every view shows (figures.h). */
#include <string.h>

#include "figures.h"

_Static_assert(TALLY_STATS_COUNT == TALLY_STATS_FIELDS, "the probe's array is the struct");

const char *const figures_stat_names[TALLY_STATS_FIELDS] = {
#define STAT_NAME(field, metric, help) #field,
	TALLY_STATS_X(STAT_NAME)
#undef STAT_NAME
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
	tally_stats_to_array(st, v);
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
		v[TALLY_STAT_live] = gf->live;
		v[TALLY_STAT_rounding] = gf->rounding;
		v[TALLY_STAT_large_count] = gf->large_count;
		return 1u << TALLY_STAT_live | 1u << TALLY_STAT_rounding |
		       1u << TALLY_STAT_large_count;
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
