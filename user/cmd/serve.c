// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally serve --listen ADDR`: the session's figures as Prometheus text on
 * /metrics (prom.h), served by libmicrohttpd from its own thread.
 *
 * Threads: the main thread owns the session (the ring, the model) and, at
 * each tick, renders the whole exposition into a fresh buffer; the HTTP
 * thread only copies the latest buffer, under a mutex held for the copy. A
 * scrape therefore never sees half a tick, and never waits on the tracer.
 *
 * Before each tick the loop (cli_run) completes a live target's figures with
 * the records its threads hold and have not handed over yet
 * (session_cut_begin), so a scrape of an idle process equals its snapshot. When the target exits, the
 * final figures stay on /metrics (tally_target_running 0) until SIGINT,
 * SIGTERM or -d: a scraper gets to see how it ended.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "../model/figures.h"
#include "../views/prom.h"
#include "serve_all.h"
#include "serve_http.h"
#include "serve_pprof.h"

#define SERVE_LISTEN_DEFAULT "127.0.0.1:9464"
#define SERVE_INTERVAL_MS 500

struct serve_ctx {
	struct serve_text text;
	struct serve_pprof pprof;
	struct figures fig; /* each tick's, reused */
	bool render_failed; /* said once on stderr */
};

/* /debug/pprof/heap or /allocs: the profile as Go's net/http/pprof sends it. */
static enum MHD_Result reply_pprof(void *arg, struct MHD_Connection *c, bool allocs)
{
	struct serve_ctx *ctx = arg;
	uint8_t *buf;
	size_t len;

	if (serve_pprof_get(&ctx->pprof, allocs, &buf, &len))
		return serve_reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tally: no heap profile yet\n");
	return serve_reply_pprof(c, buf, len, allocs);
}

static enum MHD_Result serve_handle(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **con_cls)
{
	struct serve_ctx *ctx = cls;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	return serve_route(c, url, method, &ctx->text, reply_pprof, ctx, "");
}

/* A new exposition in place of the last; on failure the last stays. */
static void serve_render(struct session *s, struct serve_ctx *ctx)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int err = mem ? 0 : -errno;

	if (!err) {
		err = session_figures(s, &ctx->fig);
		if (!err)
			err = prom_render(mem, &ctx->fig);
		if (fclose(mem) && !err)
			err = -ENOMEM;
	}
	if (err) {
		if (!ctx->render_failed)
			fprintf(stderr, "tally serve: cannot render the metrics: %s\n",
				strerror(-err));
		ctx->render_failed = true;
		free(buf);
		return;
	}
	serve_text_swap(&ctx->text, buf, len);
}

static int tick(struct session *s, void *arg)
{
	struct serve_ctx *ctx = arg;

	serve_render(s, ctx);
	serve_pprof_tick(&ctx->pprof, s, false);
	return 0;
}

/* After the target exited: its final figures until a signal or the
 * deadline of -d (0: none). */
static void serve_linger(struct session *s, struct serve_ctx *ctx, uint64_t deadline)
{
	fprintf(stderr,
		"tally serve: process %d exited; serving its final figures until SIGINT or "
		"SIGTERM%s\n",
		s->pid, deadline ? " or the end of -d" : "");
	while (!session_exiting && (!deadline || clock_now_ns() < deadline)) {
		serve_pprof_tick(&ctx->pprof, s, false);
		usleep(50 * 1000);
	}
}

static int run_serve(struct serve_opts *o)
{
	struct serve_ctx *ctx = calloc(1, sizeof(*ctx));
	struct MHD_Daemon *d = NULL;
	struct serve_gate *gate = NULL;
	struct session s;
	int fd, rc;

	if (!ctx) {
		fprintf(stderr, "tally serve: out of memory\n");
		return TALLY_EXIT_FAIL;
	}
	serve_text_init(&ctx->text);
	serve_pprof_init(&ctx->pprof);
	fd = serve_listen(&o->addr, o->addr_len);
	if (fd < 0) {
		fprintf(stderr, "tally serve: cannot listen on %s: %s\n", o->listen, strerror(-fd));
		rc = TALLY_EXIT_FAIL;
		goto out_ctx;
	}
	session_install_signals();
	rc = session_start(&s, &o->target.o);
	if (rc) {
		close(fd);
		goto out_session;
	}
	session_refresh(&s);
	serve_render(&s, ctx);
	if (serve_http_start("tally serve", o->listen, o->addr.ss_family, fd, serve_handle, ctx, &d,
			     &gate)) {
		rc = TALLY_EXIT_FAIL;
		goto out_session;
	}
	fprintf(stderr, "tally serve: metrics of process %d on http://%s/metrics\n", s.pid,
		o->listen);
	cli_run(&s, &o->target, o->interval_ms, tick, ctx);
	session_finish(&s);
	session_report_end(&s, "tally serve");
	serve_render(&s, ctx);
	uint64_t deadline = cli_deadline(&s, &o->target);
	if (s.gone && !session_exiting && !(deadline && clock_now_ns() >= deadline))
		serve_linger(&s, ctx, deadline);
	serve_http_stop(d, gate);
	rc = TALLY_EXIT_OK;
out_session:
	session_close(&s);
out_ctx:
	figures_free(&ctx->fig);
	serve_text_destroy(&ctx->text);
	serve_pprof_destroy(&ctx->pprof);
	free(ctx);
	return rc;
}

