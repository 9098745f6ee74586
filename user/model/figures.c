// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The figures of one tick (figures.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "figures.h"

/* A constant in a text: the text follows the constant. */
#define STR(x) STR_(x)
#define STR_(x) #x

/* Two reasons that name a limit, said with the limit's constant. */
#define WHY_DEFERRED                                                                               \
	"records that came while the state was read at attach were more than tally keeps "         \
	"aside (" STR(SOURCES_DEFER_MAX_MB) " MiB): some dropped"
#define WHY_REGISTRY_LIMIT STR(TALLY_MAX_THREADS)
#define WHY_REGISTRY                                                                               \
	"more threads in groups than the SDK's registry holds (" WHY_REGISTRY_LIMIT                \
	") at attach: "                                                                            \
	"some threads' groups unknown, their CPU charged to root"

_Static_assert(TALLY_STATS_COUNT == TALLY_STATS_FIELDS, "the probe's array is the struct");

const char *const figures_stat_names[TALLY_STATS_COUNT] = {
#define STAT_NAME(field, metric, unit, help) #field,
	TALLY_STATS_X(STAT_NAME)
#undef STAT_NAME
};

const char *const figures_why_codes[FIGURES_WHY_COUNT] = {
#define WHY_CODE(e, code) code,
	FIGURES_WHY_X(WHY_CODE)
#undef WHY_CODE
};

const char *const figures_stat_units[TALLY_STATS_COUNT] = {
#define STAT_UNIT(field, metric, unit, help) unit,
	TALLY_STATS_X(STAT_UNIT)
#undef STAT_UNIT
};

const struct figures_instance_field figures_instance_fields[FIGURES_INSTANCE_COUNT] = {
#define INSTANCE_FIELD(field, type, kind, unit, metric, ptype, counter, help)                      \
	{ #field,                                                                                  \
	  unit,                                                                                    \
	  metric,                                                                                  \
	  ptype,                                                                                   \
	  counter,                                                                                 \
	  help,                                                                                    \
	  FIGURES_##kind,                                                                          \
	  _Generic((type)0, int64_t                                                                \
		   : true, default                                                                 \
		   : false),                                                                       \
	  offsetof(struct figures_instance, field) },
	FIGURES_INSTANCE_X(INSTANCE_FIELD)
#undef INSTANCE_FIELD
};

uint64_t figures_instance_get(const struct figures_instance *in, unsigned i)
{
	uint64_t v;

	/* every field is 8 bytes: uint64_t or int64_t */
	memcpy(&v, (const char *)in + figures_instance_fields[i].offset, sizeof(v));
	return v;
}

const char *figures_allocator_name(enum figures_allocator a)
{
	static const char *const names[] = { "tally", "glibc", "none" };

	return a <= FIGURES_ALLOC_NONE ? names[a] : "none";
}

const char *figures_target_allocator(const struct figures_target *t)
{
	return t->foreign_alloc ? t->foreign_alloc : figures_allocator_name(t->allocator);
}

const char *figures_cuda_name(enum figures_cuda c)
{
	static const char *const names[] = { "none", "driver", "cupti" };

	return c <= FIGURES_CUDA_CUPTI ? names[c] : "none";
}

/* Groups [lo, hi): GPU figures from CUPTI when it spoke, else the driver. */
static void instance_of(struct figures_instance *out, const struct model *m,
			const struct figures_sources *src, uint32_t lo, uint32_t hi)
{
	enum gpu_source gs = gpu_source_of(&m->gpu);

	memset(out, 0, sizeof(*out));
	for (uint32_t i = lo; i < hi; i++) {
		const struct gpu_group *gg = &m->gpu.groups[gs][i];
		out->kernels_launched += gg->kernels_launched;
		out->graph_launches += gg->graph_launches;
		out->failed_launches += gg->failed_launches;
		out->device_bytes_allocated += gg->device_bytes;
		out->host_pinned_bytes += gg->host_pinned;
		out->bytes_pinned += gg->image_bytes;
		out->yield_count += m->groups[i].yields;
		out->back_pressure_rejections += m->groups[i].rejects + gg->failed_launches;
		out->os_yields += src->cuda.os_yields[i];
	}
}

