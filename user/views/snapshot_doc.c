// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The snapshot document of docs/DESIGN.md §6 (snapshot_doc.h). It is built in
 * memory and written in one piece, so that a failure never leaves half of
 * it on stdout.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "answers.h"
#include "snapshot_doc.h"
#include "snapshot_oom.h"

/* Signed: a rebuild that lost records can take a term below zero, which
 * must read as negative, not as 2^64 - x (the allocator's own never are). */
static void write_stats_terms(struct json_writer *w, const int64_t v[TALLY_STATS_COUNT],
			      uint32_t known)
{
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++) {
		if (known & (1u << i))
			json_kv_i64(w, figures_stat_names[i], v[i]);
		else
			json_kv_null(w, figures_stat_names[i]);
	}
}

/* The instance figures (docs/DESIGN.md §4): the five of the contract, then
 * tally's own. */
static void write_instance(struct json_writer *w, const struct figures_instance *in)
{
	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++) {
		const struct figures_instance_field *fi = &figures_instance_fields[i];
		uint64_t v = figures_instance_get(in, i);

		if (fi->is_signed)
			json_kv_i64(w, fi->name, (int64_t)v);
		else
			json_kv_u64(w, fi->name, v);
	}
}

/* --inject: glibc's own identity beside tally's terms, from mallinfo2 in
 * the process (the last the interposer sent): what glibc has mapped
 * (arena: its heaps; mmapped: its mmapped chunks), in use and free
 * (releasable: at the top of the main heap); null before the first; the
 * blocks glibc gave again whose free the interposer had not seen. And the
 * frees of blocks the interposer had not seen allocated (before the
 * injection), with their usable bytes. */
static void write_glibc(struct json_writer *w, const struct figures_process *p)
{
	static const char *const names[TALLY_GLIBC_INFO_WORDS] = { "arena",	 "mmapped",
								   "in_use",	 "free",
								   "releasable", "frees_not_seen" };

	json_key(w, "glibc");
	json_begin_object(w);
	for (unsigned i = 0; i < TALLY_GLIBC_INFO_WORDS; i++) {
		if (p->have_glibc_info)
			json_kv_u64(w, names[i], p->glibc_info[i]);
		else
			json_kv_null(w, names[i]);
	}
	json_kv_u64(w, "frees_not_seen_allocated", p->unknown_frees);
	json_kv_u64(w, "frees_not_seen_allocated_bytes", p->unknown_free_bytes);
	if (p->have_glibc_info)
		json_kv_u64(w, "interposer_table_bytes", p->glibc_table_bytes);
	else
		json_kv_null(w, "interposer_table_bytes");
	json_end_object(w);
}

static void write_stats(struct json_writer *w, const struct figures_process *p)
{
	const struct figures_stats *fs = &p->stats;

	json_key(w, "stats");
	json_begin_object(w);
	/* glibc mode knows live, its rounding and its mmapped chunks; the
	 * other terms have no glibc meaning */
	write_stats_terms(w, fs->v, fs->known);
	if (fs->identity) {
		json_kv_i64(w, "accounted", fs->accounted);
		json_kv_bool(w, "balanced", fs->balanced);
		json_kv_i64(w, "predicted_resident", fs->predicted_resident);
	} else {
		json_kv_null(w, "accounted");
		json_kv_null(w, "balanced");
		json_kv_null(w, "predicted_resident");
	}
	if (fs->identity && fs->have_resident)
		json_kv_u64(w, "measured_resident", fs->resident);
	else
		json_kv_null(w, "measured_resident");
	json_end_object(w);
	json_key(w, "stats_inprocess");
	if (p->have_inprocess) {
		int64_t v[TALLY_STATS_COUNT];
		for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
			v[i] = (int64_t)p->inprocess[i];
		json_begin_object(w);
		write_stats_terms(w, v, (1u << TALLY_STATS_COUNT) - 1);
		json_end_object(w);
	} else {
		json_null(w);
	}
	if (p->injected)
		write_glibc(w, p);
}

/* Whether the GPU figures are exact, and why not (docs/DESIGN.md §8: work
 * before an attach cannot be seen). */
