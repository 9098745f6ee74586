// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * build/tally: the command line. `tally COMMAND [OPTIONS] (-p PID | -- CMD)`;
 * each command parses its own options with argp (defaults beside the flags,
 * examples in the help).
 */
#include <argp.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "session.h"
#include "snapshot.h"

const char *argp_program_version = "tally 0.3";
const char *argp_program_bug_address = "<tally@localhost>";

#define RING_MB_DEFAULT 8
#define MAX_RULES 32

struct cli {
	struct session_opts o;
	double secs; /* -d: 0 = until the target exits or a signal */
	const char *rules[MAX_RULES];
};

enum { OPT_RING_MB = 1000, OPT_NO_PRELOAD, OPT_GROUP };

static const struct argp_option target_options[] = {
	{ "pid", 'p', "PID", 0, "Attach to a running process", 0 },
	{ "duration", 'd', "SECS", 0, "Stop after SECS seconds (default: when the target exits)",
	  0 },
	{ "group", OPT_GROUP, "NAME=GLOB", 0,
	  "Put threads whose name matches GLOB in group NAME (repeatable)", 0 },
	{ "ring-mb", OPT_RING_MB, "MB", 0,
	  "Ring buffer size in MiB, fractions allowed (default 8; rounded up to a power of two "
	  "of pages)",
	  0 },
	{ "no-preload", OPT_NO_PRELOAD, NULL, 0,
	  "Start CMD as it is: without libtally_alloc.so and libtally.so preloaded", 0 },
	{ 0 },
};

/* A usage error: one line, and the status scripts can tell apart. */
static void usage_error(const struct argp_state *state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
static void usage_error(const struct argp_state *state, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", state->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see %s --help)\n", state->name);
	exit(TALLY_EXIT_USAGE);
}

static int parse_number(const char *arg, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= lo && v <= hi))
		return -EINVAL;
	*out = v;
	return 0;
}

static error_t parse_target_opt(int key, char *arg, struct argp_state *state)
{
	struct cli *c = state->input;
	double v;

	switch (key) {
	case 'p':
		if (parse_number(arg, 1, INT_MAX, &v) || v != (double)(int)v)
			usage_error(state, "bad PID '%s'", arg);
		c->o.pid = (pid_t)v;
		break;
	case 'd':
		if (parse_number(arg, 0.001, 1e7, &v))
			usage_error(state, "bad duration '%s': want seconds > 0", arg);
		c->secs = v;
		break;
	case OPT_GROUP:
		if (c->o.nrules == MAX_RULES)
			usage_error(state, "at most %d --group rules", MAX_RULES);
		if (!strchr(arg, '=') || arg[0] == '=' || !strchr(arg, '=')[1])
			usage_error(state, "bad --group '%s': want NAME=GLOB", arg);
		c->rules[c->o.nrules++] = arg;
		break;
	case OPT_RING_MB:
		if (parse_number(arg, 0.000001, 65536, &v))
			usage_error(state, "bad --ring-mb '%s': want a size in MiB, up to 65536", arg);
		c->o.ring_bytes = (uint64_t)(v * 1048576.0);
		break;
	case OPT_NO_PRELOAD:
		c->o.no_preload = true;
		break;
	case ARGP_KEY_ARGS:
		c->o.cmd = state->argv + state->next;
		break;
	case ARGP_KEY_END:
		if (!c->o.pid && !c->o.cmd)
			usage_error(state, "say which process: -p PID or -- CMD [ARGS...]");
		if (c->o.pid && c->o.cmd)
			usage_error(state, "-p PID and -- CMD exclude each other");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

static const char snapshot_doc[] =
	"Trace a process and print one JSON snapshot (DESIGN.md §6) on stdout: the byte "
	"identity, the allocator's own figures, CPU and memory per resource group.\v"
	"The snapshot is printed when the target exits, after -d SECS, or on SIGINT/SIGTERM. "
	"With -- CMD, tally starts CMD with libtally_alloc.so and libtally.so preloaded and "
	"attached before its first instruction; CMD's own output stays its own. A process "
	"without libtally_alloc is traced in glibc mode: a probe on every malloc call, which is "
	"slow (microseconds a call), and only the live bytes, rounding and mmapped chunks are "
	"known.\n\n"
	"EXAMPLES:\n"
	"  tally snapshot -- ./server --port 8080     start and trace until it exits\n"
	"  tally snapshot -p 1234 -d 5                attach to PID 1234 for 5 seconds\n"
	"  tally snapshot --group io='io-*' -- ./app  threads named io-* form group io\n"
	"\nEXIT STATUS: 0 snapshot printed, 2 usage, 3 no permission, 4 no BTF, 5 no such "
	"process, 6 PID already traced, 7 CMD could not start, 1 other failures.";

static int run_snapshot(struct cli *c)
{
	struct session s;
	int rc, err;

	session_install_signals();
	rc = session_start(&s, &c->o);
	if (rc) {
		session_close(&s);
		return rc;
	}
	uint64_t deadline = c->secs > 0 ? s.start_ns + (uint64_t)(c->secs * 1e9) : 0;
	while (!session_exiting) {
		err = session_poll(&s, 2);
		if (err)
			break;
		if (deadline && session_now_ns() >= deadline)
			break;
	}
	session_finish(&s);
	err = snapshot_print(stdout, &s);
	if (err)
		fprintf(stderr, "tally: cannot write the snapshot: %s\n", strerror(-err));
	if (!snapshot_exact(&s) && (s.model.lost_msgs || s.model.lost_words))
		fprintf(stderr,
			"tally: %llu messages (%llu words of allocator records) lost: the ring was full; "
			"try a larger --ring-mb\n",
			(unsigned long long)s.model.lost_msgs,
			(unsigned long long)s.model.lost_words);
	session_close(&s);
	return err ? TALLY_EXIT_FAIL : TALLY_EXIT_OK;
}

static const char main_doc[] =
	"tally: where every byte is, how much CPU, per resource group.\v"
	"COMMANDS:\n"
	"  snapshot   trace a process, print one JSON snapshot\n"
	"\nRun `tally COMMAND --help` for a command's options.\n"
	"EXAMPLES:\n"
	"  tally snapshot -- ./myapp\n"
	"  tally snapshot -p $(pidof myapp) -d 2";

int main(int argc, char **argv)
{
	struct cli c = { .o = { .ring_bytes = RING_MB_DEFAULT << 20 } };
	struct argp snapshot_argp = { target_options, parse_target_opt, "(-p PID | -- CMD [ARGS...])",
				      snapshot_doc, NULL, NULL, NULL };
	struct argp main_argp = { NULL, NULL, "COMMAND [OPTIONS]", main_doc, NULL, NULL, NULL };

	c.o.rules = c.rules;
	argp_err_exit_status = TALLY_EXIT_USAGE;
	if (argc < 2 || argv[1][0] == '-') {
		/* --help, --version, or nothing */
		if (argc < 2) {
			argp_help(&main_argp, stderr, ARGP_HELP_STD_USAGE, "tally");
			return TALLY_EXIT_USAGE;
		}
		argp_parse(&main_argp, argc, argv, 0, NULL, NULL);
		return TALLY_EXIT_USAGE;
	}
	if (!strcmp(argv[1], "snapshot")) {
		argv[1] = "tally snapshot";
		if (argp_parse(&snapshot_argp, argc - 1, argv + 1, ARGP_IN_ORDER, NULL, &c))
			return TALLY_EXIT_USAGE;
		return run_snapshot(&c);
	}
	fprintf(stderr, "tally: unknown command '%s' (try tally --help)\n", argv[1]);
	return TALLY_EXIT_USAGE;
}
