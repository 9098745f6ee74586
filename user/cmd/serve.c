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
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cli.h"
#include "../model/figures.h"
#include "../views/prom.h"
#include "serve_gate.h"
#include "serve_pprof.h"

#define SERVE_LISTEN_DEFAULT "127.0.0.1:9464"
#define SERVE_INTERVAL_MS 500

struct serve_opts {
	struct cli_target target;
	const char *listen;
	int interval_ms;
	struct sockaddr_storage addr;
	socklen_t addr_len;
};

/* What the HTTP thread reads: the latest exposition, swapped whole. */
struct serve_text {
	pthread_mutex_t lock;
	char *buf; /* NULL until the first render */
	size_t len;
};

struct serve_ctx {
	struct serve_text text;
	struct serve_pprof pprof;
	struct figures fig; /* each tick's, reused */
	bool render_failed; /* said once on stderr */
};

/* The socket is ours, bound before anything starts, so that a port in use
 * is said plainly (libmicrohttpd would only say it failed) and no CMD is
 * started for nothing. Returns the fd or -errno. */
static int serve_listen(const struct serve_opts *o)
{
	int one = 1, fd, err;

	fd = socket(o->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* a restart may bind over the last run's TIME_WAIT; two listeners
	 * still cannot share the port on Linux */
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (o->addr.ss_family == AF_INET6)
		setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	if (bind(fd, (const struct sockaddr *)&o->addr, o->addr_len) || listen(fd, 64)) {
		err = -errno;
		close(fd);
		return err;
	}
	return fd;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *body)
{
	struct MHD_Response *r =
		MHD_create_response_from_buffer(strlen(body), (void *)body, MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret;

	if (!r)
		return MHD_NO;
	MHD_add_response_header(r, "Content-Type", "text/plain; charset=utf-8");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		MHD_add_response_header(r, "Allow", "GET, HEAD");
	ret = MHD_queue_response(c, status, r);
	MHD_destroy_response(r);
	return ret;
}

/* /debug/pprof/heap or /allocs: the profile as Go's net/http/pprof sends it. */
static enum MHD_Result reply_pprof(struct MHD_Connection *c, struct serve_pprof *sp, bool allocs)
{
	uint8_t *buf;
	size_t len;
	enum MHD_Result ret;

	if (serve_pprof_get(sp, allocs, &buf, &len))
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tally: no heap profile yet\n");
	struct MHD_Response *r = MHD_create_response_from_buffer(len, buf, MHD_RESPMEM_MUST_FREE);
	if (!r) {
		free(buf);
		return MHD_NO;
	}
	MHD_add_response_header(r, "Content-Type", "application/octet-stream");
	MHD_add_response_header(r, "Content-Disposition",
				allocs ? "attachment; filename=\"allocs\"" :
					 "attachment; filename=\"heap\"");
	MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

static enum MHD_Result serve_handle(void *cls, struct MHD_Connection *c, const char *url,
				    const char *method, const char *version,
				    const char *upload_data, size_t *upload_data_size,
				    void **con_cls)
{
	struct serve_ctx *ctx = cls;
	struct serve_text *t = &ctx->text;
	struct MHD_Response *r;
	enum MHD_Result ret;

	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	(void)con_cls;
	if (strcmp(method, MHD_HTTP_METHOD_GET) && strcmp(method, MHD_HTTP_METHOD_HEAD))
		return reply(c, MHD_HTTP_METHOD_NOT_ALLOWED, "tally: only GET and HEAD\n");
	if (!strcmp(url, "/debug/pprof/heap") || !strcmp(url, "/debug/pprof/allocs"))
		return reply_pprof(c, &ctx->pprof, !strcmp(url, "/debug/pprof/allocs"));
	if (strcmp(url, "/metrics"))
		return reply(c, MHD_HTTP_NOT_FOUND,
			     "tally: the metrics are at /metrics, heap profiles at "
			     "/debug/pprof/heap and /debug/pprof/allocs\n");
	pthread_mutex_lock(&t->lock);
	r = t->buf ? MHD_create_response_from_buffer(t->len, t->buf, MHD_RESPMEM_MUST_COPY) : NULL;
	pthread_mutex_unlock(&t->lock);
	if (!r)
		return reply(c, MHD_HTTP_SERVICE_UNAVAILABLE, "tally: no figures yet\n");
	MHD_add_response_header(r, "Content-Type", "text/plain; version=0.0.4; charset=utf-8");
	ret = MHD_queue_response(c, MHD_HTTP_OK, r);
	MHD_destroy_response(r);
	return ret;
}

/* A new exposition in place of the last; on failure the last stays. */
static void serve_render(struct session *s, struct serve_ctx *ctx)
{
	char *buf = NULL, *old;
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
	pthread_mutex_lock(&ctx->text.lock);
	old = ctx->text.buf;
	ctx->text.buf = buf;
	ctx->text.len = len;
	pthread_mutex_unlock(&ctx->text.lock);
	free(old);
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

/* libmicrohttpd on its own thread, its connections from the gate
 * (serve_gate.c), not a socket of its own. 0, or -1 after one line. */
static int serve_http(const struct serve_opts *o, struct serve_ctx *ctx, int fd,
		      struct MHD_Daemon **d, struct serve_gate **gate)
{
	*d = MHD_start_daemon(MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_NO_LISTEN_SOCKET |
				      MHD_USE_ITC |
				      (o->addr.ss_family == AF_INET6 ? MHD_USE_IPv6 : 0),
			      0, NULL, NULL, serve_handle, ctx, MHD_OPTION_CONNECTION_TIMEOUT,
			      (unsigned)10, MHD_OPTION_END);
	if (*d && !serve_gate_start(gate, *d, fd))
		return 0;
	fprintf(stderr, "tally serve: cannot start the HTTP server on %s\n", o->listen);
	if (*d)
		MHD_stop_daemon(*d);
	close(fd);
	return -1;
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
	pthread_mutex_init(&ctx->text.lock, NULL);
	serve_pprof_init(&ctx->pprof);
	fd = serve_listen(o);
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
	if (serve_http(o, ctx, fd, &d, &gate)) {
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
	serve_gate_stop(gate); /* closes the listening socket */
	MHD_stop_daemon(d);
	rc = TALLY_EXIT_OK;
out_session:
	session_close(&s);
out_ctx:
	figures_free(&ctx->fig);
	free(ctx->text.buf);
	pthread_mutex_destroy(&ctx->text.lock);
	serve_pprof_destroy(&ctx->pprof);
	free(ctx);
	return rc;
}

static const struct argp_option serve_options[] = {
	{ "listen", 'l', "ADDR", 0,
	  "Serve on ADDR: IPv4:PORT or [IPv6]:PORT (default " SERVE_LISTEN_DEFAULT ")", 0 },
	{ "interval", 'i', "MS", 0,
	  "Refresh the figures every MS milliseconds (default " CLI_STR(SERVE_INTERVAL_MS) ")", 0 },
	{ 0 },
};

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
	case ARGP_KEY_END:
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
				    "\nEXIT STATUS: 0 served until the end, 2 usage (a bad --listen), 3 no permission, "
				    "4 no BTF, 5 no such process, 6 PID already traced, 7 CMD could not start, 1 other "
				    "failures (the address is in use).";

int cmd_serve(int argc, char **argv)
{
	struct serve_opts o = { .listen = SERVE_LISTEN_DEFAULT, .interval_ms = SERVE_INTERVAL_MS };

	cli_target_init(&o.target);
	if (cli_parse_command("tally serve", serve_options, parse_serve_opt,
			      "(-p PID | -- CMD [ARGS...])", serve_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	return run_serve(&o);
}
