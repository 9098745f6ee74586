// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tree's other processes (docs/DESIGN.md §6, §9): their messages into their
 * own models, a fork's model cloned from its parent's, an ended process's
 * figures made final and kept small, and each one's sources (its CPU, where
 * it lives, how it ended) beside the root's for the figures of a tick.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/remote.h"
#include "cut_read.h"
#include "session.h"
#include "internal.h"

void session_sources_lost(struct session *s, struct figures_sources *src)
{
	struct tally_lost lost;

	loader_lost(s->loader, &lost);
	const struct tally_lost *end = s->have_lost_cut ? &s->lost_cut : &lost;
	src->lost_msgs = end->msgs - s->lost_base.msgs;
	src->lost_words = end->words - s->lost_base.words;
	src->lost_outside_read = lost.msgs - src->lost_msgs;
	src->malformed_bpf = lost.bad;
	src->procs_unfollowed = lost.procs;
	src->cpu_lost = lost.cpu;
}

/* What one process's figures take beside its model. */
static void proc_sources(struct session *s, struct tree_proc *p, bool ending)
{
	struct figures_sources *src = &s->psrc;
	const struct model *m = p->m;
	bool gone = ending || p->ended;

	memset(src, 0, sizeof(*src));
	session_sources_lost(s, src);
	src->pid = p->pid;
	src->ns_pid = gone ? p->ns_pid : target_ns_pid(p->pid);
	src->ppid = p->ppid;
	if (!gone && !target_cgroup(p->pid, src->cgroup, sizeof(src->cgroup), src->container,
				    sizeof(src->container)))
		tree_place(p, src->cgroup, src->container);
	if (gone) { /* where it was last seen */
		snprintf(src->cgroup, sizeof(src->cgroup), "%s", p->cgroup ? p->cgroup : "");
		snprintf(src->container, sizeof(src->container), "%s",
			 p->container ? p->container : "");
	}
	memcpy(src->comm, p->comm, sizeof(src->comm));
	if (!gone)
		target_cmdline_keep(p->pid, p->cmdline, sizeof(p->cmdline));
	memcpy(src->cmdline, p->cmdline, sizeof(src->cmdline));
	/* one found running at attach (-f): its state read then, or unknown */
	src->late = s->late && !p->born_ns;
	src->not_read = src->late && !p->read;
	/* -p --inject -f: the injection reached the root alone */
	src->uninjected = s->injected && src->late;
	/* its batches read in place (an ended one's count goes with it) */
	src->in_place = loader_rings_read_pid(s->loader, p->pid, ending);
	src->late_consistent = p->read_consistent;
	src->gone = gone;
	src->have_exit = gone && m->exited;
	src->exit_status = src->have_exit ? m->exit_status : 0;
	src->cupti = s->cupti;
	cuda_trace_read(s->cuda, p->pid, &src->cuda);
	if (!gone)
		session_nvml(s, p->pid, &src->cuda);
	src->start_ns = s->start_ns;
	src->born_ns = p->born_ns;
	src->now_ns = clock_now_ns();
	src->allocator = m->saw_alloc ? FIGURES_ALLOC_TALLY : FIGURES_ALLOC_NONE;
	src->held_unread = !gone && m->saw_alloc;
	loader_group_cpu(s->loader, p->pid, src->cpu_ns, ending);
	if (!gone)
		loader_running_cpu(s->loader, p->pid, src->now_ns, src->cpu_ns);
	if (m->have_inprocess) {
		src->resident = m->resident_at_exit;
		src->have_resident = true;
	}
	/* read at the end (session_read_final_tree): its figures are cut there */
	src->have_final_inprocess = p->have_final;
	src->final_consistent = p->final_consistent;
	src->final_inprocess = p->final;
	if (p->have_final)
		src->held_unread = false;
}

/* Its last thread is gone: its figures are final (every message of its
 * threads came before this one), kept small, its CPU entries dropped. */
static void proc_end(struct session *s, struct tree_proc *p, uint64_t ts_ns)
{
	pid_t pid = p->pid;

	proc_sources(s, p, true);
	s->psrc.ended_ns = ts_ns;
	/* its memory went with it */
	tree_peak_gone(&s->tree, p->m);
	int err = figures_build_process(&s->pscratch, p->m, &s->psrc);
	if (!err && s->pscratch.inherited)
		figures_life_sub(&s->pscratch.life, &p->base);
	if (err || tree_end(&s->tree, p, &s->pscratch))
		s->tree.strays++; /* out of memory: kept running, said inexact */
	cuda_trace_forget(s->cuda, pid);
}

