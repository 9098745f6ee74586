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

/* One group, process or site of one side, before matching. */
struct entry {
	const char *key; /* a group's name, a process's comm, a site's site_key */
	const struct jread_value *v;
	size_t idx;    /* its place in its side's list */
	unsigned rank; /* the rank-th of its key on its side, from 0 */
	enum side side;
};

static int cmp_size(size_t a, size_t b)
{
	return a < b ? -1 : a > b;
}

static int by_key_side_idx(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = strcmp(a->key, b->key);

	if (c)
		return c;
	return a->side != b->side ? cmp_size(a->side, b->side) : cmp_size(a->idx, b->idx);
}

static int by_key_rank_side(const void *x, const void *y)
{
	const struct entry *a = x, *b = y;
	int c = strcmp(a->key, b->key);

	if (c)
		return c;
	return a->rank != b->rank ? cmp_size(a->rank, b->rank) : cmp_size(a->side, b->side);
}

static int by_order(const void *x, const void *y)
{
	return cmp_size(((const struct diff_row *)x)->order, ((const struct diff_row *)y)->order);
}

/* The entries of a list of objects with a name: those without are skipped
 * (nothing to match them by), a process without its comm is "?". */
static int collect(struct entry **e, size_t *n, size_t *cap, enum side s,
		   const struct jread_value *list, bool procs)
{
	list = jread_array(list);
	for (size_t i = 0; list && i < list->arr.n; i++) {
		const struct jread_value *v = &list->arr.v[i];
		const char *name = procs ? jread_str(jread_get(jread_get(v, "target"), "comm")) :
					   jread_str(jread_get(v, "name"));
		if (procs && !name && jread_object(v))
			name = "?";
		if (!name)
			continue;
		if (grow((void **)e, cap, *n + 1, sizeof(**e), 64))
			return -ENOMEM;
		(*e)[(*n)++] = (struct entry){ name, v, i, 0, s };
	}
	return 0;
}

/*
 * Rows of the entries e[0 .. n) of both sides, by key and rank: sorted
 * twice (O(n log n), however many entries share a key: a document may
 * hold millions), then in the order people read them, the before side's
 * first, each row's src[] its objects.
 */
static int match_rows(struct diff_rows *rows, struct entry *e, size_t n, size_t nb)
{
	if (!n)
		return 0; /* e is NULL: no qsort */
	qsort(e, n, sizeof(*e), by_key_side_idx);
	for (size_t i = 0; i < n; i++)
		e[i].rank = i && e[i - 1].side == e[i].side && !strcmp(e[i - 1].key, e[i].key) ?
				    e[i - 1].rank + 1 :
				    0;
	qsort(e, n, sizeof(*e), by_key_rank_side);
	for (size_t i = 0; i < n; i++) {
		struct diff_row *r;
		bool pair = i && e[i - 1].rank == e[i].rank && e[i].side == SIDE_A &&
			    e[i - 1].side == SIDE_B && !strcmp(e[i - 1].key, e[i].key);
		if (!pair) {
			if (grow((void **)&rows->v, &rows->cap, rows->n + 1, sizeof(*rows->v), 16))
				return -ENOMEM;
			r = &rows->v[rows->n++];
			memset(r, 0, sizeof(*r));
			r->name = e[i].key;
			r->rank = e[i].rank;
			r->pid_b = r->pid_a = -1;
			r->order = e[i].side == SIDE_B ? e[i].idx : nb + e[i].idx;
		}
		r = &rows->v[rows->n - 1];
		r->src[e[i].side] = e[i].v;
		*(e[i].side == SIDE_B ? &r->in_b : &r->in_a) = true;
	}
	if (rows->n)
		qsort(rows->v, rows->n, sizeof(*rows->v), by_order);
	return 0;
}

static void read_group(struct diff_row *r, enum side s, const struct jread_value *g)
{
	fig_set(&r->figs[DIFF_LIVE], s, jread_get(g, "live_bytes"));
	fig_set(&r->figs[DIFF_PEAK], s, jread_get(g, "peak_live"));
	fig_set(&r->figs[DIFF_CPU], s, jread_get(g, "cpu_ns"));
	fig_set(&r->figs[DIFF_ALLOCATED], s, jread_get(g, "allocated_bytes"));
	read_instance(r, s, jread_get(g, "instance"));
}

/* A process's figures: its Stats, its peak, and its groups' sums. */
static void read_process(struct diff_row *r, enum side s, const struct jread_value *p)
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
}

