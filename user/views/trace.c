// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Chrome trace writer (trace.h). The document's skeleton is constant
 * text; each event is one JSON object written by its own struct json_writer
 * (so every string from the target goes through the tested escaping), one
 * event per line. The only state kept is the depth of open slices of the
 * threads that have any, in a small open-addressing table.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "json.h"
#include "trace_threads.h"
#include "trace.h"

struct trace {
	FILE *f;
	uint32_t pid;	  /* the root's: counters and the document's own figures */
	uint32_t cur_pid; /* the process of the message being drawn */
	uint64_t start_ns;
	int err;		    /* first write error, sticky */
	bool nonempty;		    /* an event is written: the next needs a comma */
	struct trace_threads tt;    /* threads with slices open */
	struct trace_threads names; /* by pid: the command line a track was named */
	uint64_t open;		    /* sum of depths */
	uint64_t last_lost_msgs, last_lost_words;
	uint64_t samples, last_sample_ns; /* trace_sample's calls, and the last one's time */
	struct json_writer w;		  /* the current event's */
};

static void put(struct trace *t, const char *s)
{
	size_t n = strlen(s);

	if (!t->err && fwrite(s, 1, n, t->f) != n)
		t->err = errno ? -errno : -EIO; /* ENOSPC, EDQUOT: say which */
}

/* ts is microseconds since the start; a message stamped before it (it sat
 * in the ring while the session started) counts as the start. */
static double ts_us(const struct trace *t, uint64_t ts_ns)
{
	return ts_ns > t->start_ns ? (double)(ts_ns - t->start_ns) / 1000.0 : 0.0;
}

/* The common members of an event; tid 0: a process-wide event (counters). */
static struct json_writer *ev_open(struct trace *t, const char *ph, const char *name,
				   const char *cat, uint32_t tid, uint64_t ts_ns)
{
	struct json_writer *w = &t->w;

	put(t, t->nonempty ? ",\n" : "\n");
	t->nonempty = true;
	json_init(w, t->f, false);
	json_begin_object(w);
	if (name)
		json_kv_str(w, "name", name);
	if (cat)
		json_kv_str(w, "cat", cat);
	json_kv_str(w, "ph", ph);
	if (ph[0] != 'M') {
		json_key(w, "ts");
		json_double(w, ts_us(t, ts_ns));
	}
	json_kv_u64(w, "pid", t->cur_pid);
	if (tid)
		json_kv_u64(w, "tid", tid);
	return w;
}

static void ev_close(struct trace *t)
{
	json_end_object(&t->w);
	if (!t->err && json_error(&t->w))
		t->err = json_error(&t->w);
	if (!t->err && t->w.depth)
		t->err = -EINVAL; /* an event left open: a bug here, not in the input */
}

/* A group's name for slices and counter tracks: its registered name, or its
 * number when it has none. Names come from the target: the writer escapes
 * them; a name is at most TALLY_GROUP_NAME_MAX bytes whatever the model holds. */
static void group_label(const char *name, uint32_t g, char *buf, size_t len)
{
	size_t n = name ? strnlen(name, TALLY_GROUP_NAME_MAX - 1) : 0;

	if (n) {
		snprintf(buf, len, "%.*s", (int)n, name);
		return;
	}
	snprintf(buf, len, g ? "group %u" : "root", g);
}

static void group_name(const struct model *m, uint32_t g, char *buf, size_t len)
{
	group_label(g < TALLY_MAX_GROUPS ? m->groups[g].name : NULL, g, buf, len);
}

static void slice_begin(struct trace *t, const struct model *m, uint32_t tid, uint32_t g,
			uint64_t ts_ns, const char *why)
{
	struct trace_thread *th = trace_thread_find(&t->tt, tid);
	char name[TALLY_GROUP_NAME_MAX + 16];

	if (!th)
		th = trace_thread_add(&t->tt, tid);
	if (!th) {
		/* no memory for the thread's depth: draw nothing rather than
		 * a slice that could never be closed */
		t->err = t->err ? t->err : -ENOMEM;
		return;
	}
	th->depth++;
	t->open++;
	group_name(m, g, name, sizeof(name));
	struct json_writer *w = ev_open(t, "B", name, "group", tid, ts_ns);
	json_key(w, "args");
	json_begin_object(w);
	json_kv_u64(w, "group", g);
	if (why)
		json_kv_str(w, "began", why);
	json_end_object(w);
	ev_close(t);
}