static void write_instance_exact(struct json_writer *w, const struct figures_process *p)
{
	json_kv_bool(w, "exact", p->instance_exact);
	if (p->instance_exact)
		return;
	json_key(w, "inexact_why");
	json_begin_array(w);
	for (unsigned i = 0; i < p->ninstance_why; i++)
		json_string(w, p->instance_why[i]);
	json_end_array(w);
}

static void write_group(struct json_writer *w, const struct figures_process *p,
			const struct figures_group *fg)
{
	json_begin_object(w);
	json_kv_u64(w, "id", fg->id);
	json_kv_str(w, "name", fg->name);
	json_kv_u64(w, "allocated_bytes", fg->alloc_bytes);
	json_kv_u64(w, "allocated_objects", fg->alloc_objs);
	json_kv_u64(w, "deallocated_bytes", fg->dealloc_bytes);
	json_kv_u64(w, "deallocated_objects", fg->dealloc_objs);
	json_kv_i64(w, "live_bytes", fg->live_bytes);
	if (p->peak.known)
		json_kv_i64(w, "peak_live", fg->peak_live);
	else
		json_kv_null(w, "peak_live");
	json_kv_u64(w, "cpu_ns", fg->cpu_ns);
	json_key(w, "instance");
	json_begin_object(w);
	write_instance(w, &fg->instance);
	write_instance_exact(w, p);
	json_end_object(w);
	json_end_object(w);
}

/* "target": who, how attached, and how it ended: "exit_code" (null when
 * killed or still running) and "signal" (null unless killed). */
static void write_lifetime(struct json_writer *w, const struct figures_process *p);

static void write_target(struct json_writer *w, const struct figures_process *p)
{
	const struct figures_target *t = &p->target;
	char sig[16] = "";

	json_key(w, "target");
	json_begin_object(w);
	json_kv_i64(w, "pid", t->pid);
	/* the same process as its own PID namespace numbers it (a container) */
	json_kv_i64(w, "ns_pid", t->ns_pid);
	json_kv_i64(w, "ppid", t->ppid);
	json_kv_str(w, "comm", t->comm);
	/* as ps shows it (escaped, cut at 255 bytes); null: not known */
	json_kv_str(w, "cmdline", t->cmdline && t->cmdline[0] ? t->cmdline : NULL);
	json_kv_str(w, "allocator", figures_target_allocator(t));
	json_kv_str(w, "cuda", figures_cuda_name(t->cuda));
	if (t->cuda_why) /* CUPTI refused tally: why, in its words */
		json_kv_str(w, "cuda_why", t->cuda_why);
	json_kv_str(w, "attach", t->injected ? "injected" : t->late ? "running" : "start");
	if (t->read_known)
		json_kv_bool(w, "state_read_consistent", t->read_consistent);
	if (t->exit_code >= 0)
		json_kv_i64(w, "exit_code", t->exit_code);
	else
		json_kv_null(w, "exit_code");
	if (t->signal)
		snprintf(sig, sizeof(sig), "SIG%s",
			 sigabbrev_np(t->signal) ? sigabbrev_np(t->signal) : "?");
	json_kv_str(w, "signal", t->signal ? sig : NULL);
	json_kv_str(w, "cgroup", t->cgroup);
	json_kv_str(w, "container", t->container);
	snapshot_oom_write(w, &p->oom);
	write_lifetime(w, p);
	json_end_object(w);
}

/* When a process of the tree began and how long it lived, in seconds from
 * tally's start (null: before it). */
static void write_lifetime(struct json_writer *w, const struct figures_process *p)
{
	uint64_t end = p->ended_ns ? p->ended_ns : p->now_ns;

	if (p->born_ns && p->born_ns >= p->start_ns) {
		json_kv_double(w, "born_s", (double)(p->born_ns - p->start_ns) / 1e9);
		json_kv_double(w, "lifetime_s",
			       end > p->born_ns ? (double)(end - p->born_ns) / 1e9 : 0);
	} else {
		json_kv_null(w, "born_s");
		json_kv_null(w, "lifetime_s");
	}
}

