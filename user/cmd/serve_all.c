// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally serve --all` (serve_all.h): the agent's loop. One thread owns every
 * session; each pass polls each session's ring without waiting, and at the
 * scan interval looks over /proc for new processes, at the tick renders the
 * exposition (each session's figures at a cut of its own, as `tally serve`
 * takes them) and builds a heap profile when the HTTP thread asked for one.
 *
 * A process is followed in a session of its own (session.h, -p PID -f): its
 * state read at the attach, its children in its tree, its end seen by its
 * pidfd. One process's trouble (no permission, another tally on it, an exit
 * mid-attach) is one line on stderr and one counter, never the agent's end.
 * Sessions are attached with no glibc mode: a probe per malloc call would
 * slow a process that asked for nothing.
 */
#include <bpf/bpf.h>
#include <errno.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "../views/prom_all.h"
#include "serve_all.h"
#include "serve_http.h"

/* Each pass sleeps this long when no ring waits to be read (2 ms when one
 * does, as cli_run): an idle agent wakes 50 times a second. */
#define AGENT_IDLE_US 20000
#define AGENT_BUSY_US 2000
/* An attach refused is tried again after (ms): another tally may let go,
 * permissions rarely change. */
#define RETRY_BUSY_MS 5000
/* The look over /proc at most this often: a process's stat line costs
 * ~23 us to read (370 processes: 8.4 ms a look), and --min-age is 1 s. */
#define AGENT_SCAN_MS 1000
#define RETRY_OTHER_MS 60000

static bool agent_known(void *ctx, pid_t pid)
{
	struct agent *a = ctx;
	uint32_t key = (uint32_t)pid, val;

	for (struct agent_proc *p = a->procs; p; p = p->next) {
		if (p->pid == pid)
			return true;
		int fd = loader_procs_fd(p->s.loader);
		if (fd >= 0 && !bpf_map_lookup_elem(fd, &key, &val))
			return true;
	}
	return false;
}

/* The session's processes (its procs map: the root and those adopted) to
 * the charging loader, which follows their children itself. */
static void agent_cpu_follow(struct agent *a, struct session *s)
{
	int fd = loader_procs_fd(s->loader);
	uint32_t key, next, *prev = NULL;

	while (fd >= 0 && !bpf_map_get_next_key(fd, prev, &next)) {
		if (loader_cpu_follow(a->cpu, (pid_t)next))
			a->h.cpu_lost++;
		key = next;
		prev = &key;
	}
}

/* The charging loader's ring: its fork, exit and exec messages, which the
 * sessions have from their own objects. */
static int agent_cpu_msg(void *ctx, const void *data, size_t len)
{
	(void)ctx;
	(void)data;
	(void)len;
	return 0;
}

/* The charging loader: the scheduler's programs alone, no root. 0, or -1
 * after one line. */
static int agent_cpu_start(struct agent *a)
{
	int err = loader_open(&a->cpu, 0, true, 256 << 10, agent_cpu_msg, a);

	if (!err)
		err = loader_load(a->cpu);
	if (!err)
		err = loader_attach_sched(a->cpu);
	if (!err) {
		loader_cpu_fds(a->cpu, &a->cpu_share);
		return 0;
	}
	fprintf(stderr, "tally serve --all: cannot load the BPF programs: %s\n", strerror(-err));
	return -1;
}

static enum prom_all_fail fail_reason(int rc)
{
	switch (rc) {
	case TALLY_EXIT_PERM:
		return PROM_ALL_FAIL_PERMISSION;
	case TALLY_EXIT_BUSY:
		return PROM_ALL_FAIL_BUSY;
	case TALLY_EXIT_NO_PROCESS:
		return PROM_ALL_FAIL_GONE;
	default:
		return PROM_ALL_FAIL_OTHER;
	}
}