/* true: kept for later (its parent's figures wait at a view's cut) */
static bool fork_msg(struct session *s, const struct tally_msg_thread *th)
{
	const struct model *parent = NULL;
	struct tree_proc *pp;

	/* born as -f read the running ones: adopted already */
	if (tree_find(&s->tree, (pid_t)th->hdr.pid))
		return false;
	if ((pid_t)th->pid == s->pid) {
		/* its parent's figures wait at a view's cut: so does the fork */
		if (s->model.holding && s->held) {
			session_hold_tree(s, th, sizeof(*th));
			return true;
		}
		parent = &s->model;
	} else if ((pp = tree_find(&s->tree, (pid_t)th->pid))) {
		parent = pp->m;
	} else {
		s->tree.unfollowed++;
	}
	struct tree_proc *c = tree_fork(&s->tree, parent, &s->model, th);
	if (!c) {
		s->tree.strays++;
		return false;
	}
	/* its copy of its parent's heaps is its own live, from here */
	struct tree_peak_mark none = { 0, c->m->replay.peak.seq, c->m->live_moved_ns };
	tree_peak_after(&s->tree, c->m, c->pid, &none, &s->model, s->pid);
	/* its counters start as its parent's: the tree's lifetime totals
	 * count what it does from here */
	if (parent)
		figures_life_of_model(&c->base, parent);
	/* its argv is its parent's until it execs or writes its own title
	 * (a PostgreSQL backend): read now, as it may be gone by the next tick */
	target_cmdline_keep(c->pid, c->cmdline, sizeof(c->cmdline));
	/* born where its parent lives (each tick looks again while it runs) */
	if (parent == &s->model)
		tree_place(c, s->src.cgroup, s->src.container);
	else if ((pp = tree_find(&s->tree, (pid_t)th->pid)))
		tree_place(c, pp->cgroup, pp->container);
	return false;
}

static uint64_t proc_heaps(struct tree_proc *p);
static struct cut_target proc_cut(struct tree_proc *p);

/* A running descendant's state, read as the root's is at a late attach: its
 * threads, its allocator's figures and heap positions (records below them
 * in the ring are then skipped), its SDK's groups. */
/* How long a running descendant's read at attach waits for its heaps to
 * answer or stand still (cut_read.c), as the root's. */
#define ADOPT_WAIT_MS 2000

static int adopt_read_alloc(struct tree_proc *p, struct remote_alloc *ra)
{
	struct cut_target t = proc_cut(p);

	return cut_read_figures(&t, ADOPT_WAIT_MS, NULL, NULL, ra);
}

static void adopt_read(struct session *s, struct tree_proc *p)
{
	char path[TARGET_PATH_MAX], comm[TALLY_COMM_LEN];
	uint64_t reg_addr, heaps = proc_heaps(p);
	struct remote_alloc ra;
	pid_t tids[256];
	int n = target_threads(p->pid, tids, 256);

	for (int i = 0; i < n; i++)
		if (!target_comm(p->pid, tids[i], comm, sizeof(comm)))
			model_thread_named(p->m, (uint32_t)tids[i], comm);
	if (heaps)
		session_sample_attach(s, p->pid);
	if (heaps && !adopt_read_alloc(p, &ra)) {
		struct tree_peak_mark k;
		tree_peak_before(p->m, &k);
		p->m->now_ns = clock_now_ns();
		model_seed_alloc(p->m, &ra);
		tree_peak_after(&s->tree, p->m, p->pid, &k, &s->model, s->pid);
		p->read = true;
		p->read_consistent = ra.consistent;
		remote_alloc_free(&ra);
	}
	if (target_lib_symbol(p->pid, "libtally.so", "tally_registry", path, sizeof(path),
			      &reg_addr))
		return;
	struct tally_registry *reg = malloc(sizeof(*reg));
	if (reg && !remote_registry_read(p->pid, reg_addr, reg)) {
		model_seed_registry(p->m, reg, false);
		for (unsigned i = 0; i < TALLY_MAX_THREADS; i++)
			if (reg->threads[i].tid && reg->threads[i].group)
				loader_set_thread_group(s->loader, p->pid, reg->threads[i].tid,
							reg->threads[i].group);
	}
	free(reg);
}

/* Most running descendants -f adopts at attach. */
#define ADOPT_MAX 4096

/*
 * -p PID -f: the descendants running now, parents first, each in the BPF
 * side's map before its children are read, so that one it starts meanwhile
 * is seen born (and its fork message then finds it adopted already).
 */