/* Rows of the lists before and after (groups, or processes with their
 * groups' rows each), their figures read. */
static int build_rows(struct diff_rows *rows, const struct jread_value *lb,
		      const struct jread_value *la, bool procs)
{
	struct entry *e = NULL;
	size_t n = 0, cap = 0, nb;
	int err = collect(&e, &n, &cap, SIDE_B, lb, procs);

	nb = n;
	if (!err)
		err = collect(&e, &n, &cap, SIDE_A, la, procs);
	if (!err)
		err = match_rows(rows, e, n, nb);
	free(e);
	for (size_t i = 0; i < rows->n && !err; i++) {
		struct diff_row *r = &rows->v[i];
		for (enum side s = SIDE_B; s <= SIDE_A; s++)
			if (r->src[s])
				(procs ? read_process : read_group)(r, s, r->src[s]);
		if (!procs)
			continue;
		r->groups = calloc(1, sizeof(*r->groups));
		err = r->groups ? build_rows(r->groups, jread_get(r->src[SIDE_B], "groups"),
					     jread_get(r->src[SIDE_A], "groups"), false) :
				  -ENOMEM;
	}
	return err;
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

static void free_keys(struct entry *e, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free((char *)e[i].key);
	free(e);
}

static int collect_sites(struct entry **e, size_t *n, size_t *cap, enum side s,
			 const struct jread_value *list)
{
	list = jread_array(list);
	for (size_t i = 0; list && i < list->arr.n; i++) {
		const struct jread_value *v = &list->arr.v[i];
		const char *group = jread_str(jread_get(v, "group"));
		const struct jread_value *frames = jread_array(jread_get(v, "frames"));
		char *key;

		if (!frames)
			continue; /* not a site */
		if (grow((void **)e, cap, *n + 1, sizeof(**e), 64))
			return -ENOMEM;
		key = site_key(group ? group : "root", frames);
		if (!key)
			return -ENOMEM;
		(*e)[(*n)++] = (struct entry){ key, v, i, 0, s };
	}
	return 0;
}

/* The sites of both sides by key, one key's figures summed on each side
 * (several processes): the entries sorted once, each run of a key a site. */
static int build_sites(struct diff_sites *sites, const struct jread_value *lb,
		       const struct jread_value *la)
{
	struct diff_site *st = NULL;
	struct entry *e = NULL;
	size_t n = 0, cap = 0;
	int err = collect_sites(&e, &n, &cap, SIDE_B, lb);

	if (!err)
		err = collect_sites(&e, &n, &cap, SIDE_A, la);
	if (!err && n)
		qsort(e, n, sizeof(*e), by_key_side_idx);
	for (size_t i = 0; i < n && !err; i++) {
		const struct jread_value *v = e[i].v;
		enum side s = e[i].side;
		if (!st || strcmp(st->key, e[i].key)) {
			if (grow((void **)&sites->v, &sites->cap, sites->n + 1, sizeof(*st), 32)) {
				err = -ENOMEM;
				break;
			}
			st = &sites->v[sites->n++];
			memset(st, 0, sizeof(*st));
			st->key = (char *)e[i].key;
			e[i].key = NULL; /* the site's now */
			st->group = jread_str(jread_get(v, "group"));
			if (!st->group)
				st->group = "root";
			st->frames = jread_array(jread_get(v, "frames"));
		}
		*(s == SIDE_B ? &st->in_b : &st->in_a) = true;
		fig_add(&st->live, s, jread_get(v, "inuse_bytes"), &st->live_broken[s]);
		fig_add(&st->alloc, s, jread_get(v, "alloc_bytes"), &st->alloc_broken[s]);
		/* absent from a snapshot before tally wrote it */
		fig_add(&st->peak, s, jread_get(v, "peak_bytes"), &st->peak_broken[s]);
	}
	free_keys(e, n);
	return err;
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
	const struct jread_value *rb = d->b.root, *ra = d->a.root;
	int err = build_rows(&d->groups, jread_get(rb, "groups"), jread_get(ra, "groups"), false);

	if (!err)
		err = build_rows(&d->procs, jread_get(rb, "processes"), jread_get(ra, "processes"),
				 true);
	if (!err)
		err = build_sites(&d->sites, jread_get(rb, "sites"), jread_get(ra, "sites"));
	read_tree(d, SIDE_B, rb);
	read_tree(d, SIDE_A, ra);
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
