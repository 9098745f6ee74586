// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally record -o FILE`: a session whose every message goes to the trace
 * writer (trace.h) as the model takes it, with counters at each tick and
 * once more with the final figures, the ones `tally snapshot` prints.
 *
 * FILE is written through a temporary beside it (outfile.h), created before
 * anything starts, and renamed over FILE once trace_end() has closed the
 * document: every way the loop can end (the target exits, -d, SIGINT,
 * SIGTERM, SIGHUP) gives a complete FILE, and a SIGKILL or a write error
 * leaves FILE as it was. The temporary is flushed at each tick.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "../model/figures.h"
#include "outfile.h"
#include "../views/trace.h"

#define RECORD_INTERVAL_MS 100

struct record_ctx {
	struct trace *trace;
	FILE *f;
	struct figures fig; /* each tick's, reused */
};

/* The observer gets one pointer: the session and the trace side by side, so
 * that it can hand the trace the model that has just taken the message. */
struct record_run {
	struct session s;
	struct record_ctx rc;
	struct outfile out; /* rc.f is its stream */
};

static void observe(void *arg, const void *data, size_t len)
{
	struct record_run *r = arg;

	const struct tally_msg *h = data;

	/* the model of the message's process: its groups' names */
	trace_message(r->rc.trace, session_model_of(&r->s, len >= sizeof(*h) ? (pid_t)h->pid : 0),
		      data, len);
}

static int tick(struct session *s, void *arg)
{
	struct record_ctx *rc = arg;

	int err = session_figures(s, &rc->fig);

	if (err)
		return err;
	trace_sample(rc->trace, &rc->fig, clock_now_ns());
	/* on disk at each tick: a reader sees the file grow, a SIGKILL loses
	 * one interval */
	errno = 0;
	if (fflush(rc->f) || ferror(rc->f))
		return errno ? -errno : -EIO;
	return 0;
}

/* said: a write error was reported already (the run stopped on it) */
static int record_finish(struct record_run *r, const char *path, bool said)
{
	struct session *s = &r->s;
	const struct figures_process *p;
	int err;

	err = session_figures(s, &r->rc.fig);
	if (!err) {
		trace_sample(r->rc.trace, &r->rc.fig, clock_now_ns());
		err = trace_end(r->rc.trace, &s->model, clock_now_ns(), &r->rc.fig);
	}
	if (!err)
		err = outfile_commit(&r->out);
	else
		outfile_abort(&r->out);
	r->rc.f = NULL;
	session_report_end(s, "tally record");
	if (err) {
		if (!said)
			fprintf(stderr, "tally record: cannot write %s: %s\n", path,
				strerror(-err));
		return TALLY_EXIT_FAIL;
	}
	p = &r->rc.fig.procs[0];
	if (p->events.lost || p->events.lost_record_words)
		fprintf(stderr,
			"tally record: %llu messages lost (marked \"events lost\" in the trace): "
			"try a larger --ring-mb\n",
			(unsigned long long)p->events.lost);
	return TALLY_EXIT_OK;
}

static int run_record(struct cli_file_opts *o)
{
	struct record_run *r = calloc(1, sizeof(*r));
	int rc, err;

	if (!r) {
		fprintf(stderr, "tally record: out of memory\n");
		return TALLY_EXIT_FAIL;
	}
	rc = cli_doc_start("tally record", o->out, &r->out, &r->s, &o->target);
	if (rc) {
		free(r);
		return rc;
	}
	r->rc.f = r->out.f;
	err = trace_new(&r->rc.trace, r->rc.f, (uint32_t)r->s.pid, r->s.start_ns);
	if (err) {
		fprintf(stderr, "tally record: cannot write %s: %s\n", o->out, strerror(-err));
		/* nothing was recorded: FILE stays as it was */
		outfile_abort(&r->out);
		session_close(&r->s);
		free(r);
		return TALLY_EXIT_FAIL;
	}
	/* session_start cleared the session: the observer is set after it, and
	 * no message is consumed before the first poll */
	r->s.observer = observe;
	r->s.observer_ctx = r;
	trace_begin(r->rc.trace, &r->s.model, r->s.comm);
	err = cli_run(&r->s, &o->target, o->interval_ms, tick, &r->rc);
	if (err)
		fprintf(stderr, "tally record: cannot write %s: %s (stopping)\n", o->out,
			strerror(-err));
	session_finish(&r->s);
	rc = record_finish(r, o->out, err != 0);
	if (err)
		rc = TALLY_EXIT_FAIL;
	trace_free(r->rc.trace);
	figures_free(&r->rc.fig);
	session_close(&r->s);
	free(r);
	return rc;
}

static const struct argp_option record_options[] = {
	{ "output", 'o', "FILE", 0, "Write the trace to FILE (required)", 0 },
	{ "interval", 'i', "MS", 0,
	  "Counters every MS milliseconds (default " CLI_STR(RECORD_INTERVAL_MS) ")", 0 },
	{ 0 },
};

static const char record_doc[] =
	"Trace a process into a Chrome trace-event JSON file that Perfetto "
	"(ui.perfetto.dev) and chrome://tracing open.\v"
	"The file holds counters for every Stats term and each group's live bytes and CPU "
	"(every -i MS, and the final figures, equal to `tally snapshot`'s, at the end), group "
	"enter/exit as slices on each thread, GPU launches, device allocations and module "
	"loads as instant events, and an \"events lost\" marker where the ring buffer dropped "
	"messages. It is written as the recording goes and is a complete JSON document after "
	"the target exits, after -d SECS, and after SIGINT or SIGTERM.\n\n"
	"EXAMPLES:\n"
	"  tally record -o trace.json -- ./server --port 8080\n"
	"  tally record -o trace.json -p 1234 -d 10 -i 50\n"
	"\nEXIT STATUS: 0 trace written, 2 usage, 3 no permission, 4 no BTF, 5 no such "
	"process, 6 PID already traced, 7 CMD could not start, 1 other failures (FILE "
	"cannot be written).";

int cmd_record(int argc, char **argv)
{
	struct cli_file_opts o = { .interval_ms = RECORD_INTERVAL_MS, .what = "the trace" };

	cli_target_init(&o.target);
	if (cli_parse_command("tally record", record_options, cli_parse_file_opt,
			      "-o FILE (-p PID | -- CMD [ARGS...])", record_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	return run_record(&o);
}