static void build_target(struct figures_target *t, const struct model *m,
			 const struct figures_sources *src)
{
	int st = src->exit_status;

	t->pid = src->pid;
	t->ns_pid = src->ns_pid ? src->ns_pid : src->pid;
	t->ppid = src->ppid;
	t->comm = src->comm;
	t->cmdline = src->cmdline;
	t->cgroup = src->cgroup[0] ? src->cgroup : NULL;
	t->container = src->container[0] ? src->container : NULL;
	t->allocator = src->allocator;
	t->cuda = m->gpu.seen[GPU_SRC_CUPTI]				? FIGURES_CUDA_CUPTI :
		  m->gpu.seen[GPU_SRC_DRIVER] || src->cuda.entry_points ? FIGURES_CUDA_DRIVER :
									  FIGURES_CUDA_NONE;
	if (m->gpu.cupti_refused[0] && t->cuda != FIGURES_CUDA_CUPTI)
		t->cuda_why = m->gpu.cupti_refused;
	t->late = src->late;
	t->injected = src->injected;
	t->foreign_alloc = src->allocator == FIGURES_ALLOC_NONE ? src->foreign_alloc : NULL;
	/* a late attach to a busy allocator may find heaps moving while it
	 * reads them: then the figures are not exact, and this says why */
	t->read_known = src->late && src->allocator == FIGURES_ALLOC_TALLY;
	t->read_consistent = src->late_consistent;
	t->gone = src->gone;
	t->ended = src->have_exit;
	t->exit_code = src->have_exit && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
	t->signal = src->have_exit && WIFSIGNALED(st) ? WTERMSIG(st) : 0;
}

static void build_events(struct figures_events *e, const struct model *m,
			 const struct figures_sources *src)
{
	e->received = m->received;
	e->lost = src->lost_msgs;
	e->lost_record_words = src->lost_words;
	e->lost_outside_read = src->lost_outside_read;
	e->malformed = m->malformed + src->malformed_bpf;
	e->records = m->records;
	e->in_place = src->in_place;
}

/* libtally_alloc: the replayed identity. glibc mode: only what glibc can
 * say (live, rounding, large mappings); the other terms have no glibc
 * meaning. */
static void build_stats(struct figures_process *p, const struct model *m,
			const struct figures_sources *src, const struct tally_stats *st)
{
	struct figures_stats *fs = &p->stats;
	uint64_t v[TALLY_STATS_COUNT];

	if (src->allocator == FIGURES_ALLOC_TALLY) {
		tally_stats_to_array(st, v);
		for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
			fs->v[i] = (int64_t)v[i];
		fs->known = (1u << TALLY_STATS_COUNT) - 1;
		fs->identity = true;
		fs->accounted = (int64_t)tally_stats_accounted(st);
		fs->balanced = tally_stats_balanced(st);
		fs->predicted_resident = (int64_t)tally_stats_predicted_resident(st);
		fs->have_resident = src->have_resident;
		fs->resident = src->resident;
		/* the allocator's own: read at the end from a running target, or
		 * its exit hand-over */
		if (src->have_final_inprocess) {
			tally_stats_to_array(&src->final_inprocess, p->inprocess);
			p->have_inprocess = true;
		} else if (m->have_inprocess) {
			memcpy(p->inprocess, m->inprocess, sizeof(p->inprocess));
			p->have_inprocess = true;
		}
	} else if (src->allocator == FIGURES_ALLOC_GLIBC && src->have_glibc) {
		fs->v[TALLY_STAT_live] = (int64_t)src->glibc.live;
		fs->v[TALLY_STAT_rounding] = (int64_t)src->glibc.rounding;
		fs->v[TALLY_STAT_large_count] = (int64_t)src->glibc.large_count;
		fs->known = 1u << TALLY_STAT_live | 1u << TALLY_STAT_rounding;
		/* the interposer does not tell mmapped chunks apart */
		if (!src->injected)
			fs->known |= 1u << TALLY_STAT_large_count;
	}
}