static void agent_attach(struct agent *a, const struct scan_candidate *c)
{
	struct session_opts opts = a->o->target.o;
	struct agent_proc *p;
	int rc;

	if (a->h.sessions >= a->o->max_procs) {
		a->h.fail[PROM_ALL_FAIL_LIMIT]++;
		if (!a->said_limit)
			fprintf(stderr,
				"tally serve --all: following %u processes (--max-procs): process %d "
				"and any more wait, counted in "
				"tally_agent_attach_failures_total{reason=\"limit\"}\n",
				a->o->max_procs, c->pid);
		a->said_limit = true;
		scan_refused(a->scan, c->pid, c->start, RETRY_BUSY_MS);
		return;
	}
	p = calloc(1, sizeof(*p));
	if (!p) {
		a->h.fail[PROM_ALL_FAIL_OTHER]++;
		return;
	}
	opts.pid = c->pid;
	opts.cmd = NULL;
	opts.follow = true;
	opts.no_glibc = true;
	opts.verbose = false; /* -v is the agent's: a line per process, not timings */
	opts.cpu_share = &a->cpu_share;
	rc = session_start(&p->s, &opts);
	if (rc) {
		enum prom_all_fail why = fail_reason(rc);
		if (a->o->target.o.verbose)
			fprintf(stderr, "tally serve --all: process %d not followed (%s)\n", c->pid,
				prom_all_fail_names[why]);
		a->h.fail[why]++;
		session_close(&p->s);
		free(p);
		if (why != PROM_ALL_FAIL_GONE)
			scan_refused(a->scan, c->pid, c->start,
				     why == PROM_ALL_FAIL_BUSY ? RETRY_BUSY_MS : RETRY_OTHER_MS);
		return;
	}
	p->pid = c->pid;
	p->start = c->start;
	agent_cpu_follow(a, &p->s);
	session_refresh(&p->s);
	if (!session_figures(&p->s, &p->fig))
		p->have_fig = true;
	p->next = a->procs;
	a->procs = p;
	a->h.sessions++;
	a->h.attached++;
	if (a->o->target.o.verbose)
		fprintf(stderr, "tally serve --all: following process %d (%s)\n", p->pid,
			p->s.comm);
}

/* The process ended: its session's last records read, then gone, and its
 * series with it at the next render. */
static void agent_end(struct agent *a, struct agent_proc *p)
{
	struct figures_sources *src = &p->s.src;

	session_finish(&p->s);
	session_report_end(&p->s, "tally serve --all");
	session_refresh(&p->s);
	a->h.lost += src->lost_msgs + src->lost_outside_read;
	a->h.lost_words += src->lost_words;
	figures_free(&p->fig);
	session_close(&p->s);
	free(p);
	a->h.sessions--;
	a->h.ended++;
	/* a session's model and buffers back to the system: the agent's
	 * memory follows the processes it follows, not those it followed */
	malloc_trim(0);
}

static void agent_scan(struct agent *a)
{
	struct scan_candidate c[64];
	uint64_t t0 = clock_now_ns(), remembered;
	unsigned n = scan_run(a->scan, agent_known, a, c, 64);

	a->h.scan_ns = clock_now_ns() - t0;
	scan_counts(a->scan, &a->h.scanned, &remembered);
	/* each asked again: an attach before it may have taken it into its
	 * tree (an nginx master's session adopts its workers, found by the
	 * same look) */
	for (unsigned i = 0; i < n && !session_exiting; i++)
		if (!agent_known(a, c[i].pid))
			agent_attach(a, &c[i]);
}

/* Each session's ring read, without waiting; the ended ones let go.
 * Whether some ring wants reading again soon. */
static bool agent_poll(struct agent *a)
{
	struct agent_proc **pp = &a->procs;
	bool busy = false;

	while (*pp) {
		struct agent_proc *p = *pp;
		if (session_poll(&p->s, 0)) {
			*pp = p->next;
			agent_end(a, p);
			continue;
		}
		busy |= loader_more(p->s.loader) || loader_rings_active(p->s.loader);
		pp = &p->next;
	}
	return busy;
}

static uint64_t self_resident(void)
{
	FILE *f = fopen("/proc/self/statm", "re");
	unsigned long size, res = 0;

	if (f) {
		if (fscanf(f, "%lu %lu", &size, &res) != 2)
			res = 0;
		fclose(f);
	}
	return (uint64_t)res * (uint64_t)sysconf(_SC_PAGESIZE);
}

static void agent_health(struct agent *a)
{
	struct rusage ru;
	uint64_t live_lost = 0, live_words = 0;
	struct tally_lost cl;

	getrusage(RUSAGE_SELF, &ru);
	a->h.cpu_ns = ((uint64_t)ru.ru_utime.tv_sec + (uint64_t)ru.ru_stime.tv_sec) * 1000000000u +
		      ((uint64_t)ru.ru_utime.tv_usec + (uint64_t)ru.ru_stime.tv_usec) * 1000u;
	a->h.resident = self_resident();
	for (struct agent_proc *p = a->procs; p; p = p->next) {
		live_lost += p->s.src.lost_msgs + p->s.src.lost_outside_read;
		live_words += p->s.src.lost_words;
	}
	a->health_now = a->h;
	loader_lost(a->cpu, &cl);
	a->health_now.cpu_lost += cl.cpu + cl.procs;
	a->health_now.lost += live_lost;
	a->health_now.lost_words += live_words;
}

