// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The report's time series (series.h): one point per kept tick, thinned by
 * halves when full so that its memory is bounded and the whole run stays
 * in view at an even resolution.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "series.h"

/* A value not known at a point (a group not named yet, a process not born
 * or ended, a term glibc mode cannot know): null in the document. */
#define SERIES_NONE INT64_MIN

static int64_t *points_new(void)
{
	int64_t *a = malloc(SERIES_MAX_POINTS * sizeof(*a));

	for (unsigned i = 0; a && i < SERIES_MAX_POINTS; i++)
		a[i] = SERIES_NONE;
	return a;
}

int series_init(struct series *s, unsigned interval_ms, uint64_t start_ns)
{
	memset(s, 0, sizeof(*s));
	s->interval_ms = interval_ms;
	s->stride = 1;
	s->start_ns = start_ns;
	s->t = calloc(SERIES_MAX_POINTS, sizeof(*s->t));
	if (!s->t)
		return -ENOMEM;
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++) {
		s->stat[i] = points_new();
		if (!s->stat[i]) {
			series_free(s);
			return -ENOMEM;
		}
	}
	return 0;
}

void series_free(struct series *s)
{
	free(s->t);
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
		free(s->stat[i]);
	for (unsigned i = 0; i < s->ngroups; i++) {
		free(s->groups[i].name);
		free(s->groups[i].live);
		free(s->groups[i].cpu_ns);
		free(s->groups[i].device_bytes);
	}
	for (unsigned i = 0; i < s->nprocs; i++) {
		free(s->procs[i].comm);
		free(s->procs[i].live);
	}
	memset(s, 0, sizeof(*s));
}

static void halve(int64_t *a, unsigned n)
{
	for (unsigned j = 0; 2 * j < n; j++)
		a[j] = a[2 * j];
	for (unsigned j = (n + 1) / 2; j < n; j++)
		a[j] = SERIES_NONE;
}

/* Every second point dropped (the even ones kept, ticks 0, 2*stride, ...):
 * the resolution halves, the span stays the whole run. */
static void thin(struct series *s)
{
	for (unsigned j = 0; 2 * j < s->n; j++)
		s->t[j] = s->t[2 * j];
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
		halve(s->stat[i], s->n);
	for (unsigned i = 0; i < s->ngroups; i++) {
		halve(s->groups[i].live, s->n);
		halve(s->groups[i].cpu_ns, s->n);
		halve(s->groups[i].device_bytes, s->n);
	}
	for (unsigned i = 0; i < s->nprocs; i++)
		halve(s->procs[i].live, s->n);
	s->n = (s->n + 1) / 2;
	s->stride *= 2;
}

/* v added at point i: the "(other)" lines sum several. */
static void put(int64_t *a, unsigned i, int64_t v)
{
	a[i] = a[i] == SERIES_NONE ? v : (int64_t)((uint64_t)a[i] + (uint64_t)v);
}

static void group_drop(struct series_group *g)
{
	free(g->name);
	free(g->live);
	free(g->cpu_ns);
	free(g->device_bytes);
	memset(g, 0, sizeof(*g));
}

/* The group's line, made at its first point; past SERIES_MAX_GROUPS, the
 * one "(other)" line after them. NULL: out of memory. */
static struct series_group *group_of(struct series *s, const char *name)
{
	struct series_group *g;

	for (unsigned i = 0; i < s->ngroups; i++)
		if (!strcmp(s->groups[i].name, name))
			return &s->groups[i];
	if (s->ngroups >= SERIES_MAX_GROUPS && strcmp(name, SERIES_OTHER))
		return group_of(s, SERIES_OTHER);
	g = &s->groups[s->ngroups];
	g->name = strdup(name);
	g->live = points_new();
	g->cpu_ns = points_new();
	g->device_bytes = points_new();
	if (!g->name || !g->live || !g->cpu_ns || !g->device_bytes) {
		group_drop(g);
		return NULL;
	}
	s->ngroups++;
	return g;
}

static struct series_proc *proc_of(struct series *s, int32_t pid, const char *comm)
{
	struct series_proc *p;

	for (unsigned i = 0; i < s->nprocs; i++) {
		p = &s->procs[i];
		if (p->pid != pid)
			continue;
		/* its latest name: a shell that execs a program is the program */
		if (pid != -1 && comm && strcmp(p->comm, comm)) {
			char *c = strdup(comm);
			if (!c)
				return NULL;
			free(p->comm);
			p->comm = c;
		}
		return p;
	}
	if (s->nprocs >= SERIES_MAX_PROCS && pid != -1)
		return proc_of(s, -1, SERIES_OTHER);
	p = &s->procs[s->nprocs];
	p->pid = pid;
	p->comm = strdup(comm ? comm : "");
	p->live = points_new();
	if (!p->comm || !p->live) {
		free(p->comm);
		free(p->live);
		memset(p, 0, sizeof(*p));
		return NULL;
	}
	s->nprocs++;
	return p;
}

/* A group as the page names it: the SDK's or a rule's name, else its id
 * ("root" for 0, the snapshot's name for the sites outside any group). */