/* A group's lifetime counters from whichever source feeds the figures. */
static void build_group(struct figures_group *fg, uint32_t g, const struct model *m,
			const struct figures_sources *src)
{
	const struct model_group *mg = &m->groups[g];

	fg->id = g;
	fg->name = mg->name[0] ? mg->name : NULL;
	if (src->allocator == FIGURES_ALLOC_GLIBC && src->have_glibc) {
		fg->alloc_bytes = src->glibc.alloc_bytes[g];
		fg->alloc_objs = src->glibc.alloc_objs[g];
		fg->dealloc_bytes = src->glibc.dealloc_bytes[g];
		fg->dealloc_objs = src->glibc.dealloc_objs[g];
	} else {
		fg->alloc_bytes = (uint64_t)m->replay.groups[g].alloc_bytes;
		fg->alloc_objs = (uint64_t)m->replay.groups[g].alloc_objs;
		fg->dealloc_bytes = (uint64_t)m->replay.groups[g].dealloc_bytes;
		fg->dealloc_objs = (uint64_t)m->replay.groups[g].dealloc_objs;
	}
	fg->live_bytes = (int64_t)(fg->alloc_bytes - fg->dealloc_bytes);
	fg->cpu_ns = src->cpu_ns[g];
	instance_of(&fg->instance, m, src, g, g + 1);
	static const struct figures_instance none;
	fg->shown = mg->known || fg->cpu_ns || fg->alloc_objs || fg->dealloc_objs ||
		    memcmp(&fg->instance, &none, sizeof(none));
}

static int cmp_tid(const void *a, const void *b)
{
	const struct figures_thread *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int build_threads(struct figures_process *p, const struct model *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nthreads; i++)
		n += m->threads[i].alive;
	free(p->threads);
	p->threads = n ? calloc(n, sizeof(*p->threads)) : NULL;
	if (n && !p->threads)
		return -ENOMEM;
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct model_thread *t = &m->threads[i];
		uint32_t g = model_thread_group(t);

		if (!t->alive)
			continue;
		p->threads[p->nthreads].tid = t->tid;
		p->threads[p->nthreads].group = g < TALLY_MAX_GROUPS ? g : 0;
		p->threads[p->nthreads].comm = t->comm;
		p->nthreads++;
	}
	if (p->nthreads)
		qsort(p->threads, p->nthreads, sizeof(*p->threads), cmp_tid);
	return 0;
}

/* One reason the figures are not exact, by its code and in words. */
static void add_why(struct figures_process *p, enum figures_why code, const char *text)
{
	if (p->nwhy >= FIGURES_MAX_WHY)
		return;
	p->why_code[p->nwhy] = (uint8_t)code;
	p->why[p->nwhy++] = text;
}

/* Why the figures of a libtally_alloc target are not exact. */
static void why_alloc(struct figures_process *p, const struct model *m,
		      const struct figures_sources *src, const struct tally_stats *st)
{
	if (src->late && !src->late_consistent)
		add_why(p, FIGURES_WHY_ATTACH_MOVED,
			"the allocator's state moved while it was read at attach");
	/* a target still running at the end: its own figures were read while
	 * its threads ran; a heap caught in the middle of an operation makes
	 * the two disagree, and then neither is exact */
	if (src->have_final_inprocess && !src->final_consistent)
		add_why(p, FIGURES_WHY_END_MOVED,
			"the allocator's state moved while it was read at the end");
	else if (src->have_final_inprocess && memcmp(st, &src->final_inprocess, sizeof(*st)))
		add_why(p, FIGURES_WHY_END_DIFFERS,
			"the target was running: tally's figures and the allocator's "
			"own, read as its threads ran, differ");
	/* ended without the allocator's exit hand-over (killed, or _exit): what
	 * its threads held and had not handed over may be missing; unless the
	 * OOM killer chose it and every heap was read then (tally_oom.bpf.h):
	 * after its SIGKILL none of its code runs again */
	if (src->gone && !m->have_inprocess && !model_oom_whole(&m->oom))
		add_why(p, FIGURES_WHY_NO_HANDOVER, "ended without the allocator's exit hand-over");
	if (m->have_inprocess && m->inprocess_threads_held)
		add_why(p, FIGURES_WHY_EXIT_HELD,
			"exit() while other threads held records they never handed over");
	if (m->fork_threads)
		add_why(p, FIGURES_WHY_FORK_THREADS,
			"forked while other threads of its parent ran: their heaps were "
			"copied as they were, maybe in the middle of an operation");
}