enum { OPT_ALL = 2000, OPT_COMM, OPT_CGROUP, OPT_MAX_PROCS, OPT_TOP, OPT_MIN_AGE };

static const struct argp_option serve_options[] = {
	{ "listen", 'l', "ADDR", 0,
	  "Serve on ADDR: IPv4:PORT or [IPv6]:PORT (default " SERVE_LISTEN_DEFAULT ")", 0 },
	{ "interval", 'i', "MS", 0,
	  "Refresh the figures every MS milliseconds (default " CLI_STR(SERVE_INTERVAL_MS) ")", 0 },
	{ NULL, 0, NULL, 0, "The machine's agent (--all, no -p or CMD):", 40 },
	{ "all", OPT_ALL, NULL, 0,
	  "Follow every process that runs on libtally_alloc, libtally or the CUDA driver, "
	  "started before tally or after, in any container; each one's children too",
	  40 },
	{ "comm", OPT_COMM, "GLOB", 0,
	  "Only processes whose name (comm) matches GLOB (repeatable: any of them)", 40 },
	{ "cgroup", OPT_CGROUP, "GLOB", 0,
	  "Only processes whose cgroup v2 path matches GLOB, e.g. '/system.slice/*' "
	  "(repeatable: any of them)",
	  40 },
	{ "max-procs", OPT_MAX_PROCS, "N", 0,
	  "Follow at most N processes at once, the first found first; the others wait and are "
	  "counted (default " CLI_STR(SERVE_ALL_MAX_PROCS) ")",
	  40 },
	{ "top", OPT_TOP, "N", 0,
	  "Per-process series for the N processes with the most live bytes, the rest summed "
	  "as comm=\"other\" (default " CLI_STR(SERVE_ALL_TOP) ")",
	  40 },
	{ "min-age", OPT_MIN_AGE, "MS", 0,
	  "Follow a process once it has run MS milliseconds (default " CLI_STR(
		  SERVE_ALL_MIN_AGE_MS) "): a short command is over before an attach would be",
	  40 },
	{ 0 },
};

/* --max-procs, --top, --min-age: whole numbers in [lo, hi]. */
static unsigned serve_uint(const struct argp_state *state, const char *opt, const char *arg,
			   uint64_t lo, uint64_t hi)
{
	uint64_t v;

	if (cli_uint(arg, lo, hi, &v))
		cli_usage_error(state, "bad %s '%s': want a whole number from %llu to %llu", opt,
				arg, (unsigned long long)lo, (unsigned long long)hi);
	return (unsigned)v;
}

/* The options of --all alone. */
static void parse_all_opt(struct serve_opts *o, int key, char *arg, struct argp_state *state)
{
	switch (key) {
	case OPT_ALL:
		o->target.all = true;
		break;
	case OPT_COMM:
	case OPT_CGROUP: {
		unsigned *n = key == OPT_COMM ? &o->ncomm : &o->ncgroup;
		if (*n == SERVE_ALL_MAX_GLOBS)
			cli_usage_error(state, "at most %d --comm and %d --cgroup",
					SERVE_ALL_MAX_GLOBS, SERVE_ALL_MAX_GLOBS);
		if (!*arg)
			cli_usage_error(state, "--%s wants a GLOB",
					key == OPT_COMM ? "comm" : "cgroup");
		(key == OPT_COMM ? o->comm : o->cgroup)[(*n)++] = arg;
		break;
	}
	case OPT_MAX_PROCS:
		o->max_procs = serve_uint(state, "--max-procs", arg, 1, 4096);
		break;
	case OPT_TOP:
		o->top = serve_uint(state, "--top", arg, 0, 10000);
		break;
	case OPT_MIN_AGE:
		o->min_age_ms = serve_uint(state, "--min-age", arg, 0, 3600000);
		break;
	}
}