static void write_events(struct json_writer *w, const struct figures_events *e)
{
	json_key(w, "events");
	json_begin_object(w);
	json_kv_u64(w, "received", e->received);
	json_kv_u64(w, "lost", e->lost);
	json_kv_u64(w, "lost_record_words", e->lost_record_words);
	/* lost before the state read at a late attach, or after the final
	 * cut: their records are in the state read, or past the snapshot */
	json_kv_u64(w, "lost_outside_read", e->lost_outside_read);
	json_kv_u64(w, "malformed", e->malformed);
	json_kv_u64(w, "records", e->records);
	/* of the batches received, those read in place from the heaps'
	 * shared rings (bpf/contract/tally_events.h), not carried by the BPF ring */
	json_kv_u64(w, "batches_in_place", e->in_place);
	json_end_object(w);
}

static void write_process_fields(struct json_writer *w, const struct figures_process *p,
				 const struct prof *prof)
{
	write_target(w, p);
	json_kv_bool(w, "exact", p->exact);
	if (p->nwhy) {
		json_key(w, "inexact_why");
		json_begin_array(w);
		for (unsigned i = 0; i < p->nwhy; i++)
			json_string(w, p->why[i]);
		json_end_array(w);
		/* the same reasons as codes (README: a fixed set) */
		json_key(w, "inexact_codes");
		json_begin_array(w);
		for (unsigned i = 0; i < p->nwhy; i++)
			json_string(w, figures_why_codes[p->why_code[i]]);
		json_end_array(w);
	}
	write_events(w, &p->events);
	write_stats(w, p);
	json_key(w, "instance");
	json_begin_object(w);
	write_instance(w, &p->instance);
	json_kv_bool(w, "scheduler", p->instance.yield_count > 0);
	write_instance_exact(w, p);
	/* the driver's own figure: what a late attach cannot rebuild */
	if (p->have_device_memory_used)
		json_kv_u64(w, "device_memory_used", p->device_memory_used);
	json_end_object(w);
	json_key(w, "groups");
	json_begin_array(w);
	for (unsigned g = 0; g < p->ngroups; g++)
		write_group(w, p, &p->groups[g]);
	json_end_array(w);
	answers_write(w, p, prof);
}

/* What the tree did over its life: every process it had, ended ones (and
 * those past what tally lists) included; a forked child's own counters,
 * what it inherited from its parent taken off. */
static void write_tree_life(struct json_writer *w, const struct figures *f)
{
	const struct figures_lifetime *l = &f->tree.life;

	json_key(w, "lifetime");
	json_begin_object(w);
	json_kv_u64(w, "processes", f->tree.processes + f->folded);
	json_kv_u64(w, "cpu_ns", l->cpu_ns);
	json_kv_u64(w, "allocated_bytes", l->alloc_bytes);
	json_kv_u64(w, "allocated_objects", l->alloc_objs);
	json_kv_u64(w, "deallocated_bytes", l->dealloc_bytes);
	json_kv_u64(w, "deallocated_objects", l->dealloc_objs);
	json_kv_u64(w, "kernels_launched", l->kernels_launched);
	json_kv_u64(w, "graph_launches", l->graph_launches);
	json_kv_u64(w, "events_received", l->received);
	json_kv_u64(w, "records", l->records);
	json_kv_u64(w, "batches_in_place", l->in_place);
	json_end_object(w);
}

/* What is alive at the end (or at this moment): the sums that would mislead
 * over processes that are gone (their live bytes went with them). */
static void write_tree_alive(struct json_writer *w, const struct figures_tree *t)
{
	json_key(w, "alive_at_end");
	json_begin_object(w);
	json_kv_u64(w, "processes", t->alive);
	json_kv_i64(w, "live", t->live);
	json_kv_i64(w, "mapped", t->mapped);
	json_kv_u64(w, "cpu_ns", t->cpu_ns);
	json_key(w, "instance");
	json_begin_object(w);
	write_instance(w, &t->instance);
	json_kv_bool(w, "exact", t->instance_exact);
	if (t->have_device_memory_used)
		json_kv_u64(w, "device_memory_used", t->device_memory_used);
	json_end_object(w);
	json_end_object(w);
}

