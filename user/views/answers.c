// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The answers (answers.h). Each list is a process's sites ranked by one
 * figure of the heap profile, most first, ANSWERS_SITES at most: a linear
 * pick per place (the profile has a few hundred sites; a snapshot is written
 * once).
 */
#include <stdint.h>
#include <string.h>

#include "answers.h"

/* The labels of the lifetimes' buckets (model/sites.h), and of the blocks
 * still in use. */
static const char *const life_names[PROF_LIFE_BUCKETS] = { "lt_1ms", "lt_10ms", "lt_100ms",
							   "lt_1s",  "lt_10s",	"longer" };

/* A frame: one line of a location (several where functions were inlined). */
static void write_frame(struct json_writer *w, const struct prof *p, const struct prof_loc *l,
			const struct prof_line *ln)
{
	json_begin_object(w);
	if (ln && ln->function)
		json_kv_str(w, "function", ln->function);
	else
		json_kv_null(w, "function");
	if (ln && ln->file)
		json_kv_str(w, "file", ln->file);
	else
		json_kv_null(w, "file");
	if (ln && ln->line)
		json_kv_i64(w, "line", ln->line);
	else
		json_kv_null(w, "line");
	if (l->mapping >= 0)
		json_kv_str(w, "module", p->maps[l->mapping].file);
	else
		json_kv_null(w, "module");
	json_kv_u64(w, "address", l->addr);
	json_end_object(w);
}

void answers_frames(struct json_writer *w, const struct prof *p, const struct prof_sample *s)
{
	json_key(w, "frames");
	json_begin_array(w);
	for (size_t k = 0; k < s->nlocs; k++) {
		const struct prof_loc *l = &p->locs[s->locs[k]];
		for (size_t j = 0; j < l->nlines; j++)
			write_frame(w, p, l, &l->lines[j]);
		if (!l->nlines)
			write_frame(w, p, l, NULL);
	}
	json_end_array(w);
}

void answers_site_life(struct json_writer *w, const struct prof_sample *s)
{
	json_key(w, "lifetimes");
	json_begin_object(w);
	for (unsigned k = 0; k < PROF_LIFE_BUCKETS; k++)
		json_kv_i64(w, life_names[k], s->life[k]);
	json_kv_i64(w, "live", s->inuse_objects);
	json_end_object(w);
}

typedef int64_t (*rank_fn)(const struct prof_sample *s);

/* The index of pid's site with the most `rank` (> 0) not among shown[0..n), or SIZE_MAX. */
static size_t pick(const struct prof *prof, int64_t pid, rank_fn rank, const size_t *shown,
		   size_t n)
{
	size_t best = SIZE_MAX;

	for (size_t i = 0; i < prof->nsamples; i++) {
		const struct prof_sample *s = &prof->samples[i];
		bool taken = false;
		for (size_t k = 0; k < n && !taken; k++)
			taken = shown[k] == i;
		if (!taken && s->pid == pid && rank(s) > 0 &&
		    (best == SIZE_MAX || rank(s) > rank(&prof->samples[best])))
			best = i;
	}
	return best;
}

/* "key": the process's sites by `rank`, each with its frames, group, pid,
 * the figures `fields` writes (NULL: none of its own) and its in-use and
 * allocated figures. */
static void ranked(struct json_writer *w, const char *key, const struct figures_process *p,
		   const struct prof *prof, rank_fn rank,
		   void (*fields)(struct json_writer *w, const struct prof_sample *s))
{
	size_t shown[ANSWERS_SITES], n = 0;

	json_key(w, key);
	json_begin_array(w);
	for (; prof && n < ANSWERS_SITES; n++) {
		size_t i = pick(prof, (int64_t)p->target.pid, rank, shown, n);
		if (i == SIZE_MAX)
			break;
		shown[n] = i;
		json_begin_object(w);
		answers_frames(w, prof, &prof->samples[i]);
		const struct prof_sample *s = &prof->samples[i];
		json_kv_str(w, "group", s->group ? s->group : "root");
		json_kv_i64(w, "pid", s->pid);
		if (fields)
			fields(w, s);
		json_kv_i64(w, "inuse_bytes", s->inuse_space);
		json_kv_i64(w, "inuse_objects", s->inuse_objects);
		json_kv_i64(w, "alloc_bytes", s->alloc_space);
		json_kv_i64(w, "alloc_objects", s->alloc_objects);
		json_end_object(w);
	}
	json_end_array(w);
}

static int64_t by_peak(const struct prof_sample *s)
{
	return s->peak_space;
}

static void peak_fields(struct json_writer *w, const struct prof_sample *s)
{
	json_kv_i64(w, "peak_bytes", s->peak_space);
	json_kv_i64(w, "peak_objects", s->peak_objects);
}

static int64_t by_inuse(const struct prof_sample *s)
{
	return s->inuse_space;
}

static int64_t by_recent(const struct prof_sample *s)
{
	return s->recent_space;
}

static void recent_fields(struct json_writer *w, const struct prof_sample *s)
{
	json_kv_i64(w, "recent_bytes", s->recent_space);
	json_kv_i64(w, "recent_objects", s->recent_objects);
}

/* Temporary: freed within a millisecond of their allocation */
static int64_t by_short(const struct prof_sample *s)
{
	return s->life[0];
}

static void short_fields(struct json_writer *w, const struct prof_sample *s)
{
	int64_t freed = 0;

	for (unsigned k = 0; k < PROF_LIFE_BUCKETS; k++)
		freed += s->life[k];
	json_kv_i64(w, "freed_within_1ms", s->life[0]);
	json_kv_i64(w, "freed_objects", freed);
	answers_site_life(w, s);
}

