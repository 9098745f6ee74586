// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The command line every tally command shares (cli.h): the parsers of its
 * numbers and addresses and the target options' argp, apart from the session
 * loop (cli.c), so that a test can drive them without a session. */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum {
	OPT_RING_MB = 1000,
	OPT_NO_PRELOAD,
	OPT_GROUP,
	OPT_VERBOSE,
	OPT_NO_FOLLOW,
	OPT_RATE,
	OPT_NO_SAMPLE,
	OPT_INJECT
};

static const struct argp_option target_options[] = {
	{ NULL, 0, NULL, 0, "Which process:", 1 },
	{ "pid", 'p', "PID", 0, "Attach to a running process (its host PID, in a container too)",
	  1 },
	{ "follow", 'f', NULL, 0,
	  "With -p: its running descendants too, and every process it starts from now on "
	  "(-- CMD follows the processes it starts already)",
	  1 },
	{ "no-follow", OPT_NO_FOLLOW, NULL, 0, "Only the process itself, not those it starts", 1 },
	{ "inject", OPT_INJECT, NULL, 0,
	  "With -p, a process on glibc's malloc: load libtally_interpose.so into it (ptrace, as "
	  "a debugger does) and record each malloc-family call in the process, instead of a "
	  "probe per call; undone when tally stops",
	  1 },
	{ "duration", 'd', "SECS", 0, "Stop after SECS seconds (default: when the target exits)",
	  1 },
	{ "group", OPT_GROUP, "NAME=GLOB", 0,
	  "Put threads whose name matches GLOB in group NAME (repeatable)", 1 },
	{ "ring-mb", OPT_RING_MB, "MB", 0,
	  "Ring buffer size in MiB, fractions allowed (default " CLI_STR(
		  CLI_RING_MB_DEFAULT) "; rounded up to a power of two "
				       "of pages)",
	  1 },
	{ "no-preload", OPT_NO_PRELOAD, NULL, 0,
	  "Start CMD as it is: without libtally_alloc.so and libtally.so preloaded", 1 },
	{ "verbose", 'v', NULL, 0,
	  "Say on stderr when the probes are in place, and at the end how long each phase of "
	  "tally's start and end took (also with TALLY_TIMING=1)",
	  1 },
	{ NULL, 0, NULL, 0, "Heap profiles by call site (tally's allocator):", 2 },
	{ "rate", OPT_RATE, "BYTES", 0,
	  "Sample one allocation per BYTES allocated, on average (default " CLI_STR(
		  CLI_RATE_DEFAULT) "; 1: every allocation, exact and slow)",
	  2 },
	{ "no-sample", OPT_NO_SAMPLE, NULL, 0, "No sampling: no sites, no stacks unwound", 2 },
	{ 0 },
};

void cli_usage_error(const struct argp_state *state, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "%s: ", state->name);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fprintf(stderr, " (see %s --help)\n", state->name);
	exit(TALLY_EXIT_USAGE);
}

int cli_number(const char *arg, double lo, double hi, double *out)
{
	char *end;

	/* strtod would skip leading blanks (' 9464' is no number) and read
	 * hexadecimal ('-d 0x10' is not 10 seconds, nor 16) */
	if (isspace((unsigned char)arg[0]) || strpbrk(arg, "xXpP"))
		return -EINVAL;
	errno = 0;
	double v = strtod(arg, &end);
	if (errno || end == arg || *end || !(v >= lo && v <= hi))
		return -EINVAL;
	*out = v;
	return 0;
}

