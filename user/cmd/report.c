// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally report -o FILE.html`: a session with a tick every -i MS whose
 * figures go into the time series (views/report/series.h), then, at the
 * end, one self-contained page (views/report/report.h) of the series, the
 * final figures' snapshot document and the heap profile.
 *
 * The page is built in memory and written once, through a temporary beside
 * FILE renamed over it (outfile.h): every way the loop ends (the target
 * exits, -d, SIGINT, SIGTERM) gives a whole page, and a SIGKILL or a write
 * error leaves FILE as it was.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "outfile.h"
#include "../model/figures.h"
#include "../session/profile.h"
#include "../views/report/report.h"

#define REPORT_INTERVAL_MS 100

struct report_ctx {
	struct series series;
	struct figures fig; /* each tick's, reused */
};

static int tick(struct session *s, void *arg)
{
	struct report_ctx *rc = arg;
	int err = session_figures(s, &rc->fig);

	if (!err)
		err = series_add(&rc->series, &rc->fig, clock_now_ns(), false);
	return err;
}

/* The end: the final figures as the series' last point, the page written
 * and put in place. 0 or -errno. */
static int report_finish(struct session *s, struct report_ctx *rc, struct outfile *of)
{
	struct profile pr;
	const struct prof *sites;
	int err = session_figures(s, &rc->fig);

	if (err)
		return err;
	err = series_add(&rc->series, &rc->fig, clock_now_ns(), true);
	if (err)
		return err;
	sites = profile_for_snapshot(s, &pr);
	err = report_write(of->f, &rc->fig, sites, &rc->series);
	profile_free(&pr);
	return err;
}

static int run_report(struct cli_file_opts *o)
{
	struct report_ctx *rc = calloc(1, sizeof(*rc));
	struct outfile of = { 0 };
	struct session s;
	int code, err;

	if (!rc) {
		fprintf(stderr, "tally report: out of memory\n");
		return TALLY_EXIT_FAIL;
	}
	code = cli_doc_start("tally report", o->out, &of, &s, &o->target);
	if (code) {
		free(rc);
		return code;
	}
	err = series_init(&rc->series, (unsigned)o->interval_ms, s.start_ns);
	if (!err)
		err = cli_run(&s, &o->target, o->interval_ms, tick, rc);
	session_finish(&s);
	if (!err)
		err = report_finish(&s, rc, &of);
	err = cli_doc_end("tally report", "report", o->out, &of, err);
	session_report_end(&s, "tally report");
	series_free(&rc->series);
	figures_free(&rc->fig);
	session_close(&s);
	free(rc);
	return err ? TALLY_EXIT_FAIL : TALLY_EXIT_OK;
}

static const struct argp_option report_options[] = {
	{ "output", 'o', "FILE", 0, "Write the page to FILE (required)", 0 },
	{ "interval", 'i', "MS", 0,
	  "A point of the charts every MS milliseconds (default " CLI_STR(REPORT_INTERVAL_MS) ")",
	  0 },
	{ 0 },
};

static const char report_doc[] =
	"Trace a process and write one self-contained HTML page of what it did: the byte "
	"identity's terms over time, live bytes per group and per process with the peak marked, "
	"CPU and GPU per group, flame graphs of the heap profile (in use, at the peak, "
	"allocated), leaks and temporaries, the process tree, and every reason the figures are "
	"not exact.\v"
	"The page needs no network: its scripts (uPlot, and its own) and data are inside it. "
	"It embeds the same JSON document `tally snapshot` prints. The time series keeps at "
	"most " CLI_STR(
		SERIES_MAX_POINTS) " points (past that, every second point is dropped "
				   "and the rest go on at half the resolution), " CLI_STR(SERIES_MAX_GROUPS) " groups and " CLI_STR(
					   SERIES_MAX_PROCS) " processes (the others summed as \"(other)\"). FILE is "
							     "written when the target exits, after -d SECS, or on SIGINT/SIGTERM, beside itself "
							     "and renamed when complete.\n\n"
							     "EXAMPLES:\n"
							     "  tally report -o report.html -- ./server --port 8080\n"
							     "  tally report -o report.html -p 1234 -d 30 -i 250\n"
							     "\nEXIT STATUS: 0 page written, 2 usage, 3 no permission, 4 no BTF, 5 no such "
							     "process, 6 PID already traced, 7 CMD could not start, 1 other failures (FILE "
							     "cannot be written).";

int cmd_report(int argc, char **argv)
{
	struct cli_file_opts o = { .interval_ms = REPORT_INTERVAL_MS, .what = "the page" };

	cli_target_init(&o.target);
	if (cli_parse_command("tally report", report_options, cli_parse_file_opt,
			      "-o FILE.html (-p PID | -- CMD [ARGS...])", report_doc, argc, argv,
			      &o))
		return TALLY_EXIT_USAGE;
	return run_report(&o);
}