/* A reason the GPU figures are not exact, said for the process too unless
 * it has said it already. */
static void gpu_inexact(struct figures_process *p, enum figures_why code, const char *why,
			bool for_process)
{
	p->instance_why[p->ninstance_why++] = why;
	if (for_process)
		add_why(p, code, why);
}

/* Why the GPU figures are not exact (none: they are). */
static void build_gpu_why(struct figures_process *p, const struct model *m,
			  const struct figures_sources *src)
{
	const struct cuda_figures *c = &src->cuda;

	p->ninstance_why = 0;
	if (c->late || (src->not_read && c->entry_points))
		gpu_inexact(p, FIGURES_WHY_GPU_BEFORE,
			    "the CUDA driver was loaded before tally attached: GPU work before "
			    "that is not counted",
			    true);
	if (c->hold_timed_out)
		gpu_inexact(p, FIGURES_WHY_GPU_LATE,
			    "the CUDA driver's probes came after it was loaded: its first GPU "
			    "calls may be missing",
			    true);
	if (c->attach_failed && !m->gpu.seen[GPU_SRC_CUPTI])
		gpu_inexact(p, FIGURES_WHY_GPU_FAILED,
			    "the CUDA driver's probes could not be attached", true);
	/* lost messages: the process said so (build_why) */
	if (c->untracked || src->lost_msgs || src->lost_words)
		gpu_inexact(p, FIGURES_WHY_GPU_LOST,
			    "GPU records lost: the ring or the driver probes' map was full",
			    c->untracked);
	p->instance_exact = p->ninstance_why == 0;
	p->have_device_memory_used = c->have_device_memory_used;
	p->device_memory_used = c->device_memory_used;
}

/* Why glibc's figures (glibc mode, --inject) are not exact. */
static void why_glibc(struct figures_process *p, const struct figures_sources *src)
{
	/* -p --inject -f: the injection reaches the root alone */
	if (src->uninjected)
		add_why(p, FIGURES_WHY_NOT_INJECTED,
			"--inject: not injected (only the root is): its allocations are not "
			"traced");
	if (src->allocator == FIGURES_ALLOC_GLIBC && src->injected) {
		/* since the injection, every call through the GOT is seen */
		if (!(src->have_glibc && glibc_figures_exact(&src->glibc)))
			add_why(p, FIGURES_WHY_INJECT_TABLE,
				"--inject: blocks the interposer's table could not hold");
		if (src->have_glibc && src->glibc.unseen_frees)
			add_why(p, FIGURES_WHY_INJECT_UNSEEN,
				"--inject: frees it did not see (through a pointer to glibc's "
				"free taken before the injection): those blocks counted live "
				"until glibc gave their address again");
		if (src->injected_execed)
			add_why(p, FIGURES_WHY_INJECT_EXEC,
				"--inject: it exec'd another program since the injection, "
				"whose calls are not seen");
		if (src->inject_uncut)
			add_why(p, FIGURES_WHY_INJECT_UNCUT,
				"--inject: the interposer did not hand over its threads' last "
				"records at the end");
		/* a tick while threads run: a free handed over before its
		 * allocation (the end has a cut of its own) */
		if ((int64_t)src->glibc.live < 0 || (int64_t)src->glibc.rounding < 0)
			add_why(p, FIGURES_WHY_INJECT_TORN,
				"--inject: records of other threads still on their way at this "
				"moment (live bytes below zero)");
	} else if (src->allocator == FIGURES_ALLOC_GLIBC &&
		   !(src->have_glibc && glibc_figures_exact(&src->glibc) && !src->late)) {
		add_why(p, FIGURES_WHY_GLIBC_UNSEEN, "glibc mode: not every call was seen");
	}
}

/* a malloc tally cannot trace (target_alloc.c) */
#define WHY_FOREIGN                                                                                \
	"its malloc is not tally's or glibc's (target.allocator names it): its heap is not "       \
	"traced"

