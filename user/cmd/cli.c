// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The loop that drives a session for every tally command (cli.h); the
 * command-line parsers are in cli_parse.c. */
#include "cli.h"

int cli_run(struct session *s, const struct cli_target *t, int tick_ms,
	    int (*tick)(struct session *s, void *ctx), void *ctx)
{
	uint64_t deadline = t->secs > 0 ? s->start_ns + (uint64_t)(t->secs * 1e9) : 0;
	uint64_t next_tick = tick_ms > 0 ? clock_now_ns() + (uint64_t)tick_ms * 1000000 : 0;
	int rc = 0;

	while (!session_exiting) {
		/* 2 ms: a busy allocator fills a few MiB of ring in tens of ms */
		if (session_poll(s, 2))
			break;
		uint64_t now = clock_now_ns();
		if (deadline && now >= deadline)
			break;
		if (next_tick && now >= next_tick) {
			next_tick = now + (uint64_t)tick_ms * 1000000;
			session_cut_begin(s);
			session_refresh(s);
			rc = session_cut_shown(s) ? tick(s, ctx) : 0;
			session_cut_end(s);
			if (rc)
				break;
		}
	}
	return rc;
}