static void slice_end(struct trace *t, struct trace_thread *th, uint64_t ts_ns)
{
	uint32_t tid = th->tid;

	ev_open(t, "E", NULL, "group", tid, ts_ns);
	ev_close(t);
	t->open--;
	if (!--th->depth)
		trace_thread_del(&t->tt, th);
}

static void thread_name(struct trace *t, uint32_t tid, const char *comm)
{
	size_t n = strnlen(comm, TALLY_COMM_LEN);

	if (!n)
		return;
	struct json_writer *w = ev_open(t, "M", "thread_name", NULL, tid, 0);
	json_key(w, "args");
	json_begin_object(w);
	json_key(w, "name");
	json_string_n(w, comm, n);
	json_end_object(w);
	ev_close(t);
}

int trace_new(struct trace **out, FILE *f, uint32_t pid, uint64_t start_ns)
{
	struct trace *t = calloc(1, sizeof(*t));

	*out = NULL;
	if (!t)
		return -ENOMEM;
	t->f = f;
	t->pid = t->cur_pid = pid;
	t->start_ns = start_ns;
	put(t, "{\"traceEvents\": [");
	*out = t;
	return 0;
}

void trace_free(struct trace *t)
{
	if (!t)
		return;
	free(t->tt.threads);
	free(t->names.threads);
	free(t);
}

/* The track of the current process: its name (Perfetto shows "NAME PID"). */
static void process_name_n(struct trace *t, const char *name, size_t max)
{
	struct json_writer *w = ev_open(t, "M", "process_name", NULL, 0, 0);

	json_key(w, "args");
	json_begin_object(w);
	json_key(w, "name");
	json_string_n(w, name, strnlen(name, max));
	json_end_object(w);
	ev_close(t);
}

static void process_name(struct trace *t, const char *comm)
{
	process_name_n(t, comm, TALLY_COMM_LEN);
}

/* A process of the tree began (its parent's pid) or ended (how): an instant
 * event over its whole track. */
static void process_event(struct trace *t, const struct tally_msg_thread *th)
{
	const struct tally_msg *h = &th->hdr;
	bool fork = h->kind == TALLY_MSG_PROC_FORK;
	struct json_writer *w = ev_open(t, "i", fork ? "process started" : "process exited",
					"process", h->tid, h->ts_ns);
	int st = (int)th->parent_tid;

	json_kv_str(w, "s", "p");
	json_key(w, "args");
	json_begin_object(w);
	if (fork) {
		json_kv_u64(w, "parent", th->pid);
	} else if (WIFSIGNALED(st)) {
		const char *sig = sigabbrev_np(WTERMSIG(st));
		char name[16];
		snprintf(name, sizeof(name), "SIG%s", sig ? sig : "?");
		json_kv_str(w, "signal", name);
	} else {
		json_kv_i64(w, "exit_code", WEXITSTATUS(st));
	}
	json_end_object(w);
	ev_close(t);
}

void trace_begin(struct trace *t, const struct model *m, const char *comm)
{
	process_name(t, comm);
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct model_thread *mt = &m->threads[i];
		thread_name(t, mt->tid, mt->comm);
		if (mt->group && mt->group < TALLY_MAX_GROUPS)
			slice_begin(t, m, mt->tid, mt->group, t->start_ns, "before attach");
	}
}

static const char *gpu_api_name(uint64_t api)
{
	static const char *const names[] = {
		[TALLY_GPU_API_LAUNCH_KERNEL] = "cuLaunchKernel",
		[TALLY_GPU_API_LAUNCH_KERNEL_EX] = "cuLaunchKernelEx",
		[TALLY_GPU_API_LAUNCH_COOPERATIVE] = "cuLaunchCooperativeKernel",
		[TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI] = "cuLaunchCooperativeKernelMultiDevice",
		[TALLY_GPU_API_GRAPH_LAUNCH] = "cuGraphLaunch",
	};

	return api < sizeof(names) / sizeof(names[0]) && names[api] ? names[api] : NULL;
}

/* One GPU record as an instant event on its thread; a kernel's name record
 * only feeds the model. */
