// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally diff`'s matching (diff.h): each side's groups, processes and sites
 * read from its document and paired with the other's. The documents are
 * untrusted (any file may be handed over): every member may be missing or
 * of another type, and a figure that is not a whole number in int64_t's
 * range is taken as absent.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "../util/grow.h"

const char *const diff_fig_names[DIFF_NFIGS] = { "live", "peak", "cpu_ns", "allocated_bytes",
						 "mapped" };

enum side { SIDE_B, SIDE_A };

static void fig_set(struct diff_fig *f, enum side s, const struct jread_value *v)
{
	int64_t x;

	if (!jread_i64(v, &x))
		return;
	if (s == SIDE_B) {
		f->b = x;
		f->has_b = true;
	} else {
		f->a = x;
		f->has_a = true;
	}
}

/* x added to one side of f (sums of sites, of a process's groups); a sum
 * that overflows is absent, as is one with an absent term (sets *broken). */
static void fig_add(struct diff_fig *f, enum side s, const struct jread_value *v, bool *broken)
{
	int64_t x, *sum = s == SIDE_B ? &f->b : &f->a;
	bool *has = s == SIDE_B ? &f->has_b : &f->has_a;

	if (*broken)
		return;
	if (!jread_i64(v, &x) || __builtin_add_overflow(*sum, x, sum)) {
		*broken = true;
		*has = false;
		return;
	}
	*has = true;
}

bool diff_delta(const struct diff_fig *f, bool in_b, bool in_a, int64_t *out)
{
	int64_t b = in_b ? f->b : 0, a = in_a ? f->a : 0;

	if ((in_b && !f->has_b) || (in_a && !f->has_a) || (!in_b && !in_a))
		return false;
	return !__builtin_sub_overflow(a, b, out);
}

static void read_instance(struct diff_row *r, enum side s, const struct jread_value *inst)
{
	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++)
		fig_set(&r->inst[i], s, jread_get(inst, figures_instance_fields[i].name));
}

/* The row of name whose rank-th it is on side s: found among those the
 * other side made, or a new one. NULL: no memory. */
static struct diff_row *row_for(struct diff_rows *rows, enum side s, const char *name)
{
	unsigned rank = 0;
	struct diff_row *r;

	for (size_t i = 0; i < rows->n; i++) {
		r = &rows->v[i];
		if (strcmp(r->name, name) || !(s == SIDE_B ? r->in_b : r->in_a))
			continue;
		rank++;
	}
	for (size_t i = 0; s == SIDE_A && i < rows->n; i++) {
		r = &rows->v[i];
		if (!strcmp(r->name, name) && r->rank == rank && r->in_b && !r->in_a) {
			r->in_a = true;
			return r;
		}
	}
	if (grow((void **)&rows->v, &rows->cap, rows->n + 1, sizeof(*rows->v), 16))
		return NULL;
	r = &rows->v[rows->n++];
	memset(r, 0, sizeof(*r));
	r->name = name;
	r->rank = rank;
	r->pid_b = r->pid_a = -1;
	r->in_b = s == SIDE_B;
	r->in_a = s == SIDE_A;
	return r;
}

static int read_groups(struct diff_rows *rows, enum side s, const struct jread_value *groups)
{
	groups = jread_array(groups);
	for (size_t i = 0; groups && i < groups->arr.n; i++) {
		const struct jread_value *g = &groups->arr.v[i];
		const char *name = jread_str(jread_get(g, "name"));
		struct diff_row *r;

		if (!name)
			continue; /* not a group: nothing to match it by */
		r = row_for(rows, s, name);
		if (!r)
			return -ENOMEM;
		fig_set(&r->figs[DIFF_LIVE], s, jread_get(g, "live_bytes"));
		fig_set(&r->figs[DIFF_PEAK], s, jread_get(g, "peak_live"));
		fig_set(&r->figs[DIFF_CPU], s, jread_get(g, "cpu_ns"));
		fig_set(&r->figs[DIFF_ALLOCATED], s, jread_get(g, "allocated_bytes"));
		read_instance(r, s, jread_get(g, "instance"));
	}
	return 0;
}

/* A process's figures: its Stats, its peak, and its groups' sums. */
static int read_process(struct diff_row *r, enum side s, const struct jread_value *p)
{
	const struct jread_value *groups = jread_array(jread_get(p, "groups"));
	const struct jread_value *stats = jread_get(p, "stats");
	bool broken_cpu = !groups, broken_alloc = !groups;
	int64_t pid;

	if (jread_i64(jread_get(jread_get(p, "target"), "pid"), &pid))
		*(s == SIDE_B ? &r->pid_b : &r->pid_a) = pid;
	fig_set(&r->figs[DIFF_LIVE], s, jread_get(stats, "live"));
	fig_set(&r->figs[DIFF_MAPPED], s, jread_get(stats, "mapped"));
	fig_set(&r->figs[DIFF_PEAK], s, jread_get(jread_get(p, "peak"), "live"));
	for (size_t i = 0; groups && i < groups->arr.n; i++) {
		fig_add(&r->figs[DIFF_CPU], s, jread_get(&groups->arr.v[i], "cpu_ns"), &broken_cpu);
		fig_add(&r->figs[DIFF_ALLOCATED], s,
			jread_get(&groups->arr.v[i], "allocated_bytes"), &broken_alloc);
	}
	read_instance(r, s, jread_get(p, "instance"));
	if (!r->groups) {
		r->groups = calloc(1, sizeof(*r->groups));
		if (!r->groups)
			return -ENOMEM;
	}
	return read_groups(r->groups, s, groups);
}

