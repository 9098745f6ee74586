// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The loop that drives a session for every tally command (cli.h); the
 * command-line parsers are in cli_parse.c. */
#include <string.h>

#include "cli.h"
#include "outfile.h"

uint64_t cli_deadline(const struct session *s, const struct cli_target *t)
{
	return t->secs > 0 ? s->start_ns + (uint64_t)(t->secs * NSEC_PER_SEC) : 0;
}

int cli_run(struct session *s, const struct cli_target *t, int tick_ms,
	    int (*tick)(struct session *s, void *ctx), void *ctx)
{
	uint64_t deadline = cli_deadline(s, t);
	uint64_t next_tick = tick_ms > 0 ? clock_now_ns() + (uint64_t)tick_ms * NSEC_PER_MSEC : 0;
	int rc = 0;

	while (!session_exiting) {
		/* 2 ms: a busy allocator fills a few MiB of ring in tens of ms */
		if (session_poll(s, 2))
			break;
		uint64_t now = clock_now_ns();
		if (deadline && now >= deadline)
			break;
		if (next_tick && now >= next_tick) {
			next_tick = now + (uint64_t)tick_ms * NSEC_PER_MSEC;
			session_cut_begin(s);
			session_refresh(s);
			if (session_cut_shown(s))
				rc = tick(s, ctx);
			else /* said where the user looks: a frame less */
				fprintf(stderr,
					"tally: pid %d: a tick skipped: its cut was not of one "
					"moment (%u in a row)\n",
					(int)s->pid, s->torn_in_a_row);
			session_cut_end(s);
			if (rc)
				break;
		}
	}
	return rc;
}

int cli_doc_start(const char *name, const char *out, struct outfile *of, struct session *s,
		  struct cli_target *c)
{
	int err, rc;

	/* before anything starts: a path that cannot be written is a usage error */
	if (out) {
		err = outfile_open(of, out);
		if (err) {
			fprintf(stderr, "%s: cannot write %s: %s (see %s --help)\n", name, out,
				strerror(-err), name);
			return TALLY_EXIT_USAGE;
		}
	}
	c->o.cmd_stdout_to_stderr = !out;
	session_install_signals();
	rc = session_start(s, &c->o);
	if (rc) {
		outfile_abort(of);
		session_close(s);
	}
	return rc;
}

int cli_doc_end(const char *name, const char *what, const char *out, struct outfile *of, int err)
{
	if (out && !err)
		err = outfile_commit(of);
	else
		outfile_abort(of);
	if (err)
		fprintf(stderr, "%s: cannot write the %s%s%s: %s\n", name, what, out ? " to " : "",
			out ? out : "", strerror(-err));
	return err;
}