void session_adopt_descendants(struct session *s)
{
	pid_t *queue = malloc(ADOPT_MAX * sizeof(*queue));
	int head = 0, tail = 0;
	char pids[64] = "";

	if (!queue)
		return;
	queue[tail++] = s->pid;
	while (head < tail) {
		pid_t parent = queue[head++], kids[512];
		int n = target_children(parent, kids, 512);
		for (int i = 0; i < n && tail < ADOPT_MAX; i++) {
			char comm[TALLY_COMM_LEN] = "";
			if (tree_find(&s->tree, kids[i]) ||
			    loader_add_proc(s->loader, kids[i], parent))
				continue;
			target_comm(kids[i], kids[i], comm, sizeof(comm));
			struct tree_proc *p =
				tree_adopt(&s->tree, &s->model, kids[i], parent, comm);
			if (p) {
				adopt_read(s, p);
				session_cuda_running(s, p->pid);
			} else
				s->tree.strays++;
			queue[tail++] = kids[i];
		}
	}
	/* --inject reaches the root alone: the others run untraced (each one's
	 * figures say not_injected too) */
	for (int i = 1; s->injected && i < tail && i <= 4; i++)
		snprintf(pids + strlen(pids), sizeof(pids) - strlen(pids), "%s%d", i > 1 ? " " : "",
			 (int)queue[i]);
	if (s->injected && tail > 1)
		fprintf(stderr,
			"tally: --inject: only process %d is injected; %d descendant%s running "
			"now (%s%s): CPU only, allocations not traced\n",
			(int)s->pid, tail - 1, tail > 2 ? "s" : "", pids, tail > 5 ? " ..." : "");
	free(queue);
}

bool session_deliver_tree(struct session *s, const void *data, size_t len)
{
	const struct tally_msg *h = data;
	struct tree_proc *p;

	if (h->kind == TALLY_MSG_PROC_FORK) {
		if (len >= sizeof(struct tally_msg_thread))
			return fork_msg(s, data);
		s->tree.strays++;
		return false;
	}
	p = tree_find(&s->tree, (pid_t)h->pid);
	if (!p) {
		if (s->model.holding && s->tree_held) {
			session_hold_tree(s, data, len); /* its fork waits there */
			return true;
		}
		s->tree.strays++;
		return false;
	}
	session_apply(s, p->m, p->pid, data, len);
	session_oom_news(p->m, data, len);
	session_gpu_news(s, p->pid, p->m, p->gpu_said);
	if (len < sizeof(struct tally_msg_thread))
		return false;
	const struct tally_msg_thread *th = data;
	if (h->kind == TALLY_MSG_THREAD_NAME &&
	    (h->tid == h->pid || (h->flags & TALLY_THREAD_EXEC))) {
		memcpy(p->comm, th->comm, sizeof(p->comm));
		p->comm[sizeof(p->comm) - 1] = 0;
		p->shared_vm = false;
		target_cmdline_keep(p->pid, p->cmdline, sizeof(p->cmdline));
	}
	if (h->kind == TALLY_MSG_THREAD_NAME && (h->flags & TALLY_THREAD_EXEC)) {
		/* its libraries are the new image's */
		p->heaps_addr = p->cut_addr = 0;
		p->heaps_looked = false;
		session_oom_exec(&p->oom_arm);
	}
	if (p->m->nrules && (h->kind == TALLY_MSG_THREAD_NEW || h->kind == TALLY_MSG_THREAD_NAME)) {
		struct model_thread *t = model_thread(p->m, h->tid, false);
		if (t && t->rule_group >= 0 && t->group == 0)
			loader_set_thread_group(s->loader, p->pid, t->tid, (uint32_t)t->rule_group);
	}
	if (h->kind == TALLY_MSG_THREAD_EXIT && (h->flags & TALLY_THREAD_GROUP_DEAD))
		proc_end(s, p, h->ts_ns);
	return false;
}

const struct model *session_model_of(struct session *s, pid_t pid)
{
	struct tree_proc *p = pid && pid != s->pid ? tree_find(&s->tree, pid) : NULL;

	return p ? p->m : &s->model;
}

/* Where a process's allocator keeps its heaps: found once per image. */
static uint64_t proc_heaps(struct tree_proc *p)
{
	char path[TARGET_PATH_MAX];

	if (!p->heaps_looked) {
		p->heaps_looked = true;
		if (target_lib_symbol(p->pid, "libtally_alloc.so", "tally_heaps", path,
				      sizeof(path), &p->heaps_addr))
			p->heaps_addr = 0;
		else if (target_lib_symbol(p->pid, "libtally_alloc.so", "tally_cut", path,
					   sizeof(path), &p->cut_addr))
			p->cut_addr = 0;
	}
	return p->heaps_addr;
}

static struct cut_target proc_cut(struct tree_proc *p)
{
	uint64_t heaps = proc_heaps(p);

	return (struct cut_target){ p->pid, heaps, heaps ? p->cut_addr : 0 };
}

/*
 * A running process's figures at this tick: its model with the records its
 * threads hold and have not handed over yet, read from its memory, into
 * *view (its model is left as it is: those records come through the ring
 * later). false when they cannot be had whole: then the figures say why.
 */
