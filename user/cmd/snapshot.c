// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally snapshot`: trace until the end, then one snapshot document
 * (snapshot_doc.h) of the final figures.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "outfile.h"
#include "../session/profile.h"
#include "../views/snapshot_doc.h"
#include "../util/text.h"

struct snapshot_opts {
	struct cli_target target;
	const char *out; /* -o FILE, or NULL: stdout */
	double since_s;	 /* --since: "growing" counts blocks this recent (0: since the start) */
};

#define OPT_SINCE 0x100

static const char snapshot_doc[] =
	"Trace a process and write one JSON snapshot (on stdout, or to -o FILE): the byte "
	"identity, the allocator's own figures, CPU and memory per resource group.\v"
	"The snapshot is written when the target exits, after -d SECS, or on SIGINT/SIGTERM. "
	"With -- CMD, tally starts CMD with libtally_alloc.so and libtally.so preloaded and "
	"attached before its first instruction. Without -o, stdout carries nothing but the "
	"snapshot: CMD's stdout goes to tally's stderr; with -o, CMD's stdout is tally's "
	"stdout. CMD keeps tally's stdin and stderr. FILE is written beside itself and renamed "
	"when complete, never half-written. \"target\" says how CMD ended (exit_code, or the "
	"signal that killed it); a target killed by a signal is also one line on stderr. A "
	"process "
	"without libtally_alloc is traced in glibc mode: a probe on every malloc call, which is "
	"slow (microseconds a call), and only the live bytes, rounding and mmapped chunks are "
	"known.\n\n"
	"The processes CMD starts are followed at any depth (fork, vfork, clone, exec; "
	"--no-follow: CMD alone), and with -f those a running process starts: the document's "
	"top level is the root's, \"processes\" lists every process of the tree, root first, "
	"each with the same fields, and \"tree\" says whether every process is exact "
	"(tree.exact, tree.inexact: pid, comm and reason codes), what is alive at the end "
	"(tree.alive_at_end: live and mapped bytes, CPU, GPU) and what the tree did over its "
	"life, ended processes included (tree.lifetime: CPU, allocations, kernels, events). "
	"Each process not exact is one line on stderr. A process still running at the end has "
	"its allocator's state read from its memory, as the root's is; with -f, those running "
	"at the attach have their state read as the root's is.\n\n"
	"EXAMPLES:\n"
	"  tally snapshot -- ./server --port 8080     start and trace until it exits\n"
	"  tally snapshot -o s.json -- make -j2       the snapshot to s.json, make's output as usual\n"
	"  tally snapshot -p 1234 -d 5                attach to PID 1234 for 5 seconds\n"
	"  tally snapshot -p 1234 -f -d 5             ... and what it starts meanwhile\n"
	"  tally snapshot --group io='io-*' -- ./app  threads named io-* form group io\n"
	"\nEXIT STATUS: 0 snapshot printed, 2 usage, 3 no permission, 4 no BTF, 5 no such "
	"process, 6 PID already traced, 7 CMD could not start, 1 other failures.";

/* What the snapshot says in its inexact_why, said once more on stderr
 * where a user can act on it. */
static void snapshot_report(const struct figures_process *p, const struct model *m)
{
	bool tally = p->target.allocator == FIGURES_ALLOC_TALLY;

	if (p->events.lost || p->events.lost_record_words)
		fprintf(stderr,
			"tally: %llu messages (%llu words of allocator records) lost: the ring was full; "
			"try a larger --ring-mb\n",
			(unsigned long long)p->events.lost,
			(unsigned long long)p->events.lost_record_words);
	else if (p->target.gone && tally && !m->have_inprocess &&
		 !p->target.signal) /* said with the signal */
		fprintf(stderr, "tally: the target ended without the allocator's exit hand-over "
				"(_exit?): records its threads held may be missing\n");
	if (m->collided_id)
		/* no names here: the SDK's come from the target, unescaped */
		fprintf(stderr,
			"tally: an SDK group took id %u, a --group rule's (255 groups in all): "
			"their figures are merged\n",
			m->collided_id);
	if (tally && m->inprocess_threads_held)
		fprintf(stderr, "tally: the target called exit() while other threads held records "
				"they never handed over: the figures are not exact\n");
}

/* The tree's other processes a signal killed: one line, the first few by
 * pid, comm (escaped: it comes from the target) and signal. */