static void gpu_event(struct trace *t, const struct model *m, uint32_t tid, uint64_t ts_ns,
		      const struct tally_ev *e, const char *source)
{
	const char *name, *api = NULL, *kernel = NULL;
	bool sized = false;
	char group[TALLY_GROUP_NAME_MAX + 16];

	switch (e->type) {
	case TALLY_EV_GPU_LAUNCH:
		name = "kernel launch";
		api = gpu_api_name(e->bytes);
		kernel = e->n ? gpu_kernel_name(&m->gpu, e->n) : NULL;
		break;
	case TALLY_EV_GPU_GRAPH_LAUNCH:
		name = "graph launch";
		api = gpu_api_name(e->bytes);
		break;
	case TALLY_EV_GPU_LAUNCH_FAILED:
		name = "launch failed";
		api = gpu_api_name(e->bytes);
		break;
	case TALLY_EV_GPU_DEVICE_MEM:
		name = e->term ? "device free" : "device alloc";
		sized = true;
		break;
	case TALLY_EV_GPU_HOST_PINNED:
		name = e->term ? "host unpin" : "host pin";
		sized = true;
		break;
	case TALLY_EV_GPU_IMAGE:
		name = e->term ? "image unload" : "image load";
		sized = true;
		break;
	default:
		return;
	}
	struct json_writer *w = ev_open(t, "i", name, "gpu", tid, ts_ns);
	json_kv_str(w, "s", "t");
	json_key(w, "args");
	json_begin_object(w);
	group_name(m, e->group, group, sizeof(group));
	json_kv_str(w, "group", group);
	if (sized)
		json_kv_u64(w, "bytes", e->bytes);
	if (kernel)
		json_kv_str(w, "kernel", kernel);
	else if (e->type == TALLY_EV_GPU_LAUNCH)
		json_kv_u64(w, "kernel_id", e->n);
	if (api)
		json_kv_str(w, "entry_point", api);
	if (e->type == TALLY_EV_GPU_LAUNCH_FAILED)
		json_kv_u64(w, "result", e->n);
	json_kv_str(w, "source", source);
	json_end_object(w);
	ev_close(t);
}

/* A CUPTI record of one batch message: stamped with the hand-over time,
 * the only time the message carries. */
struct cupti_at {
	struct trace *t;
	const struct model *m;
	uint32_t tid;
	uint64_t ts_ns;
};

static void cupti_record(void *arg, const struct tally_ev *e, const __u64 *name)
{
	const struct cupti_at *c = arg;

	(void)name; /* the model interned it: gpu_event asks it by id */
	if (e->group < TALLY_MAX_GROUPS)
		gpu_event(c->t, c->m, c->tid, c->ts_ns, e, "cupti");
}

/* The CUPTI library's batches, read as the model reads them: the same
 * bytes (tally_msg_batch_valid) and the same records (tally_replay_each),
 * so that the trace draws no record the model refused. */
static void cupti_batch(struct trace *t, const struct model *m, const struct tally_msg_batch *mb,
			size_t len)
{
	uint64_t valid = tally_msg_batch_valid(mb, len);
	struct cupti_at c = { .t = t, .m = m, .tid = mb->hdr.tid, .ts_ns = mb->hdr.ts_ns };

	if (valid)
		tally_replay_each(&mb->batch, valid, TALLY_SRC_BIT(TALLY_SRC_CUPTI), cupti_record,
				  &c);
}

static void group_msg(struct trace *t, const struct model *m, const struct tally_msg_group *g)
{
	const struct tally_msg *h = &g->hdr;
	struct trace_thread *th;
	char name[TALLY_GROUP_NAME_MAX + 16];

	if (g->group >= TALLY_MAX_GROUPS)
		return;
	switch (h->kind) {
	case TALLY_MSG_GROUP_ENTER:
		slice_begin(t, m, h->tid, g->group, h->ts_ns, NULL);
		break;
	case TALLY_MSG_GROUP_EXIT:
		th = trace_thread_find(&t->tt, h->tid);
		if (th)
			slice_end(t, th, h->ts_ns);
		else if (g->group)
			slice_begin(t, m, h->tid, g->group, h->ts_ns, "returned to");
		break;
	case TALLY_MSG_REJECT: {
		/* rejections are rare and telling: each is drawn; yields come
		 * thousands a second and are drawn as a counter instead */
		struct json_writer *w = ev_open(t, "i", "reject", "sdk", h->tid, h->ts_ns);
		json_kv_str(w, "s", "t");
		json_key(w, "args");
		json_begin_object(w);
		group_name(m, g->group, name, sizeof(name));
		json_kv_str(w, "group", name);
		json_end_object(w);
		ev_close(t);
		break;
	}
	}
}

static void message(struct trace *t, const struct model *m, const void *data, size_t len);

void trace_message(struct trace *t, const struct model *m, const void *data, size_t len)
{
	const struct tally_msg *h = data;

	if (len < sizeof(*h))
		return;
	/* each process of the tree on a track of its own */
	t->cur_pid = h->pid ? h->pid : t->pid;
	message(t, m, data, len);
	t->cur_pid = t->pid;
}

