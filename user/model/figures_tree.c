// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sums over the processes of a tree (figures.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/grow.h"
#include "figures.h"

static void instance_add(struct figures_instance *to, const struct figures_instance *in)
{
	for (unsigned k = 0; k < FIGURES_INSTANCE_COUNT; k++) {
		size_t off = figures_instance_fields[k].offset;
		uint64_t a, b;
		memcpy(&a, (char *)to + off, sizeof(a));
		memcpy(&b, (const char *)in + off, sizeof(b));
		a += b; /* a signed gauge sums in two's complement alike */
		memcpy((char *)to + off, &a, sizeof(a));
	}
}

/* The counters below are each a count or a sum of bytes: none is signed. */
#define LIFE_FIELDS(X)                                                                             \
	X(cpu_ns)                                                                                  \
	X(alloc_bytes)                                                                             \
	X(alloc_objs)                                                                              \
	X(dealloc_bytes)                                                                           \
	X(dealloc_objs)                                                                            \
	X(kernels_launched)                                                                        \
	X(graph_launches)                                                                          \
	X(received)                                                                                \
	X(records)                                                                                 \
	X(in_place)

void figures_life_add(struct figures_lifetime *to, const struct figures_lifetime *what)
{
#define LIFE_ADD(f) to->f += what->f;
	LIFE_FIELDS(LIFE_ADD)
#undef LIFE_ADD
}

void figures_life_sub(struct figures_lifetime *to, const struct figures_lifetime *what)
{
#define LIFE_SUB(f) to->f = to->f > what->f ? to->f - what->f : 0;
	LIFE_FIELDS(LIFE_SUB)
#undef LIFE_SUB
}

void figures_life_of_model(struct figures_lifetime *out, const struct model *m)
{
	enum gpu_source gs = gpu_source_of(&m->gpu);

	memset(out, 0, sizeof(*out));
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		out->alloc_bytes += (uint64_t)m->replay.groups[g].alloc_bytes;
		out->alloc_objs += (uint64_t)m->replay.groups[g].alloc_objs;
		out->dealloc_bytes += (uint64_t)m->replay.groups[g].dealloc_bytes;
		out->dealloc_objs += (uint64_t)m->replay.groups[g].dealloc_objs;
		out->kernels_launched += m->gpu.groups[gs][g].kernels_launched;
		out->graph_launches += m->gpu.groups[gs][g].graph_launches;
	}
}

void figures_sum_tree(struct figures *f)
{
	struct figures_tree *t = &f->tree;

	memset(t, 0, sizeof(*t));
	t->processes = f->nprocs;
	t->instance_exact = true;
	t->life = f->folded_life;
	t->inexact = f->folded_inexact;
	for (unsigned i = 0; i < f->nprocs; i++) {
		const struct figures_process *p = &f->procs[i];
		figures_life_add(&t->life, &p->life);
		t->inexact += !p->exact;
		if (p->target.gone)
			continue;
		t->alive++;
		if (p->stats.known & (1u << TALLY_STAT_live))
			t->live += p->stats.v[TALLY_STAT_live];
		if (p->stats.known & (1u << TALLY_STAT_mapped))
			t->mapped += p->stats.v[TALLY_STAT_mapped];
		for (unsigned g = 0; g < p->ngroups; g++)
			t->cpu_ns += p->groups[g].cpu_ns;
		instance_add(&t->instance, &p->instance);
		t->instance_exact &= p->instance_exact;
		t->device_memory_used += p->device_memory_used;
		t->have_device_memory_used |= p->have_device_memory_used;
	}
	t->exact = !t->inexact;
}

/* Two groups of different processes are one when their names are (or, both
 * unnamed, their ids). */
static bool same_group(const struct figures_group *a, const struct figures_group *b)
{
	if (!a->name || !b->name)
		return !a->name && !b->name && a->id == b->id;
	return !strcmp(a->name, b->name);
}

static int group_merge(struct figures_process *out, unsigned *cap, const struct figures_group *g)
{
	struct figures_group *o = NULL;

	for (unsigned k = 0; k < out->ngroups && !o; k++)
		if (same_group(&out->groups[k], g))
			o = &out->groups[k];
	if (!o) {
		size_t n = *cap;
		if (grow((void **)&out->groups, &n, (size_t)out->ngroups + 1, sizeof(*out->groups),
			 16))
			return -ENOMEM;
		*cap = (unsigned)n;
		out->groups[out->ngroups++] = *g;
		return 0;
	}
	o->alloc_bytes += g->alloc_bytes;
	o->alloc_objs += g->alloc_objs;
	o->dealloc_bytes += g->dealloc_bytes;
	o->dealloc_objs += g->dealloc_objs;
	o->live_bytes += g->live_bytes;
	o->cpu_ns += g->cpu_ns;
	instance_add(&o->instance, &g->instance);
	return 0;
}

static void stats_add(struct figures_stats *to, const struct figures_stats *fs)
{
	if (!to->identity || !fs->identity)
		return;
	for (unsigned k = 0; k < TALLY_STATS_COUNT; k++)
		to->v[k] += fs->v[k];
	to->accounted += fs->accounted;
	to->predicted_resident += fs->predicted_resident;
	to->balanced = to->accounted == to->v[TALLY_STAT_mapped];
	to->have_resident &= fs->have_resident;
	to->resident += fs->resident;
}

int figures_sum(const struct figures *fig, struct figures_process *out)
{
	const struct figures_process *root = &fig->procs[0];
	unsigned cap = 0;
	int err = 0;

	*out = *root;
	out->threads = NULL;
	out->nthreads = 0;
	out->groups = NULL;
	out->ngroups = 0;
	out->borrowed = false;
	for (unsigned i = 0; !err && i < fig->nprocs; i++) {
		const struct figures_process *p = &fig->procs[i];
		if (i && p->target.gone)
			continue;
		if (i) {
			stats_add(&out->stats, &p->stats);
			instance_add(&out->instance, &p->instance);
			out->exact &= p->exact;
			out->instance_exact &= p->instance_exact;
			out->device_memory_used += p->device_memory_used;
			out->have_device_memory_used |= p->have_device_memory_used;
			out->gpu_spoke |= p->gpu_spoke;
			out->gpu_attached |= p->gpu_attached;
		}
		for (unsigned g = 0; !err && g < p->ngroups; g++)
			err = group_merge(out, &cap, &p->groups[g]);
	}
	if (err)
		figures_process_free(out);
	return err;
}