static bool proc_view(struct session *s, struct tree_proc *p, struct model *view)
{
	struct remote_alloc ra;
	uint64_t heaps = p->m->saw_alloc ? proc_heaps(p) : 0;
	struct cut_target t = proc_cut(p);
	bool ok;

	if (!heaps || cut_read_positions(&t, &ra))
		return false;
	session_await_batches(s, p->m, &ra);
	*view = *p->m;
	ok = model_preview(p->m, &ra, &view->replay);
	remote_alloc_free(&ra);
	return ok;
}

/* How long a process's final read waits, as the root's session_read_final. */
#define FINAL_WAIT_MS 1000

static void final_between(void *ctx)
{
	session_drain_ring(ctx); /* what came meanwhile: below the next cut */
}

/* A running process's allocator read, as the root's is at the end: its
 * pending records in, its figures cut there, its own Stats kept beside. */
static void proc_read_final(struct session *s, struct tree_proc *p)
{
	uint64_t heaps = p->m->saw_alloc ? proc_heaps(p) : 0;
	struct remote_alloc ra;
	struct cut_target t = proc_cut(p);
	int err = heaps ? cut_read_figures(&t, FINAL_WAIT_MS, final_between, s, &ra) : -ENOENT;

	/* still moving: its figures as any tick's, the records its threads
	 * hold previewed (session_figures), rather than cut at a torn read */
	if (!err && !ra.consistent)
		remote_alloc_free(&ra);
	if (err || !ra.consistent)
		return;
	for (uint32_t k = 0; k < ra.nheaps; k++)
		model_cut(p->m, ra.heaps[k].id, ra.heaps[k].pos);
	p->m->cut = true;
	session_end_pending(s, p->m, p->pid, &ra);
	p->final = ra.stats;
	p->have_final = true;
	p->final_consistent = ra.consistent;
	remote_alloc_free(&ra);
}

void session_read_final_tree(struct session *s)
{
	for (size_t i = 0; i < s->tree.n; i++)
		if (!s->tree.procs[i].ended && !s->tree.procs[i].shared_vm &&
		    target_alive(s->tree.procs[i].pid))
			proc_read_final(s, &s->tree.procs[i]);
}

/* Figures built from s->pview point into it for the strings a model holds
 * by value (group names, CUPTI's refusal): the next process's view writes
 * over them (top then showed a running child's groups without names). The
 * same strings in the process's own model, which the view is a copy of. */
static void names_of_model(struct figures_process *slot, const struct model *m)
{
	for (unsigned g = 0; g < slot->ngroups; g++)
		if (slot->groups[g].name)
			slot->groups[g].name = m->groups[slot->groups[g].id].name;
	if (slot->target.cuda_why)
		slot->target.cuda_why = m->gpu.cupti_refused;
}

/* slot: a kept process's figures, borrowed (the tree owns them). */
static void fill_kept(struct figures_process *slot, const struct tree_proc *p)
{
	figures_process_free(slot);
	*slot = p->kept;
	slot->borrowed = true;
}

int session_figures(struct session *s, struct figures *f)
{
	size_t n = 1 + s->tree.n;
	int err;

	if (f->cap < n) {
		size_t cap = n < 16 ? 16 : n * 2;
		struct figures_process *np = realloc(f->procs, cap * sizeof(*np));
		if (!np)
			return -ENOMEM;
		memset(np + f->cap, 0, (cap - f->cap) * sizeof(*np));
		f->procs = np;
		f->cap = (unsigned)cap;
	}
	err = figures_build_process(&f->procs[0], &s->model, &s->src);
	for (size_t i = 0; !err && i < s->tree.n; i++) {
		struct tree_proc *p = &s->tree.procs[i];
		struct figures_process *slot = &f->procs[1 + i];
		if (p->ended) {
			fill_kept(slot, p);
			continue;
		}
		if (slot->borrowed)
			memset(slot, 0, sizeof(*slot));
		proc_sources(s, p, false);
		const struct model *m = p->m;
		if (!p->have_final && s->pview && proc_view(s, p, s->pview)) {
			m = s->pview;
			s->psrc.held_unread = false;
		}
		err = figures_build_process(slot, m, &s->psrc);
		if (slot->inherited)
			figures_life_sub(&slot->life, &p->base);
		if (m == s->pview)
			names_of_model(slot, p->m);
		/* s->psrc is every process's in turn: the strings are the tree's */
		slot->target.comm = p->comm;
		slot->target.cmdline = p->cmdline;
		slot->target.cgroup = p->cgroup;
		slot->target.container = p->container;
	}
	f->nprocs = (unsigned)n;
	f->folded = s->tree.folded;
	f->folded_life = s->tree.folded_life;
	f->folded_inexact = s->tree.folded_inexact;
	f->strays = s->tree.strays;
	if (!err)
		figures_sum_tree(f);
	f->tree.peak = s->tree.peak;
	return err;
}
