/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally serve`'s heap profiles, /debug/pprof/heap and /debug/pprof/allocs,
 * as Go programs serve them (so that Parca or Pyroscope in pull mode scrape
 * tally as they scrape those): built on demand by the session's thread,
 * which owns the models, at its next tick after a request; the HTTP thread
 * waits for it a few seconds at most.
 */
#ifndef TALLY_SERVE_PPROF_H
#define TALLY_SERVE_PPROF_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../session/session.h"

struct serve_pprof {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool wanted;	 /* a request waits for a fresh profile */
	uint64_t gen;	 /* profiles built so far */
	uint8_t *buf[2]; /* heap (in use first), allocs (allocated first) */
	size_t len[2];
	bool failed;	   /* said once on stderr */
	uint64_t start_ns; /* the trace's start, for the duration */
};

void serve_pprof_init(struct serve_pprof *sp);
void serve_pprof_destroy(struct serve_pprof *sp);
/* The HTTP thread: a copy of the newest profile (allocs: the allocs
 * variant), after asking for a fresh one: 0, or -EAGAIN when none could be
 * had in time, -ENOMEM. */
int serve_pprof_get(struct serve_pprof *sp, bool allocs, uint8_t **out, size_t *len);
/* The session's thread: build one when asked (or `force`). */
void serve_pprof_tick(struct serve_pprof *sp, struct session *s, bool force);

#endif /* TALLY_SERVE_PPROF_H */