static void message(struct trace *t, const struct model *m, const void *data, size_t len)
{
	const struct tally_msg *h = data;
	const struct tally_msg_thread *th = data;
	bool whole = len >= sizeof(*th);

	switch (h->kind) {
	case TALLY_MSG_PROC_FORK:
		if (whole) {
			process_name(t, th->comm);
			process_event(t, th);
			thread_name(t, h->tid, th->comm);
		}
		break;
	case TALLY_MSG_GROUP_ENTER:
	case TALLY_MSG_GROUP_EXIT:
	case TALLY_MSG_REJECT:
		if (len >= sizeof(struct tally_msg_group))
			group_msg(t, m, data);
		break;
	case TALLY_MSG_THREAD_NEW:
	case TALLY_MSG_THREAD_NAME:
		if (!whole)
			break;
		thread_name(t, h->tid, th->comm);
		if (h->kind == TALLY_MSG_THREAD_NAME && (h->flags & TALLY_THREAD_EXEC))
			process_name(t, th->comm); /* a new image: the track's new name */
		break;
	case TALLY_MSG_THREAD_EXIT: {
		struct trace_thread *tt = trace_thread_find(&t->tt, h->tid);
		while (tt && tt->depth > 1)
			slice_end(t, tt, h->ts_ns);
		if (tt)
			slice_end(t, tt, h->ts_ns); /* the last one frees the slot */
		if (whole && (h->flags & TALLY_THREAD_GROUP_DEAD))
			process_event(t, th);
		break;
	}
	case TALLY_MSG_GPU:
		/* the driver's view, unless CUPTI speaks for this process: the
		 * model counts one source, and so does the trace */
		if (len >= sizeof(struct tally_msg_gpu) && !m->gpu.seen[GPU_SRC_CUPTI] &&
		    ((const struct tally_msg_gpu *)data)->ev.group < TALLY_MAX_GROUPS)
			gpu_event(t, m, h->tid, h->ts_ns, &((const struct tally_msg_gpu *)data)->ev,
				  "driver");
		break;
	case TALLY_MSG_BATCH:
		cupti_batch(t, m, data, len); /* the CUPTI library's only */
		break;
	}
}

static void counter(struct trace *t, const char *name, const char *unit, int64_t v, uint64_t ts_ns)
{
	struct json_writer *w = ev_open(t, "C", name, "counter", 0, ts_ns);

	json_key(w, "args");
	json_begin_object(w);
	json_kv_i64(w, unit, v);
	json_end_object(w);
	ev_close(t);
}

/* The instance figures of one kind that have a counter (FIGURES_INSTANCE_X). */
static void instance_counters(struct trace *t, const struct figures_instance *in,
			      enum figures_kind kind, uint64_t now_ns)
{
	char name[64];

	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++) {
		const struct figures_instance_field *fi = &figures_instance_fields[i];
		if (fi->kind != kind || !fi->counter)
			continue;
		snprintf(name, sizeof(name), "%s", fi->counter);
		counter(t, name, fi->unit, (int64_t)figures_instance_get(in, i), now_ns);
	}
}

/* The ring dropped something since the last sample: somewhere in that
 * interval, marked at its end. */
static void lost_marker(struct trace *t, const struct figures_events *e, uint64_t now_ns)
{
	struct json_writer *w;

	if (e->lost <= t->last_lost_msgs && e->lost_record_words <= t->last_lost_words)
		return;
	w = ev_open(t, "i", "events lost", "tally", 0, now_ns);
	json_kv_str(w, "s", "g");
	json_key(w, "args");
	json_begin_object(w);
	json_kv_u64(w, "messages", e->lost - t->last_lost_msgs);
	json_kv_u64(w, "record_words", e->lost_record_words - t->last_lost_words);
	json_kv_u64(w, "messages_total", e->lost);
	json_end_object(w);
	ev_close(t);
	t->last_lost_msgs = e->lost;
	t->last_lost_words = e->lost_record_words;
}

