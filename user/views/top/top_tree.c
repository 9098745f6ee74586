// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The rows of `tally top` over a tree of processes (top_frame.h): the groups
 * summed over its running processes by name (a worker pool's "ingest" is
 * one row), a row per process, or a row per group of each process. Which
 * processes a frame lists: the root, every one still running, and those
 * that ended since the last frame, once, with how they ended. Pure code.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../../alloc/common/hash.h"
#include "../../util/grow.h"
#include "top_frame.h"
#include "internal.h"
#include "../../util/text.h"

const char *const top_mode_names[TOP_MODES] = { "groups", "processes", "process-groups", "sites" };

int top_mode_parse(const char *name, enum top_mode *out)
{
	for (unsigned m = 0; m < TOP_MODES; m++) {
		if (!strcmp(name, top_mode_names[m])) {
			*out = (enum top_mode)m;
			return 0;
		}
	}
	return -EINVAL;
}

const char *top_id_title(enum top_mode mode)
{
	return mode == TOP_MODE_PROCS ? "PID" : "ID";
}

bool top_proc_listed(const struct figures *fig, unsigned i, const struct top_prev *prev)
{
	const struct figures_process *p = &fig->procs[i];

	if (i == 0 || !p->target.gone)
		return true;
	return prev->valid && p->ended_ns > prev->t_ns;
}

/* Whose figures the group rows sum: the root (its final figures once it has
 * gone) and the processes still running; an ended child's memory is gone. */
static bool proc_summed(const struct figures *fig, unsigned i)
{
	return i == 0 || !fig->procs[i].target.gone;
}

static struct top_row *row_new(struct top_frame *f)
{
	size_t cap = f->caprows;

	if (grow((void **)&f->rows, &cap, (size_t)f->nrows + 1, sizeof(*f->rows), 64))
		return NULL;
	f->caprows = (unsigned)cap;
	struct top_row *r = &f->rows[f->nrows++];
	memset(r, 0, sizeof(*r));
	return r;
}

/* What a row sums: its pairs' figures and their rates. */
struct row_ctx {
	struct top_frame *f;
	const struct top_prev *prev;
	double dt_s;
};

