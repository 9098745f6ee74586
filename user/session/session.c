// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A tracing session (session.h) once started (session_start.c): the ring
 * taken into the model, the figures kept beside it read for each tick, and
 * the end. The order of the start matters (docs/DESIGN.md §8): the scheduler
 * programs and every probe are attached before a started command runs its
 * first instruction, and before a running target's state is read, so that
 * nothing happens unseen between the read and the first event.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "inject_cut.h"
#include "session.h"
#include "../os/symbols.h"
#include "internal.h"
#include "../util/timing.h"

volatile sig_atomic_t session_exiting;

static void on_signal(int sig)
{
	(void)sig;
	session_exiting = 1;
}

void session_install_signals(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGHUP, &sa, NULL);
	target_ignore_sigpipe();
}

int session_fail(int status, const char *fmt, ...)
{
	va_list ap;

	fputs("tally: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return status;
}

void session_apply(struct session *s, struct model *m, pid_t pid, const void *data, size_t len)
{
	struct tree_peak_mark k;

	tree_peak_before(m, &k);
	model_apply(m, data, len);
	tree_peak_after(&s->tree, m, pid, &k, &s->model, s->pid);
}

void session_apply_pending(struct session *s, struct model *m, pid_t pid,
			   const struct remote_heap *h)
{
	struct tree_peak_mark k;
	uint64_t now = clock_now_ns();

	/* made before this read: its moment, for the peak and the samples */
	if (now > m->now_ns)
		m->now_ns = now;
	tree_peak_before(m, &k);
	model_apply_pending(m, h->id, h->seq_first, h->tid, h->pending, h->npending);
	tree_peak_after(&s->tree, m, pid, &k, &s->model, s->pid);
}

/* Messages go to the model; a thread that a --group rule now names has its
 * CPU charged to that group by the BPF side too. */
void session_deliver(struct session *s, const void *data, size_t len)
{
	const struct tally_msg *h = data;

	if (len >= sizeof(*h) && h->pid && (pid_t)h->pid != s->pid) {
		/* one kept for later is observed when it is delivered */
		if (!session_deliver_tree(s, data, len) && s->observer)
			s->observer(s->observer_ctx, data, len);
		return;
	}
	session_apply(s, &s->model, s->pid, data, len);
	session_oom_news(&s->model, data, len);
	session_gpu_news(s, s->pid, &s->model, s->gpu_said);
	if (s->model.held) { /* past a view's cut: the rest comes at its end */
		s->model.held = false;
		session_hold_keep(s, data, len);
	}
	if (len >= sizeof(struct tally_msg_thread) && h->kind == TALLY_MSG_THREAD_NAME &&
	    (h->flags & TALLY_THREAD_EXEC)) {
		/* a new image: its libraries are elsewhere, found again when needed */
		const struct tally_msg_thread *th = data;
		s->heaps_addr = s->cut_addr = s->registry_addr = 0;
		session_oom_exec(&s->oom_arm);
		s->execed = true;
		memcpy(s->comm, th->comm, sizeof(s->comm));
		s->comm[sizeof(s->comm) - 1] = 0;
		target_cmdline_keep(s->pid, s->cmdline, sizeof(s->cmdline));
	}
	if (s->observer)
		s->observer(s->observer_ctx, data, len);
	if (len >= sizeof(*h) && s->model.nrules &&
	    (h->kind == TALLY_MSG_THREAD_NEW || h->kind == TALLY_MSG_THREAD_NAME)) {
		struct model_thread *t = model_thread(&s->model, h->tid, false);
		if (t && t->rule_group >= 0 && t->group == 0)
			loader_set_thread_group(s->loader, s->pid, t->tid, (uint32_t)t->rule_group);
	}
}

void session_cuda_running(struct session *s, pid_t pid)
{
	int err = s->cuda ? cuda_trace_attach_mapped(s->cuda, pid, true) : -ENOENT;

	if (!err)
		fprintf(stderr,
			"tally: %d loaded the CUDA driver before tally attached: its GPU figures "
			"count from now (instance \"exact\": false)\n",
			pid);
	else if (err != -ENOENT)
		fprintf(stderr, "tally: cannot probe the CUDA driver in %d: %s\n", pid,
			strerror(-err));
}

void session_nvml(struct session *s, pid_t pid, struct cuda_figures *f)
{
	if (!f->entry_points && !f->attach_failed)
		return; /* no driver in it */
	if (!s->nvml_tried) {
		s->nvml_tried = true;
		int err = nvml_open(&s->nvml);
		if (err && err != -ENOENT && s->verbose)
			fprintf(stderr, "tally: NVML does not start (%s): no device_memory_used\n",
				strerror(-err));
	}
	if (s->nvml && !nvml_process_memory(s->nvml, pid, &f->device_memory_used))
		f->have_device_memory_used = true;
}

void session_gpu_news(struct session *s, pid_t pid, const struct model *m, bool said[2])
{
	if (m->gpu.seen[GPU_SRC_CUPTI] && !said[0]) {
		said[0] = true;
		if (s->cuda)
			cuda_trace_cupti_spoke(s->cuda, pid, s->verbose);
	}
	if (m->gpu.cupti_refused[0] && !said[1]) {
		said[1] = true;
		fprintf(stderr,
			"tally: %d: CUPTI refused tally's subscriber (%s): the driver's probes "
			"count its GPU figures\n",
			pid, m->gpu.cupti_refused);
	}
}

int session_on_msg(void *ctx, const void *data, size_t len)
{
	struct session *s = ctx;
	const struct tally_msg *h = data;

	/* a thread waits on a driver's load: answered at once, even while a
	 * late attach keeps the rest aside */
	if (len >= sizeof(struct tally_msg_driver) &&
	    (h->kind == TALLY_MSG_DRIVER_LOAD || h->kind == TALLY_MSG_DRIVER_HELD)) {
		if (s->cuda)
			cuda_trace_on_msg(s->cuda, data, s->verbose);
		return 0;
	}

	if (!__atomic_load_n(&s->deferring, __ATOMIC_ACQUIRE)) {
		session_deliver(s, data, len);
		/* taking the ring up to a view's cut: all in, the rest waits */
		return s->cutting && !s->model.waiting ? LOADER_STOP : 0;
	}
	session_defer(s, data, len);
	/* the read is over: the drain thread stops at once */
	return __atomic_load_n(&s->drain_stop, __ATOMIC_ACQUIRE) ? LOADER_STOP : 0;
}

#define RINGS_POLL_US 250

int session_poll(struct session *s, int timeout_ms)
{
	struct pollfd p = { .fd = s->pidfd, .events = POLLIN };
	int err;

	if (s->gone)
		return 1;
	long wait_us = timeout_ms < 0 ? -1 : timeout_ms * 1000L;
	if (loader_more(s->loader))
		wait_us = 0; /* records wait: no sleep before they are taken */
	/* heaps' rings are read by polling: a ring fills in a millisecond on a
	 * busy thread, whose next batches would then take the probe */
	if (loader_rings_active(s->loader) && (wait_us < 0 || wait_us > RINGS_POLL_US))
		wait_us = RINGS_POLL_US;
	if (s->pidfd >= 0) {
		struct timespec ts = { wait_us / 1000000, wait_us % 1000000 * 1000 };
		if (ppoll(&p, 1, wait_us < 0 ? NULL : &ts, NULL) < 0 && errno != EINTR)
			return -errno;
	} else if (wait_us > 0) {
		usleep((useconds_t)wait_us);
	}
	err = loader_consume(s->loader);
	if (err < 0 && err != -EINTR)
		return err;
	session_oom_arm(s);
	if (s->spawned) {
		int st;
		if (waitpid(s->pid, &st, WNOHANG) == s->pid) {
			s->gone = true;
			s->exit_status = st;
		}
	} else if ((s->pidfd >= 0 && (p.revents & POLLIN)) || !target_alive(s->pid)) {
		s->gone = true;
	}
	/* the root's end, as the tree's processes have theirs (lifetime_s) */
	if (s->gone && !s->src.ended_ns)
		s->src.ended_ns = clock_now_ns();
	return s->gone ? 1 : 0;
}

/* Where the target lives: its PID in its namespace, its parent, cgroup and
 * container; the last known when it has just gone. */
void session_place(struct session *s)
{
	struct figures_sources *src = &s->src;
	pid_t ppid;

	src->ns_pid = target_ns_pid(s->pid);
	if (!target_ppid(s->pid, &ppid))
		src->ppid = ppid;
	target_cgroup(s->pid, src->cgroup, sizeof(src->cgroup), src->container,
		      sizeof(src->container));
}

void session_refresh(struct session *s)
{
	struct figures_sources *src = &s->src;
	int st;

	/* only what was lost between the state read at attach and the cut at
	 * the end counts: the rest is in the state read, or past the cut */
	session_sources_lost(s, src);
	src->in_place = loader_rings_read_pid(s->loader, s->pid, false);
	src->strays = s->tree.strays;
	src->now_ns = clock_now_ns();
	loader_group_cpu(s->loader, s->pid, src->cpu_ns, false);
	if (!s->gone)
		loader_running_cpu(s->loader, s->pid, src->now_ns, src->cpu_ns);
	cuda_trace_read(s->cuda, s->pid, &src->cuda);
	if (!s->gone)
		session_nvml(s, s->pid, &src->cuda);
	src->allocator = s->model.saw_alloc	 ? FIGURES_ALLOC_TALLY :
			 s->foreign_alloc	 ? FIGURES_ALLOC_NONE :
			 s->glibc || s->injected ? FIGURES_ALLOC_GLIBC :
						   FIGURES_ALLOC_NONE;
	src->injected = s->injected;
	src->injected_execed = s->injected && s->execed;
	src->foreign_alloc = s->model.saw_alloc ? NULL : s->foreign_alloc;
	if (s->injected) {
		src->glibc = s->model.injected.f;
		src->have_glibc = true;
	} else {
		src->have_glibc = src->allocator == FIGURES_ALLOC_GLIBC &&
				  !glibc_trace_read(s->glibc, &src->glibc);
	}
	src->pid = s->pid;
	if (!s->gone) /* where it lives may change (a move to another cgroup) */
		session_place(s);
	memcpy(src->comm, s->comm, sizeof(src->comm));
	if (!s->gone)
		target_cmdline_keep(s->pid, s->cmdline, sizeof(s->cmdline));
	memcpy(src->cmdline, s->cmdline, sizeof(src->cmdline));
	src->late = s->late;
	src->gone = s->gone;
	src->have_exit = session_exit_status(s, &st);
	src->exit_status = src->have_exit ? st : 0;
	src->cupti = s->cupti;
	src->start_ns = s->start_ns;
	/* a command tally started was born with the trace; one it attached
	 * to, before (born_s null) */
	src->born_ns = s->spawned ? s->start_ns : 0;
}

void session_finish(struct session *s)
{
	timing_mark("target ran");
	session_cut_end(s);
	s->src.cut_torn = false; /* the end has a cut of its own */
	/* what the target submitted so far is in the ring: drain it */
	session_drain_ring(s);
	/* the tree's other processes still running: each one's own figures
	 * read and its figures cut there, as the root's below */
	session_read_final_tree(s);
	if (!s->gone && target_alive(s->pid)) {
		if (s->injected)
			session_inject_cut(s);
		session_read_final(s);
		/* batches handed over before the read, still in the ring */
		session_poll(s, 0);
		session_drain_ring(s);
	}
	/* the last of the heaps' rings, past any gap the BPF ring left */
	loader_drain_rings(s->loader);
	if (!s->src.have_final_inprocess) {
		/* gone, or it went while we looked (-d or a signal came as it
		 * exited): its last batches and its exit hand-over reached the
		 * ring before it died, maybe after the drain above */
		session_poll(s, 0);
		session_drain_ring(s);
		if (s->model.have_inprocess) {
			s->src.resident = s->model.resident_at_exit;
			s->src.have_resident = true;
		}
	}
	session_refresh(s);
	timing_mark("end: drain, final read");
}

bool session_exit_status(const struct session *s, int *status)
{
	if (s->spawned && s->gone) {
		*status = s->exit_status;
		return true;
	}
	if (s->gone && s->model.exited) {
		*status = s->model.exit_status;
		return true;
	}
	return false;
}

void session_report_end(const struct session *s, const char *who)
{
	int st;

	/* one line: with the figures' state when the allocator could not hand
	 * over (snapshot's inexact_why says it too) */
	if (session_exit_status(s, &st) && WIFSIGNALED(st))
		fprintf(stderr, "%s: the target (pid %d) was killed by SIG%s%s%s\n", who, s->pid,
			sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?",
			WCOREDUMP(st) ? " (core dumped)" : "",
			s->src.allocator != FIGURES_ALLOC_TALLY || s->model.have_inprocess ?
				"" :
				/* its heaps read as the OOM killer chose it: nothing missing */
				model_oom_whole(&s->model.oom) ?
				": the OOM killer's, the figures are of the moment it chose it" :
				": no exit hand-over, records its threads held may be missing");
}

static void *close_glibc(void *g)
{
	uint64_t t0 = timing_now();

	glibc_trace_close(g);
	timing_span("close: glibc.bpf.o (its thread)", t0);
	return NULL;
}

static void *close_cuda(void *c)
{
	uint64_t t0 = timing_now();

	cuda_trace_close(c);
	timing_span("close: cuda.bpf.o (its thread)", t0);
	return NULL;
}

/* The BPF objects let go side by side: letting a link go waits for grace
 * periods (a few ms for a uprobe_multi link, ~70 ms for each of glibc
 * mode's perf events), which then overlap. Each object holds its own
 * references to the maps it shares: any order is safe. */
static void close_objects(struct session *s)
{
	pthread_t tg, tc;
	bool g = s->glibc && !pthread_create(&tg, NULL, close_glibc, s->glibc);
	bool c = s->cuda && !pthread_create(&tc, NULL, close_cuda, s->cuda);

	if (s->glibc && !g)
		close_glibc(s->glibc); /* no thread: here, then */
	if (s->cuda && !c)
		close_cuda(s->cuda);
	loader_close(s->loader);
	if (g)
		pthread_join(tg, NULL);
	if (c)
		pthread_join(tc, NULL);
	timing_mark("close: the other objects (waited for)");
}

void session_close(struct session *s)
{
	timing_mark("end: figures, output");
	session_loaded(s);
	nvml_close(s->nvml);
	close_objects(s);
	if (s->spawned && !s->gone) {
		if (s->child.gate_fd >= 0) {
			target_abort(&s->child);
		} else {
			/* tally stops; CMD runs on, as it would have without tally */
		}
	}
	if (s->pidfd >= 0)
		close(s->pidfd);
	target_unlock(&s->lock);
	session_state_free(s);
	model_free(&s->model);
	tree_free(&s->tree);
	figures_process_free(&s->pscratch);
	free(s->pview); /* a shallow copy: the model it was made of owns the rest */
	symbolizer_free(s->sym);
	timing_mark("close: the rest");
	timing_report();
}