/* Every session's figures at a cut of its own, then the exposition. */
static void agent_tick(struct agent *a)
{
	const struct figures **figs;
	unsigned n = 0;
	char *buf = NULL;
	size_t len = 0;

	for (struct agent_proc *p = a->procs; p; p = p->next) {
		session_cut_begin(&p->s);
		session_refresh(&p->s);
		if (session_cut_shown(&p->s))
			p->have_fig = !session_figures(&p->s, &p->fig);
		else
			a->h.torn++;
		session_cut_end(&p->s);
	}
	agent_health(a);
	figs = calloc(a->h.sessions + 1, sizeof(*figs));
	for (struct agent_proc *p = a->procs; figs && p; p = p->next)
		if (p->have_fig)
			figs[n++] = &p->fig;
	FILE *m = figs ? open_memstream(&buf, &len) : NULL;
	int err = m ? prom_all_render(m, figs, n, a->o->top, &a->health_now) : -ENOMEM;
	if (m && fclose(m) && !err)
		err = -ENOMEM;
	free(figs);
	if (err) {
		if (!a->render_failed)
			fprintf(stderr, "tally serve --all: cannot render the metrics: %s\n",
				strerror(-err));
		a->render_failed = true;
		free(buf);
		return;
	}
	serve_text_swap(&a->text, buf, len);
}

static enum MHD_Result agent_pprof_route(void *ctx, struct MHD_Connection *c, bool allocs)
{
	return agent_pprof_reply(ctx, c, allocs);
}

static enum MHD_Result agent_handle(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **con_cls)
{
	struct agent *a = cls;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	return serve_route(c, url, method, &a->text, agent_pprof_route, a,
			   " (?pid=PID for one process)");
}

static void agent_loop(struct agent *a, uint64_t deadline)
{
	uint64_t next_scan = 0, next_tick = 0;
	uint64_t every = (uint64_t)a->o->interval_ms * NSEC_PER_MSEC;

	while (!session_exiting) {
		uint64_t now = clock_now_ns();
		if (deadline && now >= deadline)
			break;
		if (now >= next_scan) {
			agent_scan(a);
			next_scan = clock_now_ns() + (every > AGENT_SCAN_MS * NSEC_PER_MSEC ?
							      every :
							      AGENT_SCAN_MS * NSEC_PER_MSEC);
		}
		bool busy = agent_poll(a);
		loader_consume(a->cpu);
		if (clock_now_ns() >= next_tick) {
			agent_tick(a);
			next_tick = clock_now_ns() + every;
		}
		agent_pprof_tick(a);
		usleep(busy ? AGENT_BUSY_US : AGENT_IDLE_US);
	}
}

int serve_all_run(struct serve_opts *o)
{
	struct agent *a = calloc(1, sizeof(*a));
	struct MHD_Daemon *d = NULL;
	struct serve_gate *gate = NULL;
	int fd, rc = TALLY_EXIT_FAIL;

	if (!a || !(a->scan = scan_new(o))) {
		fprintf(stderr, "tally serve --all: out of memory\n");
		free(a);
		return TALLY_EXIT_FAIL;
	}
	a->o = o;
	a->h.start_time = (uint64_t)time(NULL);
	serve_text_init(&a->text);
	agent_pprof_init(a);
	fd = serve_listen(&o->addr, o->addr_len);
	if (fd < 0) {
		fprintf(stderr, "tally serve --all: cannot listen on %s: %s\n", o->listen,
			strerror(-fd));
		goto out;
	}
	session_install_signals();
	if (agent_cpu_start(a)) {
		close(fd);
		goto out;
	}
	agent_tick(a); /* the agent's own figures from the first scrape */
	if (serve_http_start("tally serve --all", o->listen, o->addr.ss_family, fd, agent_handle, a,
			     &d, &gate))
		goto out;
	fprintf(stderr,
		"tally serve --all: following every process on tally's libraries; metrics "
		"on http://%s/metrics\n",
		o->listen);
	agent_loop(a, o->target.secs > 0 ? clock_now_ns() + (uint64_t)(o->target.secs * 1e9) : 0);
	serve_http_stop(d, gate);
	while (a->procs) {
		struct agent_proc *p = a->procs;
		a->procs = p->next;
		session_finish(&p->s);
		figures_free(&p->fig);
		session_close(&p->s); /* detaches: the process goes on untraced */
		free(p);
	}
	rc = TALLY_EXIT_OK;
out:
	if (a->cpu)
		loader_close(a->cpu);
	agent_pprof_destroy(a);
	serve_text_destroy(&a->text);
	scan_free(a->scan);
	free(a);
	return rc;
}