int cli_uint(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out)
{
	uint64_t v = 0;

	/* digits only: no blank, sign, base prefix or exponent ("0x10", "1e3") */
	if (!arg[0] || strlen(arg) > 19)
		return -EINVAL;
	for (const char *c = arg; *c; c++) {
		if (*c < '0' || *c > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	if (v < lo || v > hi)
		return -EINVAL;
	*out = v;
	return 0;
}

/* HOST:PORT with an IPv4 address, or [IPv6]:PORT; numeric only, so that
 * what is bound is what was written. 0 or -EINVAL. */
int cli_parse_listen(const char *arg, struct sockaddr_storage *ss, socklen_t *len)
{
	char host[INET6_ADDRSTRLEN + 2];
	const char *colon, *h = arg;
	size_t hlen;
	uint64_t port;

	memset(ss, 0, sizeof(*ss));
	if (arg[0] == '[') {
		const char *close = strchr(arg, ']');
		if (!close || close[1] != ':')
			return -EINVAL;
		h = arg + 1;
		hlen = (size_t)(close - h);
		colon = close + 1;
	} else {
		colon = strrchr(arg, ':');
		if (!colon)
			return -EINVAL;
		hlen = (size_t)(colon - arg);
	}
	if (!hlen || hlen >= sizeof(host) || cli_uint(colon + 1, 1, 65535, &port))
		return -EINVAL;
	memcpy(host, h, hlen);
	host[hlen] = 0;
	if (arg[0] == '[') {
		struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
		a6->sin6_family = AF_INET6;
		a6->sin6_port = htons((uint16_t)port);
		if (inet_pton(AF_INET6, host, &a6->sin6_addr) != 1)
			return -EINVAL;
		*len = sizeof(*a6);
	} else {
		struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
		a4->sin_family = AF_INET;
		a4->sin_port = htons((uint16_t)port);
		if (inet_pton(AF_INET, host, &a4->sin_addr) != 1)
			return -EINVAL;
		*len = sizeof(*a4);
	}
	return 0;
}

int cli_interval_ms(const struct argp_state *state, const char *arg, int lo, int hi)
{
	double v;

	if (cli_number(arg, lo, hi, &v) || v != (double)(int)v)
		cli_usage_error(state, "bad interval '%s': want milliseconds from %d to %d", arg,
				lo, hi);
	return (int)v;
}

/* The options together: which process, and whether its children too. */
static void target_end(struct cli_target *c, const struct argp_state *state)
{
	if (c->all && (c->o.pid || c->o.cmd))
		cli_usage_error(state, "--all follows every process: no -p PID or CMD with it");
	if (c->all && (c->o.inject || c->o.no_preload || c->follow))
		cli_usage_error(state, "--inject, --no-preload, -f and --no-follow are for one "
				       "target, not --all");
	if (c->all) {
		if (c->rate_given && c->no_sample)
			cli_usage_error(state, "--rate and --no-sample exclude each other");
		if (c->no_sample)
			c->o.sample_rate = 0;
		c->o.follow = true; /* each process's children are its own */
		return;
	}
	if (!c->o.pid && !c->o.cmd)
		cli_usage_error(state, "say which process: -p PID or -- CMD [ARGS...]");
	if (c->o.pid && c->o.cmd)
		cli_usage_error(state, "-p PID and -- CMD exclude each other");
	if (c->follow == (CLI_FOLLOW | CLI_NO_FOLLOW))
		cli_usage_error(state, "-f and --no-follow exclude each other");
	if (c->o.inject && !c->o.pid)
		cli_usage_error(state, "--inject is for a running process: it needs -p PID");
	if (c->rate_given && c->no_sample)
		cli_usage_error(state, "--rate and --no-sample exclude each other");
	if (c->no_sample)
		c->o.sample_rate = 0;
	/* a command's processes are followed unless said otherwise; a running
	 * process's only with -f */
	c->o.follow = c->follow == CLI_FOLLOW || (c->o.cmd && !c->follow);
}

/* --rate BYTES, --no-sample */
static void parse_sampling(struct cli_target *c, int key, const char *arg,
			   const struct argp_state *state)
{
	uint64_t rate;

	if (key == OPT_NO_SAMPLE) {
		c->no_sample = true;
		return;
	}
	if (cli_uint(arg, 1, CLI_RATE_MAX, &rate))
		cli_usage_error(state, "bad --rate '%s': want bytes from 1 to %llu", arg,
				(unsigned long long)CLI_RATE_MAX);
	c->o.sample_rate = rate;
	c->rate_given = true;
}

/* The options that only set a flag. */
static void parse_flag(struct cli_target *c, int key)
{
	switch (key) {
	case OPT_NO_PRELOAD:
		c->o.no_preload = true;
		break;
	case OPT_INJECT:
		c->o.inject = true;
		break;
	case 'v':
		c->o.verbose = true;
		break;
	case 'f':
		c->follow |= CLI_FOLLOW;
		break;
	}
}

static error_t parse_target_opt(int key, char *arg, struct argp_state *state)
{
	struct cli_target *c = state->input;
	double v;

	switch (key) {
	case 'p': {
		uint64_t pid;
		if (cli_uint(arg, 1, INT_MAX, &pid))
			cli_usage_error(state, "bad PID '%s'", arg);
		c->o.pid = (pid_t)pid;
		break;
	}
	case 'd':
		if (cli_number(arg, 0.001, 1e7, &v))
			cli_usage_error(state, "bad duration '%s': want seconds > 0", arg);
		c->secs = v;
		break;
	case OPT_GROUP:
		if (c->o.nrules == CLI_MAX_RULES)
			cli_usage_error(state, "at most %d --group rules", CLI_MAX_RULES);
		if (!strchr(arg, '=') || arg[0] == '=' || !strchr(arg, '=')[1])
			cli_usage_error(state, "bad --group '%s': want NAME=GLOB", arg);
		c->rules[c->o.nrules++] = arg;
		break;
	case OPT_RING_MB:
		/* the kernel takes a BPF ring of at most 2 GiB (its size is a u32
		 * and a power of two) */
		if (cli_number(arg, 0.000001, 2048, &v))
			cli_usage_error(state, "bad --ring-mb '%s': want a size in MiB, up to 2048",
					arg);
		c->o.ring_bytes = (uint64_t)(v * 1048576.0);
		c->ring_given = true;
		break;
	case OPT_NO_PRELOAD:
	case OPT_INJECT:
	case 'v':
	case 'f':
		parse_flag(c, key);
		break;
	case OPT_RATE:
	case OPT_NO_SAMPLE:
		parse_sampling(c, key, arg, state);
		break;
	case OPT_NO_FOLLOW:
		c->follow |= CLI_NO_FOLLOW;
		break;
	case ARGP_KEY_ARGS:
		c->o.cmd = state->argv + state->next;
		state->next = state->argc;
		break;
	case ARGP_KEY_END:
		target_end(c, state);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const struct argp cli_target_argp = {
	target_options, parse_target_opt, NULL, NULL, NULL, NULL, NULL
};

void cli_target_init(struct cli_target *t)
{
	memset(t, 0, sizeof(*t));
	t->o.ring_bytes = (uint64_t)CLI_RING_MB_DEFAULT << 20;
	t->o.sample_rate = CLI_RATE_DEFAULT;
	t->o.rules = t->rules;
}

int cli_parse_command(const char *name, const struct argp_option *options, argp_parser_t parser,
		      const char *args_doc, const char *doc, int argc, char **argv, void *input)
{
	static const struct argp_child children[] = { { &cli_target_argp, 0, NULL, 0 }, { 0 } };
	const struct argp argp = { options, parser, args_doc, doc, children, NULL, NULL };

	argv[0] = (char *)name;
	return argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, input) ? TALLY_EXIT_USAGE : 0;
}

error_t cli_parse_file_opt(int key, char *arg, struct argp_state *state)
{
	struct cli_file_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'o':
		o->out = cli_out_arg(state, arg);
		break;
	case 'i':
		o->interval_ms = cli_interval_ms(state, arg, 1, 3600000);
		break;
	case ARGP_KEY_END:
		if (!o->out)
			cli_usage_error(state, "say where %s goes: -o FILE", o->what);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

const char *cli_out_arg(const struct argp_state *state, const char *arg)
{
	if (!*arg)
		cli_usage_error(state, "-o wants a file name");
	return arg;
}