/* Why the figures are not exact (none: they are), in the snapshot's order. */
static void build_why(struct figures_process *p, const struct model *m,
		      const struct figures_sources *src, const struct tally_stats *st)
{
	bool tally = src->allocator == FIGURES_ALLOC_TALLY;

	p->nwhy = 0;
	if (src->lost_msgs || src->lost_words)
		add_why(p, FIGURES_WHY_LOST, "events lost: the ring was full");
	if (m->malformed || src->malformed_bpf)
		add_why(p, FIGURES_WHY_MALFORMED, "malformed records refused");
	if (src->deferred_dropped)
		add_why(p, FIGURES_WHY_DEFERRED, WHY_DEFERRED);
	if (tally)
		why_alloc(p, m, src, st);
	if (m->collided_id)
		add_why(p, FIGURES_WHY_GROUP_COLLIDED,
			"an SDK group got the id of a --group rule's group: their figures merged");
	if (src->cut_torn && tally)
		add_why(p, FIGURES_WHY_CUT_TORN,
			"a thread's records from before this moment were still on their way");
	/* a view's tick while threads run: one thread's records (a foreign
	 * free) may be in before another's (the allocation) */
	if (tally && !tally_stats_balanced(st))
		add_why(p, FIGURES_WHY_UNBALANCED,
			"the identity does not balance at this moment: records of "
			"other threads still on their way");
	if (src->procs_unfollowed)
		add_why(p, FIGURES_WHY_UNFOLLOWED,
			"processes of the tree not followed: tally's map of processes "
			"was full");
	if (src->cpu_lost)
		add_why(p, FIGURES_WHY_CPU_LOST,
			"CPU not charged: tally's map of CPU per process was full");
	if (src->strays)
		add_why(p, FIGURES_WHY_STRAYS,
			"messages of processes tally did not know were dropped");
	if (src->not_read)
		add_why(p, FIGURES_WHY_NOT_READ,
			"found running at attach: what it did before was not read");
	if (src->held_unread)
		add_why(p, FIGURES_WHY_HELD_UNREAD,
			"still running: records its threads held were not read");
	if (src->late && m->registry_threads_dropped)
		add_why(p, FIGURES_WHY_REGISTRY, WHY_REGISTRY);
	if (src->allocator == FIGURES_ALLOC_NONE && src->foreign_alloc)
		add_why(p, FIGURES_WHY_ALLOC_UNTRACED, WHY_FOREIGN);
	why_glibc(p, src);
	/* nothing above explains it, yet the allocator's own figures at its
	 * exit say otherwise: a figure is never exact against its own oracle */
	if (tally && !p->nwhy && m->have_inprocess && !src->have_final_inprocess) {
		uint64_t v[TALLY_STATS_FIELDS];
		tally_stats_to_array(st, v);
		if (memcmp(v, m->inprocess, sizeof(v)))
			add_why(p, FIGURES_WHY_EXIT_DIFFERS,
				"tally's figures and the allocator's own at its exit differ");
	}
	build_gpu_why(p, m, src);
	p->exact = p->nwhy == 0;
}

/* What it did, from the figures just built (a forked child's inheritance
 * is session_figures' to take off: it knows the parent's at the fork). */
static void build_life(struct figures_process *p)
{
	struct figures_lifetime *l = &p->life;

	for (unsigned g = 0; g < p->ngroups; g++) {
		const struct figures_group *fg = &p->groups[g];
		l->cpu_ns += fg->cpu_ns;
		l->alloc_bytes += fg->alloc_bytes;
		l->alloc_objs += fg->alloc_objs;
		l->dealloc_bytes += fg->dealloc_bytes;
		l->dealloc_objs += fg->dealloc_objs;
	}
	l->kernels_launched = p->instance.kernels_launched;
	l->graph_launches = p->instance.graph_launches;
	l->received = p->events.received;
	l->records = p->events.records;
	l->in_place = p->events.in_place;
}