static void snapshot_report_tree(const struct figures *f)
{
	unsigned killed = 0;

	for (unsigned i = 1; i < f->nprocs; i++)
		killed += f->procs[i].target.signal != 0;
	if (!killed)
		return;
	fprintf(stderr, "tally: %u process%s of the tree killed by a signal:", killed,
		killed == 1 ? "" : "es");
	for (unsigned i = 1, n = 0; i < f->nprocs && n < 5; i++) {
		const struct figures_target *t = &f->procs[i].target;
		char comm[4 * TALLY_COMM_LEN + 1];
		const char *sig = t->signal ? sigabbrev_np(t->signal) : NULL;
		if (!t->signal)
			continue;
		text_sanitize_terminal(comm, sizeof(comm), t->comm ? t->comm : "", TALLY_COMM_LEN);
		fprintf(stderr, "%s %d (%s, SIG%s)", n++ ? "," : "", (int)t->pid, comm,
			sig ? sig : "?");
	}
	fprintf(stderr, "%s\n", killed > 5 ? ", ..." : "");
}

/* Processes whose figures are not exact said one by one on stderr, the
 * first so many (then a count): a nginx master can be exact while a worker
 * is not, and the document's top level is the master's. */
#define REPORT_INEXACT_MAX 20

/* The root's reasons said already, with advice (snapshot_report) or with
 * the signal that killed it (session_report_end): not said twice. */
static bool said_for_root(enum figures_why w)
{
	return w == FIGURES_WHY_LOST || w == FIGURES_WHY_NO_HANDOVER ||
	       w == FIGURES_WHY_GROUP_COLLIDED || w == FIGURES_WHY_EXIT_HELD;
}

static void snapshot_report_inexact(const struct figures *f)
{
	unsigned said = 0;

	for (unsigned i = 0; i < f->nprocs && said < REPORT_INEXACT_MAX; i++) {
		const struct figures_process *p = &f->procs[i];
		char comm[4 * TALLY_COMM_LEN + 1];
		unsigned n = 0;
		if (p->exact)
			continue;
		said++;
		text_sanitize_terminal(comm, sizeof(comm), p->target.comm ? p->target.comm : "",
				       TALLY_COMM_LEN);
		for (unsigned k = 0; k < p->nwhy; k++) {
			if (!i && said_for_root(p->why_code[k]))
				continue;
			if (!n++)
				fprintf(stderr, "tally: pid %d (%s): figures not exact:",
					(int)p->target.pid, comm);
			fprintf(stderr, "%s %s", n > 1 ? ";" : "", p->why[k]);
		}
		if (n)
			fputc('\n', stderr);
	}
	if (f->tree.inexact > said)
		fprintf(stderr,
			"tally: %llu more processes of the tree whose figures are not exact "
			"(the document's tree.inexact)\n",
			(unsigned long long)(f->tree.inexact - said));
}

static int run_snapshot(struct snapshot_opts *so)
{
	struct cli_target *c = &so->target;
	struct outfile of = { 0 };
	struct figures fig = { 0 };
	struct session s;
	int rc, err;

	rc = cli_doc_start("tally snapshot", so->out, &of, &s, c);
	if (rc)
		return rc;
	cli_run(&s, c, 0, NULL, NULL);
	session_finish(&s);
	if (so->since_s > 0) {
		uint64_t back = (uint64_t)(so->since_s * 1e9), now = clock_now_ns();
		s.since_ns = now > back ? now - back : 0;
	}
	err = session_figures(&s, &fig);
	struct profile pr;
	const struct prof *sites = profile_for_snapshot(&s, &pr);
	if (!err)
		err = snapshot_print(so->out ? of.f : stdout, &fig, sites);
	profile_free(&pr);
	err = cli_doc_end("tally snapshot", "snapshot", so->out, &of, err);
	session_report_end(&s, "tally snapshot");
	if (!err) {
		snapshot_report(&fig.procs[0], &s.model);
		snapshot_report_tree(&fig);
		snapshot_report_inexact(&fig);
	}
	figures_free(&fig);
	session_close(&s);
	return err ? TALLY_EXIT_FAIL : TALLY_EXIT_OK;
}

static const struct argp_option snapshot_options[] = {
	{ "output", 'o', "FILE", 0,
	  "Write the snapshot to FILE (default: stdout; CMD's stdout then goes to stderr)", 0 },
	{ "since", OPT_SINCE, "SECS", 0,
	  "A running process's \"growing\" sites: the blocks sampled in the last SECS seconds "
	  "and still in use (default: since the start or the attach)",
	  0 },
	{ 0 },
};

static error_t parse_snapshot_opt(int key, char *arg, struct argp_state *state)
{
	struct snapshot_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'o':
		o->out = cli_out_arg(state, arg);
		break;
	case OPT_SINCE:
		if (cli_number(arg, 0.001, 1e9, &o->since_s))
			cli_usage_error(state, "bad --since '%s': want seconds, above 0", arg);
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	struct snapshot_opts o = { 0 };

	cli_target_init(&o.target);
	if (cli_parse_command("tally snapshot", snapshot_options, parse_snapshot_opt,
			      "(-p PID | -- CMD [ARGS...])", snapshot_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	return run_snapshot(&o);
}