static int read_processes(struct diff_rows *rows, enum side s, const struct jread_value *procs)
{
	procs = jread_array(procs);
	for (size_t i = 0; procs && i < procs->arr.n; i++) {
		const struct jread_value *p = &procs->arr.v[i];
		const char *comm = jread_str(jread_get(jread_get(p, "target"), "comm"));
		struct diff_row *r = row_for(rows, s, comm ? comm : "?");
		int err;

		if (!r)
			return -ENOMEM;
		err = read_process(r, s, p);
		if (err)
			return err;
	}
	return 0;
}

bool diff_is_profile(const struct diff_side *s)
{
	const char *kind = jread_str(jread_get(s->root, "kind"));

	return kind && !strcmp(kind, "profile");
}

const char *diff_frame_label(const struct jread_value *frame, char *buf, size_t size)
{
	const char *fn = jread_str(jread_get(frame, "function"));
	const char *mod = jread_str(jread_get(frame, "module"));

	if (fn)
		return fn;
	if (!mod)
		return "?";
	snprintf(buf, size, "[%s]", mod);
	return buf;
}

/* group and each frame's label, each as "LEN:TEXT", so that no name can
 * pass for two. NULL: no memory. */
static char *site_key(const char *group, const struct jread_value *frames)
{
	char *key = NULL, label[512];
	size_t len = 0;
	FILE *m = open_memstream(&key, &len);

	if (!m)
		return NULL;
	fprintf(m, "%zu:%s", strlen(group), group);
	for (size_t i = 0; frames && i < frames->arr.n; i++) {
		const char *l = diff_frame_label(&frames->arr.v[i], label, sizeof(label));
		fprintf(m, "%zu:%s", strlen(l), l);
	}
	if (fclose(m)) {
		free(key);
		return NULL;
	}
	return key;
}

static struct diff_site *site_for(struct diff_sites *sites, const char *group,
				  const struct jread_value *frames, enum side s)
{
	char *key = site_key(group, frames);
	struct diff_site *st;

	if (!key)
		return NULL;
	for (size_t i = 0; i < sites->n; i++) {
		st = &sites->v[i];
		if (!strcmp(st->key, key)) {
			free(key);
			*(s == SIDE_B ? &st->in_b : &st->in_a) = true;
			return st;
		}
	}
	if (grow((void **)&sites->v, &sites->cap, sites->n + 1, sizeof(*sites->v), 32)) {
		free(key);
		return NULL;
	}
	st = &sites->v[sites->n++];
	memset(st, 0, sizeof(*st));
	st->key = key;
	st->group = group;
	st->frames = frames;
	*(s == SIDE_B ? &st->in_b : &st->in_a) = true;
	return st;
}

/* A site's figures summed over its key on a side (several processes). */
static int read_sites(struct diff_sites *sites, enum side s, const struct jread_value *list)
{
	list = jread_array(list);
	for (size_t i = 0; list && i < list->arr.n; i++) {
		const struct jread_value *v = &list->arr.v[i];
		const char *group = jread_str(jread_get(v, "group"));
		const struct jread_value *frames = jread_array(jread_get(v, "frames"));
		struct diff_site *st;

		if (!frames)
			continue; /* not a site */
		st = site_for(sites, group ? group : "root", frames, s);
		if (!st)
			return -ENOMEM;
		fig_add(&st->live, s, jread_get(v, "inuse_bytes"), &st->live_broken[s]);
		fig_add(&st->alloc, s, jread_get(v, "alloc_bytes"), &st->alloc_broken[s]);
	}
	return 0;
}

static uint64_t magnitude(const struct diff_site *st)
{
	int64_t d;

	if (!diff_delta(&st->live, st->in_b, st->in_a, &d))
		return 0;
	return d < 0 ? -(uint64_t)d : (uint64_t)d;
}

static int by_magnitude(const void *x, const void *y)
{
	uint64_t a = magnitude(x), b = magnitude(y);

	if (a != b)
		return a > b ? -1 : 1;
	return strcmp(((const struct diff_site *)x)->key, ((const struct diff_site *)y)->key);
}

static void read_tree(struct diff *d, enum side s, const struct jread_value *root)
{
	const struct jread_value *tree = jread_get(root, "tree");

	fig_set(&d->tree_peak, s, jread_get(jread_get(tree, "peak"), "live"));
	fig_set(&d->tree_cpu, s, jread_get(jread_get(tree, "lifetime"), "cpu_ns"));
}

int diff_build(struct diff *d)
{
	const struct jread_value *roots[2] = { d->b.root, d->a.root };
	int err = 0;

	for (enum side s = SIDE_B; s <= SIDE_A && !err; s++) {
		err = read_groups(&d->groups, s, jread_get(roots[s], "groups"));
		if (!err)
			err = read_processes(&d->procs, s, jread_get(roots[s], "processes"));
		if (!err)
			err = read_sites(&d->sites, s, jread_get(roots[s], "sites"));
		read_tree(d, s, roots[s]);
	}
	if (!err && d->sites.n)
		qsort(d->sites.v, d->sites.n, sizeof(*d->sites.v), by_magnitude);
	return err;
}

static void rows_free(struct diff_rows *rows)
{
	for (size_t i = 0; rows && i < rows->n; i++) {
		rows_free(rows->v[i].groups);
		free(rows->v[i].groups);
	}
	if (rows)
		free(rows->v);
}

void diff_free(struct diff *d)
{
	rows_free(&d->groups);
	rows_free(&d->procs);
	for (size_t i = 0; i < d->sites.n; i++)
		free(d->sites.v[i].key);
	free(d->sites.v);
	memset(&d->groups, 0, sizeof(d->groups));
	memset(&d->procs, 0, sizeof(d->procs));
	memset(&d->sites, 0, sizeof(d->sites));
}