/* Processes of the tree whose figures are not exact: the first few by
 * pid, comm and reason codes (the rest counted in inexact_processes). */
#define TREE_INEXACT_LISTED 64

static void write_tree_inexact(struct json_writer *w, const struct figures *f)
{
	unsigned listed = 0;

	json_kv_bool(w, "exact", f->tree.exact);
	json_kv_u64(w, "inexact_processes", f->tree.inexact);
	json_key(w, "inexact");
	json_begin_array(w);
	for (unsigned i = 0; i < f->nprocs && listed < TREE_INEXACT_LISTED; i++) {
		const struct figures_process *p = &f->procs[i];
		if (p->exact)
			continue;
		listed++;
		json_begin_object(w);
		json_kv_i64(w, "pid", p->target.pid);
		json_kv_str(w, "comm", p->target.comm);
		json_key(w, "inexact_codes");
		json_begin_array(w);
		for (unsigned k = 0; k < p->nwhy; k++)
			json_string(w, figures_why_codes[p->why_code[k]]);
		json_end_array(w);
		json_end_object(w);
	}
	json_end_array(w);
}

static void write_tree(struct json_writer *w, const struct figures *f)
{
	const struct figures_tree *t = &f->tree;

	json_key(w, "tree");
	json_begin_object(w);
	json_kv_u64(w, "processes", t->processes + f->folded);
	json_kv_u64(w, "alive", t->alive);
	/* ended processes past what tally keeps one by one: counted, not listed */
	json_kv_u64(w, "not_listed", f->folded);
	write_tree_inexact(w, f);
	write_tree_alive(w, t);
	write_tree_life(w, f);
	answers_tree_peak(w, f);
	json_end_object(w);
}

static void write_sites(struct json_writer *w, const struct prof *p)
{
	json_key(w, "sampling");
	json_begin_object(w);
	json_kv_u64(w, "rate", p ? p->period : 0);
	json_end_object(w);
	json_key(w, "sites");
	json_begin_array(w);
	for (size_t i = 0; p && i < p->nsamples && i < SNAPSHOT_SITES; i++) {
		const struct prof_sample *s = &p->samples[i];
		/* the sites that allocated and hold nothing now too: a server
		 * under load frees each request's blocks, and its snapshot
		 * showed only what was allocated before the attach */
		if (!s->inuse_space && !s->alloc_space)
			break;
		json_begin_object(w);
		answers_frames(w, p, s);
		json_kv_str(w, "group", s->group ? s->group : "root");
		json_kv_i64(w, "pid", s->pid);
		json_kv_i64(w, "inuse_bytes", s->inuse_space);
		json_kv_i64(w, "inuse_objects", s->inuse_objects);
		json_kv_i64(w, "alloc_bytes", s->alloc_space);
		json_kv_i64(w, "alloc_objects", s->alloc_objects);
		json_kv_i64(w, "peak_bytes", s->peak_space);
		json_kv_i64(w, "peak_objects", s->peak_objects);
		answers_site_life(w, s);
		json_end_object(w);
	}
	json_end_array(w);
}

void snapshot_write(struct json_writer *w, const struct figures *f, const struct prof *sites)
{
	json_begin_object(w);
	write_process_fields(w, &f->procs[0], sites);
	write_sites(w, sites);
	json_key(w, "processes");
	json_begin_array(w);
	for (unsigned i = 0; i < f->nprocs; i++) {
		json_begin_object(w);
		write_process_fields(w, &f->procs[i], sites);
		json_end_object(w);
	}
	json_end_array(w);
	write_tree(w, f);
	json_end_object(w);
}

int snapshot_print(FILE *out, const struct figures *f, const struct prof *sites)
{
	struct json_writer w;
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int err;

	if (!mem)
		return -errno;
	json_init(&w, mem, true);
	snapshot_write(&w, f, sites);
	err = json_finish(&w);
	if (fclose(mem) && !err)
		err = -EIO;
	if (!err && (fwrite(buf, 1, len, out) != len || fflush(out)))
		err = -EIO;
	free(buf);
	return err;
}
