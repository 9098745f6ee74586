// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally demo`: the built-in workload (build/demo_workload: threads in named
 * groups, churn, a cross-thread pipeline, yields, rejections, GPU calls)
 * under `tally top`. Without a GPU its "infer" thread drives the fake driver
 * of the tests, so the GPU columns have something to show. Without a
 * terminal it prints batch frames and the final snapshot.
 */
#include <argp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"

#define DEMO_SECS_TTY 20
#define DEMO_SECS_BATCH 4
#define DEMO_INTERVAL_MS 1000

struct demo_opts {
	double secs; /* 0: DEMO_SECS_TTY in a terminal, DEMO_SECS_BATCH without */
	int interval_ms;
};

static const struct argp_option demo_options[] = {
	{ "seconds", 's', "SECS", 0,
	  "How long the workload runs (default " CLI_STR(DEMO_SECS_TTY) " in a terminal, " CLI_STR(
		  DEMO_SECS_BATCH) " without)",
	  0 },
	{ "interval", 'i', "MS", 0,
	  "Refresh every MS milliseconds (default " CLI_STR(DEMO_INTERVAL_MS) ")", 0 },
	{ 0 },
};

static error_t parse_demo_opt(int key, char *arg, struct argp_state *state)
{
	struct demo_opts *o = state->input;
	double v;

	switch (key) {
	case 's':
		if (cli_number(arg, 0.1, 86400, &v))
			cli_usage_error(state, "bad -s '%s': want seconds in [0.1, 86400]", arg);
		o->secs = v;
		break;
	case 'i':
		o->interval_ms = cli_interval_ms(state, arg, 10, 3600000);
		break;
	case ARGP_KEY_ARG:
		cli_usage_error(state, "no arguments expected: '%s'", arg);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/* A file installed beside the tally binary. */
static int beside_self(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return -1;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	if ((size_t)snprintf(out, len, "%s/%s", self, name) >= len)
		return -1;
	return access(out, R_OK);
}

static const char demo_doc[] =
	"Run tally's demo workload under the live view (tally top): threads in the groups "
	"ingest, decode, render (layout nested in it), cache and infer; allocation churn, a "
	"cross-thread pipeline, cooperative yields and rejections, and GPU calls (through the "
	"fake driver of the tests when the machine has no GPU). Without a terminal it prints "
	"text frames and, at the end, the snapshot JSON.\v"
	"EXAMPLES:\n"
	"  tally demo              20 s in the live view (q quits)\n"
	"  tally demo -s 4 | less  4 s of text frames, then the snapshot";

int cmd_demo(int argc, char **argv)
{
	struct argp argp = { demo_options, parse_demo_opt, NULL, demo_doc, NULL, NULL, NULL };
	struct demo_opts o = { .interval_ms = DEMO_INTERVAL_MS };
	char workload[PATH_MAX], fake[PATH_MAX], secs[32], interval[32];
	bool tty = isatty(STDIN_FILENO) && isatty(STDOUT_FILENO);

	argv[0] = "tally demo";
	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return TALLY_EXIT_USAGE;
	if (beside_self("demo_workload", workload, sizeof(workload))) {
		fprintf(stderr, "tally demo: the demo workload is not beside tally (make all)\n");
		return TALLY_EXIT_FAIL;
	}
	/* no driver of its own: the demo's GPU thread uses the tests' fake one,
	 * and tally probes that file */
	if (access("/usr/lib/x86_64-linux-gnu/libcuda.so.1", R_OK) && !getenv("DEMO_LIBCUDA") &&
	    !beside_self("tests/fake_cuda/libcuda.so.1", fake, sizeof(fake))) {
		setenv("DEMO_LIBCUDA", fake, 1);
		setenv("TALLY_GPU", "on", 1); /* no GPU here: follow the fake all the same */
	}
	snprintf(secs, sizeof(secs), "%g", o.secs ? o.secs : tty ? DEMO_SECS_TTY : DEMO_SECS_BATCH);
	snprintf(interval, sizeof(interval), "%d", o.interval_ms);
	/* in a terminal, the live view alone; without one, frames and the snapshot */
	char *top_argv[10];
	int n = 0;
	top_argv[n++] = "tally top";
	top_argv[n++] = "-i";
	top_argv[n++] = interval;
	if (!tty)
		top_argv[n++] = "--final-snapshot";
	top_argv[n++] = "--";
	top_argv[n++] = workload;
	top_argv[n++] = "-s";
	top_argv[n++] = secs;
	top_argv[n] = NULL;
	return cmd_top(n, top_argv);
}