static const char *group_name(const struct figures_group *g, char *buf, size_t size)
{
	if (g->name)
		return g->name;
	if (!g->id)
		return "root";
	snprintf(buf, size, "#%u", g->id);
	return buf;
}

/* CPU per group over every process the tree keeps, ended ones too: the
 * sum over the running ones alone falls when one ends, and the page draws
 * its slope as cores busy. */
static int series_cpu(struct series *s, const struct figures *f, unsigned i)
{
	for (unsigned k = 0; k < f->nprocs; k++) {
		const struct figures_process *p = &f->procs[k];
		for (unsigned j = 0; j < p->ngroups; j++) {
			const struct figures_group *fg = &p->groups[j];
			char buf[16];
			struct series_group *g;
			if (!fg->shown)
				continue;
			g = group_of(s, group_name(fg, buf, sizeof(buf)));
			if (!g)
				return -ENOMEM;
			put(g->cpu_ns, i, (int64_t)fg->cpu_ns);
		}
	}
	return 0;
}

/* The tree's figures at point i: the identity and groups of the processes
 * alive (figures_sum), the groups' CPU (series_cpu), each process's live
 * bytes. */
static int series_fill(struct series *s, const struct figures *f, unsigned i)
{
	struct figures_process sum;
	int err = figures_sum(f, &sum);

	if (err)
		return err;
	for (unsigned k = 0; k < TALLY_STATS_COUNT; k++)
		if (sum.stats.known & (1u << k))
			s->stat[k][i] = sum.stats.v[k];
	for (unsigned k = 0; k < sum.ngroups && !err; k++) {
		const struct figures_group *fg = &sum.groups[k];
		char buf[16];
		struct series_group *g;
		if (!fg->shown)
			continue;
		g = group_of(s, group_name(fg, buf, sizeof(buf)));
		if (!g) {
			err = -ENOMEM;
			break;
		}
		put(g->live, i, fg->live_bytes);
		put(g->device_bytes, i, fg->instance.device_bytes_allocated);
	}
	figures_process_free(&sum);
	if (!err)
		err = series_cpu(s, f, i);
	for (unsigned k = 0; k < f->nprocs && !err; k++) {
		const struct figures_process *p = &f->procs[k];
		struct series_proc *sp;
		if ((k && p->target.gone) || !(p->stats.known & (1u << TALLY_STAT_live)))
			continue;
		sp = proc_of(s, p->target.pid, p->target.comm);
		if (!sp)
			return -ENOMEM;
		put(sp->live, i, p->stats.v[TALLY_STAT_live]);
	}
	return err;
}

int series_add(struct series *s, const struct figures *f, uint64_t now_ns, bool final)
{
	uint64_t tick = s->ticks++;

	if (!final && tick % s->stride)
		return 0;
	if (s->n == SERIES_MAX_POINTS) {
		thin(s);
		if (!final && tick % s->stride)
			return 0;
	}
	s->t[s->n] = now_ns > s->start_ns ? (double)(now_ns - s->start_ns) / 1e9 : 0;
	return series_fill(s, f, s->n++);
}

static void write_points(struct json_writer *w, const char *key, const int64_t *a, unsigned n)
{
	json_key(w, key);
	json_begin_array(w);
	for (unsigned i = 0; i < n; i++) {
		if (a[i] == SERIES_NONE)
			json_null(w);
		else
			json_i64(w, a[i]);
	}
	json_end_array(w);
}

void series_write(struct json_writer *w, const struct series *s)
{
	json_begin_object(w);
	json_kv_u64(w, "interval_ms", s->interval_ms);
	json_kv_u64(w, "point_ms", (uint64_t)s->interval_ms * s->stride);
	json_kv_u64(w, "max_points", SERIES_MAX_POINTS);
	json_kv_bool(w, "thinned", s->stride > 1);
	json_kv_u64(w, "max_groups", SERIES_MAX_GROUPS);
	json_kv_u64(w, "max_processes", SERIES_MAX_PROCS);
	json_key(w, "t");
	json_begin_array(w);
	for (unsigned i = 0; i < s->n; i++)
		json_double(w, s->t[i]);
	json_end_array(w);
	json_key(w, "stats");
	json_begin_object(w);
	for (unsigned k = 0; k < TALLY_STATS_COUNT; k++)
		write_points(w, figures_stat_names[k], s->stat[k], s->n);
	json_end_object(w);
	json_key(w, "groups");
	json_begin_array(w);
	for (unsigned k = 0; k < s->ngroups; k++) {
		json_begin_object(w);
		json_kv_str(w, "name", s->groups[k].name);
		write_points(w, "live", s->groups[k].live, s->n);
		write_points(w, "cpu_ns", s->groups[k].cpu_ns, s->n);
		write_points(w, "device_bytes", s->groups[k].device_bytes, s->n);
		json_end_object(w);
	}
	json_end_array(w);
	json_key(w, "processes");
	json_begin_array(w);
	for (unsigned k = 0; k < s->nprocs; k++) {
		json_begin_object(w);
		json_kv_i64(w, "pid", s->procs[k].pid);
		json_kv_str(w, "comm", s->procs[k].comm);
		write_points(w, "live", s->procs[k].live, s->n);
		json_end_object(w);
	}
	json_end_array(w);
	json_end_object(w);
}