static error_t parse_serve_opt(int key, char *arg, struct argp_state *state)
{
	struct serve_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'l':
		o->listen = arg;
		break;
	case 'i':
		o->interval_ms = cli_interval_ms(state, arg, 1, 3600000);
		break;
	case OPT_ALL:
	case OPT_COMM:
	case OPT_CGROUP:
	case OPT_MAX_PROCS:
	case OPT_TOP:
	case OPT_MIN_AGE:
		parse_all_opt(o, key, arg, state);
		break;
	case ARGP_KEY_END:
		if (!o->target.all &&
		    (o->ncomm || o->ncgroup || o->max_procs || o->top != SERVE_ALL_TOP ||
		     o->min_age_ms != SERVE_ALL_MIN_AGE_MS))
			cli_usage_error(state, "--comm, --cgroup, --max-procs, --top and --min-age "
					       "are for --all");
		if (cli_parse_listen(o->listen, &o->addr, &o->addr_len))
			cli_usage_error(state,
					"bad --listen '%s': want IPv4:PORT or [IPv6]:PORT, e.g. "
					"127.0.0.1:9464",
					o->listen);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const char serve_doc[] =
	"Trace a process and serve its figures in the Prometheus text format on "
	"http://ADDR/metrics.\v"
	"Every Stats term, each group's live bytes, CPU seconds and allocation counters, and "
	"the GPU figures, refreshed every -i MS. Loopback by default: the figures describe "
	"the target's memory, so expose them on purpose (--listen 0.0.0.0:9464). When the "
	"target exits, its final figures (equal to `tally snapshot`'s) stay on /metrics until "
	"SIGINT, SIGTERM or -d SECS.\n\n"
	"Heap profiles by call site (see tally profile --help) on /debug/pprof/heap (in-use "
	"bytes first) and /debug/pprof/allocs (allocated bytes first), as Go programs serve "
	"them: `pprof http://ADDR/debug/pprof/heap`, or Parca and Pyroscope scraping it.\n\n"
	"A traced tree (the processes CMD starts, or -p PID -f): the unlabelled series are "
	"the sums over the root and the processes still running, groups merged by name; the "
	"tally_process_ series (live and mapped bytes, CPU seconds, exact) carry pid and comm "
	"labels, one per process for the " CLI_STR(
		PROM_MAX_PROCESSES) " with the most live "
				    "bytes and one more, comm=\"other\", summing the rest, so that a scrape stays bounded "
				    "however many processes the tree starts.\n\n"
				    "EXAMPLES:\n"
				    "  tally serve -- ./server --port 8080\n"
				    "  tally serve --listen [::1]:9464 -p 1234\n"
				    "  curl -s http://127.0.0.1:9464/metrics\n"
				    "\nThe machine's agent, --all: every process on libtally_alloc, libtally or the CUDA "
				    "driver, each followed (with what it starts) in a session of its own from when it "
				    "has run --min-age, each series labelled pid, comm and container; the --top "
				    "processes by live bytes get per-process Stats and group series, the rest are "
				    "summed as comm=\"other\"; tally_container_* sum per container; tally_agent_* say "
				    "how the agent does (sessions, attach failures by reason, lost records, its own "
				    "memory and CPU, the series it serves). A process it cannot follow is one line on "
				    "stderr and one count, never the agent's end. Profiles: /debug/pprof/heap?pid=PID "
				    "for one process, or every one labelled pid, comm and container. Each followed "
				    "process costs about 9 MiB (a 4 MiB ring each, mapped twice; --ring-mb).\n"
				    "  tally serve --all --listen 0.0.0.0:9464 --cgroup '/kubepods/*'\n"
				    "\nEXIT STATUS: 0 served until the end, 2 usage (a bad --listen), 3 no permission, "
				    "4 no BTF, 5 no such process, 6 PID already traced, 7 CMD could not start, 1 other "
				    "failures (the address is in use).";

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o = { .listen = SERVE_LISTEN_DEFAULT,
				.interval_ms = SERVE_INTERVAL_MS,
				.top = SERVE_ALL_TOP,
				.min_age_ms = SERVE_ALL_MIN_AGE_MS };

	cli_target_init(&o.target);
	/* the agent's sessions are many: a smaller ring each, unless told */
	o.target.o.ring_bytes = (uint64_t)SERVE_ALL_RING_MB << 20;
	if (cli_parse_command("tally serve", serve_options, parse_serve_opt,
			      "(-p PID | -- CMD [ARGS...] | --all)", serve_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	if (!o.target.all && !o.target.ring_given)
		o.target.o.ring_bytes = (uint64_t)CLI_RING_MB_DEFAULT << 20;
	if (o.target.all && !o.max_procs)
		o.max_procs = SERVE_ALL_MAX_PROCS;
	return o.target.all ? serve_all_run(&o) : run_serve(&o);
}