/* Per group, the lifetimes of its sites' blocks summed. */
static void group_lifetimes(struct json_writer *w, const struct figures_process *p,
			    const struct prof *prof)
{
	json_key(w, "lifetimes");
	json_begin_array(w);
	for (unsigned g = 0; g < p->ngroups; g++) {
		const char *name = p->groups[g].name ? p->groups[g].name : "root";
		int64_t life[PROF_LIFE_BUCKETS] = { 0 }, live = 0;
		for (size_t i = 0; prof && i < prof->nsamples; i++) {
			const struct prof_sample *s = &prof->samples[i];
			if (s->pid != (int64_t)p->target.pid ||
			    strcmp(s->group ? s->group : "root", name))
				continue;
			for (unsigned k = 0; k < PROF_LIFE_BUCKETS; k++)
				life[k] += s->life[k];
			live += s->inuse_objects;
		}
		json_begin_object(w);
		json_kv_str(w, "group", name);
		for (unsigned k = 0; k < PROF_LIFE_BUCKETS; k++)
			json_kv_i64(w, life_names[k], life[k]);
		json_kv_i64(w, "live", live);
		json_end_object(w);
	}
	json_end_array(w);
}

static double seconds_since(uint64_t ns, uint64_t start_ns)
{
	return ns > start_ns ? (double)(ns - start_ns) / 1e9 : 0;
}

static void write_peak_moment(struct json_writer *w, const struct figures_process *p,
			      const struct figures_peak *pk)
{
	json_kv_double(w, "at_s", seconds_since(pk->at_ns, p->start_ns));
	json_kv_double(w, "after_s", seconds_since(pk->from_ns, p->start_ns));
	json_kv_bool(w, "exact", pk->exact);
	json_kv_str(w, "since", pk->since_attach ? "attach" : "start");
	json_kv_i64(w, "live", pk->v[1]);
	json_kv_i64(w, "mapped", pk->v[0]);
}

/* "peak" and "peak_mapped" (docs/DESIGN.md §11): null where no replay
 * keeps them (glibc mode, no allocator traced). */
static void answers_peak(struct json_writer *w, const struct figures_process *p,
			 const struct prof *prof)
{
	json_key(w, "peak");
	if (!p->peak.known) {
		json_null(w);
		json_kv_null(w, "peak_mapped");
		return;
	}
	json_begin_object(w);
	write_peak_moment(w, p, &p->peak);
	json_key(w, "stats");
	json_begin_object(w);
	/* every term known: the replay's own */
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
		json_kv_i64(w, figures_stat_names[i], p->peak.v[i]);
	json_end_object(w);
	json_key(w, "groups");
	json_begin_array(w);
	for (unsigned g = 0; g < p->ngroups; g++) {
		json_begin_object(w);
		json_kv_str(w, "name", p->groups[g].name ? p->groups[g].name : "root");
		json_kv_i64(w, "live", p->groups[g].peak_live);
		json_end_object(w);
	}
	json_end_array(w);
	ranked(w, "sites", p, prof, by_peak, peak_fields);
	json_end_object(w);
	json_key(w, "peak_mapped");
	json_begin_object(w);
	write_peak_moment(w, p, &p->peak_mapped);
	json_end_object(w);
}

void answers_write(struct json_writer *w, const struct figures_process *p, const struct prof *prof)
{
	answers_peak(w, p, prof);
	/* an ended process's blocks in use at its end were never freed */
	if (p->target.gone)
		ranked(w, "leaked", p, prof, by_inuse, NULL); /* the common figures say it */
	else
		ranked(w, "growing", p, prof, by_recent, recent_fields);
	ranked(w, "temporary", p, prof, by_short, short_fields);
	group_lifetimes(w, p, prof);
}

void answers_tree_peak(struct json_writer *w, const struct figures *f)
{
	const struct figures_tree_peak *pk = &f->tree.peak;

	json_key(w, "peak");
	if (!pk->known || !f->nprocs) {
		json_null(w);
		return;
	}
	json_begin_object(w);
	json_kv_double(w, "at_s", seconds_since(pk->at_ns, f->procs[0].start_ns));
	json_kv_bool(w, "exact", pk->exact);
	json_kv_i64(w, "live", pk->live);
	json_kv_i64(w, "mapped", pk->mapped);
	json_key(w, "groups");
	json_begin_array(w);
	for (unsigned i = 0; i < pk->ngroups; i++) {
		json_begin_object(w);
		json_kv_str(w, "name", pk->groups[i].name);
		json_kv_i64(w, "live", pk->groups[i].live);
		json_end_object(w);
	}
	json_end_array(w);
	json_kv_u64(w, "groups_not_listed", pk->groups_more);
	json_key(w, "processes");
	json_begin_array(w);
	for (unsigned i = 0; i < pk->nprocs; i++) {
		const char *comm = NULL;
		for (unsigned k = 0; k < f->nprocs && !comm; k++)
			if ((int32_t)f->procs[k].target.pid == pk->procs[i].pid)
				comm = f->procs[k].target.comm;
		json_begin_object(w);
		json_kv_i64(w, "pid", pk->procs[i].pid);
		if (comm)
			json_kv_str(w, "comm", comm);
		else
			json_kv_null(w, "comm");
		json_kv_i64(w, "live", pk->procs[i].live);
		json_end_object(w);
	}
	json_end_array(w);
	json_kv_u64(w, "processes_not_listed", pk->more);
	json_end_object(w);
}
