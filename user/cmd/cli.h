/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every tally command shares on its command line: which process
 * (-p PID or -- CMD), for how long, --group rules, the ring size; and the
 * loop that drives a session until the target exits, the time is up or a
 * signal comes. The parsers are in cli_parse.c (no session: a test links
 * them alone), the loop in cli.c.
 */
#ifndef TALLY_CLI_H
#define TALLY_CLI_H

#include <argp.h>
#include <sys/socket.h>

#include "../session/session.h"

/* A constant in a help text: the text follows the constant. */
#define CLI_STR(x) CLI_STR_(x)
#define CLI_STR_(x) #x

#define CLI_MAX_RULES 32
/* Two threads allocating flat out (38 M records a second, tests/busy mix 2)
 * lose nothing through a 100 ms stall of tally's CPU, as a VM's host takes
 * a vCPU away for (perf record -a: every 0.7 s on these 2-core VMs): at 32
 * MiB, 3 runs of -d 1 in 15 lost batches, at 64 none (nor at 128). */
#define CLI_RING_MB_DEFAULT 64

/* --rate: the allocator's default (alloc/sample.h); at most a TiB */
#define CLI_RATE_DEFAULT 524288
#define CLI_RATE_MAX (1ULL << 40)

struct cli_target {
	struct session_opts o;
	bool rate_given, no_sample;
	double secs; /* -d: 0 = until the target exits or a signal */
	const char *rules[CLI_MAX_RULES];
	unsigned follow; /* CLI_FOLLOW (-f), CLI_NO_FOLLOW (--no-follow) as given */
	bool all;	 /* tally serve --all: no one target (set by its parser) */
	bool ring_given; /* --ring-mb */
};
#define CLI_FOLLOW 1u
#define CLI_NO_FOLLOW 2u

/* An argp child: include it in a command's argp with &cli_target_argp and
 * the command's struct cli_target as its input. */
extern const struct argp cli_target_argp;
void cli_target_init(struct cli_target *t);

/*
 * A command's line parsed: its own options (options and parser, whose
 * state->input is input; at ARGP_KEY_INIT it hands the child its struct
 * cli_target) beside cli_target_argp's. name ("tally CMD") is argv[0] in
 * argp's messages. 0, or TALLY_EXIT_USAGE.
 */
int cli_parse_command(const char *name, const struct argp_option *options, argp_parser_t parser,
		      const char *args_doc, const char *doc, int argc, char **argv, void *input);
/* The options of a command that writes one file from a run of ticks
 * (record, report): -o FILE, required (`what` names what goes there in
 * the refusal: "the trace"), and -i MS. */
struct cli_file_opts {
	struct cli_target target;
	const char *out;
	int interval_ms;
	const char *what;
};
/* Their argp parser; state->input is a struct cli_file_opts. */
error_t cli_parse_file_opt(int key, char *arg, struct argp_state *state);
/* -o FILE: the file name, or a usage error when it is empty. */
const char *cli_out_arg(const struct argp_state *state, const char *arg);
/* One line on stderr ("tally CMD: ... (see tally CMD --help)") and exit 2. */
void cli_usage_error(const struct argp_state *state, const char *fmt, ...)
	__attribute__((format(printf, 2, 3), noreturn));
/* -i MS of every view: whole milliseconds in [lo, hi], else a usage error. */
int cli_interval_ms(const struct argp_state *state, const char *arg, int lo, int hi);
/* A number in [lo, hi]: 0 or -EINVAL. */
int cli_number(const char *arg, double lo, double hi, double *out);
/* A whole number in decimal digits only, lo..hi: 0 or -EINVAL. */
int cli_uint(const char *arg, uint64_t lo, uint64_t hi, uint64_t *out);
/* --listen: HOST:PORT with an IPv4 address, or [IPv6]:PORT; numeric only.
 * 0 or -EINVAL. */
int cli_parse_listen(const char *arg, struct sockaddr_storage *ss, socklen_t *len);

/* When -d ends the session (CLOCK_MONOTONIC ns), or 0: it does not. */
uint64_t cli_deadline(const struct session *s, const struct cli_target *t);
/*
 * Poll the session every poll_ms until the target exits, -d passes or a
 * signal comes; tick(ctx) every tick_ms (0: never) after a refresh of the
 * figures (session_refresh). Returns 0, or tick's non-zero return.
 */
int cli_run(struct session *s, const struct cli_target *t, int tick_ms,
	    int (*tick)(struct session *s, void *ctx), void *ctx);

/*
 * The start of a command that writes a document: out (-o FILE; NULL:
 * stdout) opened before anything starts, since a path that cannot be
 * written is a usage error; CMD's stdout sent to stderr when the document
 * goes to stdout; the signals; the session. 0, or the exit status after one
 * line on stderr (nothing started, no file left).
 */
struct outfile;
int cli_doc_start(const char *name, const char *out, struct outfile *of, struct session *s,
		  struct cli_target *c);
/* Its end: the document put in place (err 0 and out given) or the
 * temporary removed; "NAME: cannot write the WHAT [to FILE]: ..." when it
 * failed. Returns err, or the commit's. */
int cli_doc_end(const char *name, const char *what, const char *out, struct outfile *of, int err);

int cmd_snapshot(int argc, char **argv);
int cmd_top(int argc, char **argv);
int cmd_record(int argc, char **argv);
int cmd_serve(int argc, char **argv);
int cmd_demo(int argc, char **argv);
int cmd_profile(int argc, char **argv);
int cmd_report(int argc, char **argv);
int cmd_diff(int argc, char **argv);

#endif /* TALLY_CLI_H */