static const struct top_prev_row *prev_find(const struct top_prev *prev, uint64_t key)
{
	unsigned lo = 0, hi = prev->n;

	while (lo < hi) {
		unsigned mid = lo + (hi - lo) / 2;
		if (prev->rows[mid].key == key)
			return &prev->rows[mid];
		if (prev->rows[mid].key < key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* One process's group into the frame's pairs, and its rates into the row. */
static int pair_add(const struct row_ctx *c, struct top_row *r, const struct figures_process *p,
		    const struct figures_group *g)
{
	static const struct top_prev_row zero;
	struct top_frame *f = c->f;
	const struct top_prev *prev = c->prev;
	size_t cap = f->cappairs;

	if (grow((void **)&f->pairs, &cap, (size_t)f->npairs + 1, sizeof(*f->pairs), 64))
		return -ENOMEM;
	f->cappairs = (unsigned)cap;
	struct top_prev_row *now = &f->pairs[f->npairs++];
	*now = (struct top_prev_row){ (uint64_t)(uint32_t)p->target.pid << 32 | g->id, g->cpu_ns,
				      g->alloc_objs, g->dealloc_objs };
	const struct top_prev_row *b = prev->valid ? prev_find(prev, now->key) : NULL;
	/* new since the last frame: from zero, unless its counters began as a
	 * copy of its parent's (forked since) */
	if (!b && prev->valid && !prev->full && (!p->inherited || p->born_ns <= prev->t_ns))
		b = &zero;
	if (!b || c->dt_s <= 0 || now->cpu_ns < b->cpu_ns || now->allocs < b->allocs ||
	    now->frees < b->frees)
		return 0; /* no base, or a counter went back (a change of source) */
	r->rates_known = true;
	r->cpu_pct += (double)(now->cpu_ns - b->cpu_ns) / c->dt_s / 1e9 * 100;
	r->allocs_s += (double)(now->allocs - b->allocs) / c->dt_s;
	r->frees_s += (double)(now->frees - b->frees) / c->dt_s;
	return 0;
}

static int row_add(const struct row_ctx *c, struct top_row *r, const struct figures_process *p,
		   const struct figures_group *g)
{
	const struct figures_instance *in = &g->instance;

	r->live += g->live_bytes;
	/* a process that does not know its peak adds nothing (top_row) */
	if (p->peak.known) {
		r->peak_known = true;
		r->peak += g->peak_live;
	}
	r->gpu_known |= p->gpu_attached;
	r->kernels += in->kernels_launched;
	r->device += in->device_bytes_allocated;
	r->pinned += in->host_pinned_bytes;
	r->rejects += in->back_pressure_rejections;
	r->yields += in->yield_count;
	return pair_add(c, r, p, g);
}

/* A group's name as shown: sanitized, or "#ID". */
static void group_name(char *buf, size_t size, const struct figures_group *g)
{
	if (g->name)
		text_sanitize_terminal(buf, size, g->name, TALLY_GROUP_NAME_MAX);
	else
		snprintf(buf, size, "#%u", g->id);
}

/* FNV-1a: a group row's key, by its name (bit 63 set: never a process's). */
static uint64_t name_key(const char *s)
{
	return hash_fnv1a64_str(s) | 1ULL << 63;
}

static int collect_groups(const struct row_ctx *c, const struct figures *fig)
{
	struct top_frame *f = c->f;
	char name[TOP_NAME_MAX];

	for (unsigned i = 0; i < fig->nprocs; i++) {
		const struct figures_process *p = &fig->procs[i];
		if (!proc_summed(fig, i))
			continue;
		for (unsigned g = 0; g < p->ngroups; g++) {
			struct top_row *r = NULL;
			group_name(name, sizeof(name), &p->groups[g]);
			uint64_t key = name_key(name);
			for (unsigned k = 0; k < f->nrows && !r; k++)
				if (f->rows[k].key == key && !strcmp(f->rows[k].name, name))
					r = &f->rows[k];
			if (!r) {
				if (!(r = row_new(f)))
					return -ENOMEM;
				r->id = p->groups[g].id;
				r->key = key;
				strcpy(r->name, name);
			}
			if (row_add(c, r, p, &p->groups[g]))
				return -ENOMEM;
		}
	}
	return 0;
}

/* The command line, printable ASCII already (target_cmdline): anything
 * else would be a bug upstream, shown as '?' rather than sent to a terminal. */
static void cmdline_copy(char *out, size_t size, const char *in)
{
	size_t i = 0;

	for (; in && in[i] && i + 1 < size; i++)
		out[i] = in[i] >= 0x20 && in[i] < 0x7f ? in[i] : '?';
	if (size)
		out[i] = 0;
	if (in && in[i] && size > 4)
		memcpy(out + size - 4, "...", 4);
}

/* "COMM[PID]"; with_cmdline: and its command line, as ps shows it (every
 * PostgreSQL backend's comm is "postgres") */
static void proc_label(char *buf, size_t size, const struct figures_process *p, bool with_cmdline)
{
	char comm[TOP_COMM_MAX], cmd[TOP_CMDLINE_LABEL];

	text_sanitize_terminal(comm, sizeof(comm), p->target.comm ? p->target.comm : "",
			       TALLY_COMM_LEN);
	cmdline_copy(cmd, sizeof(cmd), with_cmdline ? p->target.cmdline : NULL);
	snprintf(buf, size, "%s[%d]%s%s", comm, (int)p->target.pid, cmd[0] ? " " : "", cmd);
}

static int collect_procs(const struct row_ctx *c, const struct figures *fig, bool by_group)
{
	struct top_frame *f = c->f;
	const struct top_prev *prev = c->prev;
	char name[TOP_NAME_MAX];

	for (unsigned i = 0; i < fig->nprocs; i++) {
		const struct figures_process *p = &fig->procs[i];
		struct top_row *r = NULL;
		if (!top_proc_listed(fig, i, prev))
			continue;
		if (!by_group) {
			if (!(r = row_new(f)))
				return -ENOMEM;
			r->id = (uint32_t)p->target.pid;
			r->pid = p->target.pid;
			r->key = (uint64_t)(uint32_t)p->target.pid << 32 | 0xffffffffu;
			proc_label(r->name, sizeof(r->name), p, true);
		}
		for (unsigned g = 0; g < p->ngroups; g++) {
			if (by_group) {
				if (!(r = row_new(f)))
					return -ENOMEM;
				r->id = p->groups[g].id;
				r->pid = p->target.pid;
				r->key = (uint64_t)(uint32_t)p->target.pid << 32 | p->groups[g].id;
				proc_label(r->name, sizeof(r->name), p, false);
				group_name(name, sizeof(name), &p->groups[g]);
				r->group_at = (unsigned)strlen(r->name) + 1;
				snprintf(r->name + r->group_at - 1,
					 sizeof(r->name) - r->group_at + 1, "/%s", name);
			}
			if (row_add(c, r, p, &p->groups[g]))
				return -ENOMEM;
		}
		/* a process's row: its own peak of live, as the snapshot's
		 * peak.live, rather than its groups' sum (row_add) */
		if (!by_group) {
			r->peak_known = p->peak.known;
			r->peak = p->peak.known ? p->peak.v[TALLY_STAT_live] : 0;
		}
	}
	return 0;
}

static int list_procs(struct top_frame *f, const struct figures *fig, const struct top_prev *prev)
{
	f->nprocs = 0;
	for (unsigned i = 0; i < fig->nprocs; i++) {
		const struct figures_target *t = &fig->procs[i].target;
		if (!top_proc_listed(fig, i, prev))
			continue;
		size_t cap = f->capprocs;
		if (grow((void **)&f->procs, &cap, (size_t)f->nprocs + 1, sizeof(*f->procs), 16))
			return -ENOMEM;
		f->capprocs = (unsigned)cap;
		struct top_proc *o = &f->procs[f->nprocs++];
		o->pid = t->pid;
		text_sanitize_terminal(o->comm, sizeof(o->comm), t->comm ? t->comm : "",
				       TALLY_COMM_LEN);
		cmdline_copy(o->cmdline, sizeof(o->cmdline), t->cmdline);
		o->gone = t->gone;
		o->exit_code = t->signal ? 128 + t->signal : t->exit_code;
		o->oom_kill = fig->procs[i].oom.killed;
		o->peak_known = fig->procs[i].peak.known;
	}
	return 0;
}

int top_rows_collect(struct top_frame *f, const struct figures *fig, const struct top_prev *prev,
		     double dt_s, enum top_mode mode)
{
	const struct row_ctx c = { f, prev, dt_s };
	int err = list_procs(f, fig, prev);

	f->nrows = f->npairs = 0;
	f->mode = mode;
	/* the sites view's frame has the groups' rows too: the same pairs as
	 * the groups view's, the base of the rates whatever the view after it */
	if (!err)
		err = mode == TOP_MODE_GROUPS || mode == TOP_MODE_SITES ?
			      collect_groups(&c, fig) :
			      collect_procs(&c, fig, mode == TOP_MODE_PROC_GROUPS);
	return err;
}