int figures_build_process(struct figures_process *p, const struct model *m,
			  const struct figures_sources *src)
{
	struct figures_thread *threads = p->threads;
	struct figures_group *groups = p->groups;
	struct tally_stats st; /* the replayed identity, read once */

	memset(p, 0, sizeof(*p));
	p->threads = threads;
	p->groups = groups ? groups : calloc(TALLY_MAX_GROUPS, sizeof(*groups));
	if (!p->groups)
		return -ENOMEM;
	model_stats(m, &st);
	build_target(&p->target, m, src);
	build_why(p, m, src, &st);
	build_events(&p->events, m, src);
	build_stats(p, m, src, &st);
	instance_of(&p->instance, m, src, 0, TALLY_MAX_GROUPS);
	p->gpu_spoke = m->gpu.seen[GPU_SRC_CUPTI] || m->gpu.seen[GPU_SRC_DRIVER];
	p->gpu_attached = p->gpu_spoke || src->cupti || src->cuda.entry_points;
	p->oom = m->oom;
	p->start_ns = src->start_ns;
	p->now_ns = src->now_ns;
	p->born_ns = src->born_ns;
	p->ended_ns = src->ended_ns;
	p->inherited = m->inherited;
	p->injected = src->injected;
	p->have_glibc_info = m->injected.have_info;
	memcpy(p->glibc_info, m->injected.info, sizeof(p->glibc_info));
	p->glibc_table_bytes = m->injected.table_bytes;
	p->unknown_frees = m->injected.f.unknown_frees;
	p->unknown_free_bytes = m->injected.unknown_free_bytes;
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		build_group(&p->groups[p->ngroups], g, m, src);
		p->ngroups += p->groups[p->ngroups].shown;
	}
	figures_build_peak(p, m, src);
	build_life(p);
	return build_threads(p, m);
}

const struct figures_group *figures_group_of(const struct figures_process *p, uint32_t id)
{
	for (unsigned i = 0; i < p->ngroups; i++)
		if (p->groups[i].id == id)
			return &p->groups[i];
	return NULL;
}

/* s copied to *at (NULL stays NULL). */
static const char *keep_str(char **at, const char *s)
{
	if (!s)
		return NULL;
	char *d = *at;
	size_t n = strlen(s) + 1;
	memcpy(d, s, n);
	*at += n;
	return d;
}

int figures_keep(struct figures_process *out, const struct figures_process *p)
{
	size_t strs = 0;
	const struct figures_target *t = &p->target;

	for (unsigned i = 0; i < p->ngroups; i++)
		strs += p->groups[i].name ? strlen(p->groups[i].name) + 1 : 0;
	strs += (t->comm ? strlen(t->comm) : 0) + (t->cgroup ? strlen(t->cgroup) : 0) +
		(t->container ? strlen(t->container) : 0) +
		(t->cuda_why ? strlen(t->cuda_why) : 0) + 4 +
		(t->cmdline ? strlen(t->cmdline) + 1 : 0);
	/* one block: the groups, then their names and the target's strings */
	struct figures_group *g = malloc(p->ngroups * sizeof(*g) + strs);
	if (!g)
		return -ENOMEM;
	char *at = (char *)(g + p->ngroups);
	*out = *p;
	out->groups = g;
	out->threads = NULL;
	out->nthreads = 0;
	for (unsigned i = 0; i < p->ngroups; i++) {
		g[i] = p->groups[i];
		g[i].name = keep_str(&at, p->groups[i].name);
	}
	out->target.comm = keep_str(&at, t->comm);
	out->target.cmdline = keep_str(&at, t->cmdline);
	out->target.cgroup = keep_str(&at, t->cgroup);
	out->target.container = keep_str(&at, t->container);
	out->target.cuda_why = keep_str(&at, t->cuda_why);
	return 0;
}

void figures_process_free(struct figures_process *p)
{
	if (p->borrowed) {
		memset(p, 0, sizeof(*p));
		return;
	}
	free(p->threads);
	free(p->groups);
	p->threads = NULL;
	p->groups = NULL;
	p->nthreads = p->ngroups = 0;
}

int figures_build(struct figures *f, const struct model *m, const struct figures_sources *src)
{
	int err;

	if (!f->procs) {
		f->procs = calloc(1, sizeof(*f->procs));
		if (!f->procs)
			return -ENOMEM;
		f->cap = 1;
	}
	f->nprocs = 1;
	err = figures_build_process(&f->procs[0], m, src);
	if (err)
		figures_free(f);
	else
		figures_sum_tree(f);
	return err;
}

void figures_free(struct figures *f)
{
	for (unsigned i = 0; f->procs && i < f->cap; i++)
		figures_process_free(&f->procs[i]);
	free(f->procs);
	f->procs = NULL;
	f->nprocs = f->cap = 0;
}
