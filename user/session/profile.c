// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tree's heap profile, symbolized (profile.h). Each process's sites are
 * in its model (model/sites.c); the objects its frames lie in are those it
 * announced itself, so that a process that has exited is symbolized as well
 * as one that runs. Arrays grow as the profile is built; the pointers the
 * writers follow (a location's lines, a sample's locations) are set at the
 * end, from the indices kept meanwhile.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../alloc/common/hash.h"
#include "../util/grow.h"
#include "profile.h"

_Static_assert(PROF_LIFE_BUCKETS == SITES_LIFE_BUCKETS, "the lifetimes' buckets");

/* One more element of `size` bytes at the end of *arr: its index, or -ENOMEM. */
static ssize_t push(void **arr, size_t *n, size_t *cap, size_t size)
{
	if (grow(arr, cap, *n + 1, size, 64))
		return -ENOMEM;
	memset((char *)*arr + *n * size, 0, size);
	return (ssize_t)(*n)++;
}

#define PUSH(pr, what)                                                                             \
	push((void **)&(pr)->what, &(pr)->n##what, &(pr)->cap_##what, sizeof(*(pr)->what))

static const char *own(struct profile *pr, const char *s, size_t len)
{
	char *c = strndup(s, len);
	if (!c)
		return NULL;
	ssize_t i = push((void **)&pr->strs, &pr->nstrs, &pr->cap_strs, sizeof(*pr->strs));
	if (i < 0) {
		free(c);
		return NULL;
	}
	pr->strs[i] = c;
	return c;
}

/* The building state of one process: a running one's model, or an ended
 * one's kept sites and figures. */
struct proc_build {
	const struct sites *st;
	const struct model *m;		    /* NULL: ended */
	const struct figures_process *kept; /* ended: its group names */
	pid_t pid;
	unsigned ix;	 /* its number in this profile */
	int *mapping_of; /* its modules' profile mappings (-1: none yet) */
};

static int by_start(const void *a, const void *b)
{
	const struct sym_map *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* Its modules as the symbolizer takes them. */
static int proc_maps(struct profile *pr, struct proc_build *b)
{
	const struct sites *st = b->st;
	struct sym_maps *mm = &pr->maps_scratch;

	sym_maps_free(mm);
	free(b->mapping_of);
	b->mapping_of = calloc(st->nmods + 1, sizeof(*b->mapping_of));
	mm->v = calloc(st->nmods + 1, sizeof(*mm->v));
	if (!b->mapping_of || !mm->v)
		return -ENOMEM;
	for (size_t i = 0; i < st->nmods; i++) {
		const struct sites_module *md = &st->mods[i];
		struct sym_map *sm = &mm->v[mm->n++];
		sm->start = md->start;
		sm->end = md->end;
		sm->bias = md->bias;
		sm->has_bias = true;
		sm->path = strndup(&st->names[md->path], md->len);
		if (!sm->path)
			return -ENOMEM;
		b->mapping_of[i] = -1;
	}
	/* sym_maps_find searches by start */
	qsort(mm->v, mm->n, sizeof(*mm->v), by_start);
	return 0;
}

/* The profile's mapping of module k of the process. */
static int mapping_for(struct profile *pr, struct proc_build *b, size_t k)
{
	if (b->mapping_of[k] >= 0)
		return b->mapping_of[k];
	const struct sites_module *md = &b->st->mods[k];
	ssize_t i = PUSH(pr, maps);
	const char *path = i < 0 ? NULL : own(pr, &b->st->names[md->path], md->len);
	if (!path)
		return -ENOMEM;
	struct prof_mapping *pm = &pr->maps[i];
	pm->start = md->start;
	pm->limit = md->end;
	pm->offset = 0;
	pm->file = path;
	pm->build_id = symbolizer_build_id(pr->sym, path);
	symbolizer_file_info(pr->sym, path, &pm->has_functions, &pm->has_lines);
	pm->has_filenames = pm->has_lines;
	b->mapping_of[k] = (int)i;
	return (int)i;
}

static uint64_t loc_key(unsigned proc, uint64_t pc)
{
	return hash_fib64(pc ^ ((uint64_t)proc << 48)) | 1;
}

/* The location of return address pc in the process: looked up once. The
 * index maps (process, pc) to location + 1 in loc_keys' second half. */
static ssize_t location_for(struct profile *pr, struct proc_build *b, uint64_t pc)
{
	uint64_t key = loc_key(b->ix, pc);
	if ((pr->nlocs + 1) * 2 > pr->cap_keys) {
		size_t ncap = pr->cap_keys ? pr->cap_keys * 2 : 1024;
		uint64_t *t = calloc(ncap * 2, sizeof(*t));
		if (!t)
			return -ENOMEM;
		for (size_t i = 0; i < pr->cap_keys; i++) {
			if (!pr->loc_keys[i])
				continue;
			size_t j = (pr->loc_keys[i] >> 20) & (ncap - 1);
			while (t[j])
				j = (j + 1) & (ncap - 1);
			t[j] = pr->loc_keys[i];
			t[ncap + j] = pr->loc_keys[pr->cap_keys + i];
		}
		free(pr->loc_keys);
		pr->loc_keys = t;
		pr->cap_keys = ncap;
	}
	size_t j = (key >> 20) & (pr->cap_keys - 1);
	for (; pr->loc_keys[j]; j = (j + 1) & (pr->cap_keys - 1)) {
		size_t at = pr->loc_keys[pr->cap_keys + j] - 1;
		if (pr->loc_keys[j] == key && pr->locs[at].addr == pc - 1)
			return (ssize_t)at;
	}
	ssize_t at = PUSH(pr, locs);
	if (at < 0)
		return at;
	struct prof_loc *l = &pr->locs[at];
	struct sym_loc sl;
	l->addr = pc - 1; /* inside the call, as pprof looks it up again */
	l->mapping = -1;
	const struct sites_module *md = sites_module_of(b->st, pc);
	if (md) {
		int mi = mapping_for(pr, b, (size_t)(md - b->st->mods));
		if (mi < 0)
			return mi;
		l->mapping = mi;
	}
	symbolizer_lookup(pr->sym, &pr->maps_scratch, pc, true, &sl);
	/* lines: their first index, in the pointer's place until the end */
	l->lines = (const struct prof_line *)(uintptr_t)pr->nlines;
	for (unsigned i = 0; i < sl.nlines; i++) {
		ssize_t k = PUSH(pr, lines);
		if (k < 0)
			return k;
		pr->lines[k] = (struct prof_line){ sl.lines[i].function, sl.lines[i].file,
						   sl.lines[i].line };
	}
	pr->locs[at].nlines = sl.nlines;
	pr->loc_keys[j] = key;
	pr->loc_keys[pr->cap_keys + j] = (uint64_t)at + 1;
	return at;
}

static const char *group_name(const struct proc_build *b, uint16_t group)
{
	if (b->m)
		return b->m->groups[group].name;
	for (unsigned i = 0; b->kept && i < b->kept->ngroups; i++)
		if (b->kept->groups[i].id == group && b->kept->groups[i].name)
			return b->kept->groups[i].name;
	return "";
}

/* v: alloc objects and bytes, inuse, peak, recent (objects, bytes each) */
static int add_sample(struct profile *pr, const struct proc_build *b, uint16_t group,
		      const double v[8], size_t first_ix, size_t nlocs)
{
	ssize_t i = PUSH(pr, samples);
	const char *name = group_name(b, group);
	if (i < 0)
		return -ENOMEM;
	struct prof_sample *ps = &pr->samples[i];
	ps->locs = (const size_t *)(uintptr_t)first_ix;
	ps->nlocs = nlocs;
	ps->alloc_objects = llround(v[0]);
	ps->alloc_space = llround(v[1]);
	ps->inuse_objects = llround(v[2]);
	ps->inuse_space = llround(v[3]);
	ps->peak_objects = llround(v[4]);
	ps->peak_space = llround(v[5]);
	ps->recent_objects = llround(v[6]);
	ps->recent_space = llround(v[7]);
	ps->group = own(pr, name[0] ? name : "root", strlen(name[0] ? name : "root"));
	ps->pid = b->pid;
	return ps->group ? 0 : -ENOMEM;
}

/* A late attach's blocks without a stack, per group: what the group has
 * live beyond what its sites account for, at most what it had then; at
 * the peak likewise. inuse: per group, bytes and objects in use now and
 * at the peak. */
static int add_before_attach(struct profile *pr, struct proc_build *b, const double *inuse)
{
	const struct sites *st = b->st;

	for (unsigned g = 0; b->m && st->seed && g < TALLY_MAX_GROUPS; g++) {
		const struct tally_replay *r = &b->m->replay;
		double live = (double)(r->groups[g].alloc_bytes - r->groups[g].dealloc_bytes);
		double objs = (double)(r->groups[g].alloc_objs - r->groups[g].dealloc_objs);
		double left = fmin(live - inuse[4 * g], (double)st->seed[g].bytes);
		double lobj = fmin(objs - inuse[4 * g + 1], (double)st->seed[g].objects);
		double peak = fmin((double)tally_replay_group_peak(r, g) - inuse[4 * g + 2],
				   (double)st->seed[g].bytes);
		if (left < 1)
			continue;
		ssize_t k = PUSH(pr, locs), x = PUSH(pr, lines), ix = PUSH(pr, ix);
		if (k < 0 || x < 0 || ix < 0)
			return -ENOMEM;
		pr->lines[x].function = PROFILE_BEFORE_ATTACH;
		pr->locs[k] = (struct prof_loc){ 0, -1, (const struct prof_line *)(uintptr_t)x, 1 };
		pr->ix[ix] = (size_t)k;
		/* (objects at the peak: not kept per group; the bytes' share) */
		double v[8] = { 0,
				0,
				fmax(lobj, 0),
				left,
				fmax(lobj, 0) * fmax(peak, 0) / left,
				fmax(peak, 0) };
		if (add_sample(pr, b, (uint16_t)g, v, (size_t)ix, 1))
			return -ENOMEM;
	}
	return 0;
}

static int add_process(struct profile *pr, struct proc_build *b, uint64_t since_ns)
{
	const struct sites *st = b->st;
	double *inuse = calloc(4 * TALLY_MAX_GROUPS, sizeof(*inuse));
	double *recent = calloc(2 * st->n + 1, sizeof(*recent));
	int err = inuse && recent ? proc_maps(pr, b) : -ENOMEM;

	/* a running process's growth (an ended one's live samples are gone) */
	if (!err && b->m)
		sites_recent(st, since_ns, recent, recent + st->n);

	/* pprof takes the first mapping for the program: the root's */
	for (size_t k = 0; !err && !pr->nmaps && k < st->nmods; k++)
		if (st->mods[k].program && mapping_for(pr, b, k) < 0)
			err = -ENOMEM;

	for (size_t i = 0; !err && i < st->n; i++) {
		const struct site *site = &st->v[i];
		uint32_t n;
		const uint64_t *pcs = sites_frames(st, site, &n);
		size_t first = pr->nix;
		double v[8] = { site->alloc_objects,
				site->alloc_bytes,
				site->inuse_objects,
				site->inuse_bytes,
				0,
				0,
				recent[st->n + i],
				recent[i] };
		sites_at_peak(st, site, b->m ? &b->m->replay : NULL, &v[5], &v[4]);
		inuse[4 * site->group] += site->inuse_bytes;
		inuse[4 * site->group + 1] += site->inuse_objects;
		inuse[4 * site->group + 2] += v[5];
		for (uint32_t f = 0; !err && f < n; f++) {
			ssize_t at = location_for(pr, b, pcs[f]);
			ssize_t ix = at < 0 ? at : PUSH(pr, ix);
			if (ix < 0)
				err = (int)ix;
			else
				pr->ix[ix] = (size_t)at;
		}
		if (!err)
			err = add_sample(pr, b, site->group, v, first, n);
		for (unsigned k = 0; !err && k < PROF_LIFE_BUCKETS; k++)
			pr->samples[pr->nsamples - 1].life[k] = llround(site->life[k]);
	}
	if (!err)
		err = add_before_attach(pr, b, inuse);
	free(inuse);
	free(recent);
	free(b->mapping_of);
	b->mapping_of = NULL;
	if (st->rate > pr->p.period)
		pr->p.period = st->rate;
	return err;
}

int profile_build(struct session *s, struct profile *pr)
{
	struct proc_build b = { .st = &s->model.sites, .m = &s->model, .pid = s->pid };
	int err = 0;

	memset(pr, 0, sizeof(*pr));
	if (!s->sym)
		s->sym = symbolizer_new();
	pr->sym = s->sym;
	if (!pr->sym)
		return -ENOMEM;
	err = add_process(pr, &b, s->since_ns);
	for (size_t i = 0; !err && i < s->tree.n; i++) {
		const struct tree_proc *p = &s->tree.procs[i];
		if (!p->sites && (p->ended || !p->m))
			continue;
		b = (struct proc_build){ .st = p->sites ? p->sites : &p->m->sites,
					 .m = p->sites ? NULL : p->m,
					 .kept = &p->kept,
					 .pid = p->pid,
					 .ix = (unsigned)i + 1 };
		err = add_process(pr, &b, s->since_ns);
	}
	sym_maps_free(&pr->maps_scratch);
	if (err) {
		profile_free(pr);
		return err;
	}
	for (size_t i = 0; i < pr->nlocs; i++)
		pr->locs[i].lines = pr->lines + (uintptr_t)pr->locs[i].lines;
	for (size_t i = 0; i < pr->nsamples; i++)
		pr->samples[i].locs = pr->ix + (uintptr_t)pr->samples[i].locs;
	if (!pr->p.period)
		pr->p.period = s->sample_rate;
	pr->p.maps = pr->maps;
	pr->p.nmaps = pr->nmaps;
	pr->p.locs = pr->locs;
	pr->p.nlocs = pr->nlocs;
	pr->p.samples = pr->samples;
	pr->p.nsamples = pr->nsamples;
	pr->p.default_type = "inuse_space";
	return 0;
}

/* Most bytes in use first; among equals (a server's sites hold nothing
 * between its requests), most bytes allocated. */
static int by_inuse(const void *a, const void *b)
{
	const struct prof_sample *x = a, *y = b;
	if (x->inuse_space != y->inuse_space)
		return (x->inuse_space < y->inuse_space) - (x->inuse_space > y->inuse_space);
	return (x->alloc_space < y->alloc_space) - (x->alloc_space > y->alloc_space);
}

void profile_sort_inuse(struct profile *pr)
{
	qsort(pr->samples, pr->nsamples, sizeof(*pr->samples), by_inuse);
}

const struct prof *profile_for_snapshot(struct session *s, struct profile *pr)
{
	int err;

	memset(pr, 0, sizeof(*pr));
	if (!s->sample_rate)
		return NULL;
	err = profile_build(s, pr);
	if (err) {
		fprintf(stderr, "tally: no sites in the snapshot: %s\n", strerror(-err));
		return NULL;
	}
	profile_sort_inuse(pr);
	return &pr->p;
}

void profile_free(struct profile *pr)
{
	if (!pr)
		return;
	for (size_t i = 0; i < pr->nstrs; i++)
		free(pr->strs[i]);
	free(pr->strs);
	free(pr->maps);
	free(pr->locs);
	free(pr->lines);
	free(pr->ix);
	free(pr->samples);
	free(pr->loc_keys);
	sym_maps_free(&pr->maps_scratch);
	memset(pr, 0, sizeof(*pr));
}