/* One process's counters, on its own track. */
static void proc_counters(struct trace *t, const struct figures_process *p, uint64_t now_ns)
{
	char name[TALLY_GROUP_NAME_MAX + 64], g_name[TALLY_GROUP_NAME_MAX + 16];

	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++) {
		if (!(p->stats.known & (1u << i)))
			continue;
		snprintf(name, sizeof(name), "stats.%s", figures_stat_names[i]);
		counter(t, name, figures_stat_units[i], p->stats.v[i], now_ns);
	}
	for (unsigned i = 0; i < p->ngroups; i++) {
		const struct figures_group *fg = &p->groups[i];
		group_label(fg->name, fg->id, g_name, sizeof(g_name));
		snprintf(name, sizeof(name), "group %s live_bytes", g_name);
		counter(t, name, "bytes", fg->live_bytes, now_ns);
		snprintf(name, sizeof(name), "group %s cpu_ns", g_name);
		counter(t, name, "ns", (int64_t)fg->cpu_ns, now_ns);
	}
	if (p->instance.yield_count || p->instance.back_pressure_rejections)
		instance_counters(t, &p->instance, FIGURES_SDK, now_ns);
	if (p->gpu_spoke)
		instance_counters(t, &p->instance, FIGURES_GPU, now_ns);
}

/* A process of the tree that ran before tally came (-p PID -f adopts it: no
 * fork message names its track): its name and its threads', once. */
static void adopted_names(struct trace *t, const struct figures_process *p)
{
	process_name(t, p->target.comm ? p->target.comm : "");
	for (size_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].comm)
			thread_name(t, p->threads[i].tid, p->threads[i].comm);
}

/* Every process of the tree on its own track, as the root: the running
 * ones, and an ended one once more at its end with its final figures (only
 * the root had counters: a PostgreSQL's backends had their start and exit
 * markers alone, its children from before the attach nothing). */
void trace_sample(struct trace *t, const struct figures *f, uint64_t now_ns)
{
	for (unsigned i = 0; i < f->nprocs; i++) {
		const struct figures_process *p = &f->procs[i];
		uint64_t ts = now_ns;
		if (i && p->ended_ns) {
			if (p->ended_ns <= t->last_sample_ns)
				continue; /* its last counters are drawn */
			ts = p->ended_ns < now_ns ? p->ended_ns : now_ns;
		}
		t->cur_pid = i ? (uint32_t)p->target.pid : t->pid;
		if (i && !t->samples && !p->born_ns)
			adopted_names(t, p);
		/* as ps shows it, again when it changes ("postgres: bench ... idle") */
		if (p->target.cmdline && p->target.cmdline[0] &&
		    trace_name_changed(&t->names, t->cur_pid, p->target.cmdline))
			process_name_n(t, p->target.cmdline, SOURCES_CMDLINE_MAX);
		proc_counters(t, p, ts);
	}
	t->cur_pid = t->pid;
	if (f->nprocs)
		lost_marker(t, &f->procs[0].events, now_ns);
	t->samples++;
	t->last_sample_ns = now_ns;
}

uint64_t trace_open_slices(const struct trace *t)
{
	return t->open;
}

int trace_end(struct trace *t, const struct model *m, uint64_t now_ns, const struct figures *f)
{
	const struct figures_process *p = &f->procs[0];
	struct json_writer *w = &t->w;

	for (size_t i = 0; i < m->nthreads; i++)
		thread_name(t, m->threads[i].tid, m->threads[i].comm);
	for (size_t i = 0; i < t->tt.cap; i++) {
		/* deleting shifts later slots back into i: look at i again */
		while (t->tt.threads && t->tt.threads[i].tid)
			slice_end(t, &t->tt.threads[i], now_ns);
	}
	put(t, "\n],\n\"displayTimeUnit\": \"ns\",\n\"otherData\": ");
	json_init(w, t->f, false);
	json_begin_object(w);
	json_kv_str(w, "producer", "tally record");
	json_kv_u64(w, "pid", t->pid);
	json_kv_bool(w, "exact", p->exact);
	json_kv_u64(w, "events_received", p->events.received);
	json_kv_u64(w, "events_lost", p->events.lost);
	json_kv_str(w, "allocator", figures_target_allocator(&p->target));
	json_kv_str(w, "cuda", figures_cuda_name(p->target.cuda));
	json_key(w, "stats_inprocess");
	if (p->have_inprocess) {
		json_begin_object(w);
		for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
			json_kv_u64(w, figures_stat_names[i], p->inprocess[i]);
		json_end_object(w);
	} else {
		json_null(w);
	}
	json_end_object(w);
	if (!t->err && json_error(w))
		t->err = json_error(w);
	put(t, "}\n");
	errno = 0;
	if (!t->err && (fflush(t->f) || ferror(t->f)))
		t->err = errno ? -errno : -EIO;
	return t->err;
}
