// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * timing (timing.h): the phases kept in a small table, under a lock (a
 * BPF object may load on a thread of its own), printed in the order they
 * began. Tally's start is this file's constructor: after the dynamic
 * loader, before main; what came before it (the exec, the libraries'
 * mapping) only a clock outside tally sees (scripts/bench-startup.sh).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clock.h"
#include "timing.h"

#define TIMING_MAX 64

struct timing_phase {
	const char *name; /* a string literal: kept, not copied */
	uint64_t t0, t1;  /* CLOCK_MONOTONIC ns, t0 <= t1 */
	bool span;	  /* outside the main sequence: shown indented */
};

static struct {
	pthread_mutex_t lock;
	bool on;
	uint64_t start; /* tally's start: the constructor */
	uint64_t last;	/* the main sequence's last mark */
	unsigned n;
	struct timing_phase p[TIMING_MAX];
} timing = { .lock = PTHREAD_MUTEX_INITIALIZER };

uint64_t timing_now(void)
{
	return clock_now_ns();
}

__attribute__((constructor)) static void timing_init(void)
{
	const char *e = getenv("TALLY_TIMING");

	timing.start = timing.last = timing_now();
	timing.on = e && *e && strcmp(e, "0");
}

void timing_enable(bool on)
{
	timing.on = timing.on || on;
}

bool timing_on(void)
{
	return timing.on;
}

static void timing_add(const char *name, uint64_t t0, uint64_t t1, bool span)
{
	pthread_mutex_lock(&timing.lock);
	if (timing.n < TIMING_MAX)
		timing.p[timing.n++] = (struct timing_phase){ name, t0, t1, span };
	if (!span)
		timing.last = t1;
	pthread_mutex_unlock(&timing.lock);
}

void timing_mark(const char *phase)
{
	if (timing.on)
		timing_add(phase, timing.last, timing_now(), false);
}

void timing_span_to(const char *phase, uint64_t t0, uint64_t t1)
{
	if (timing.on)
		timing_add(phase, t0, t1, true);
}

void timing_span(const char *phase, uint64_t t0)
{
	timing_span_to(phase, t0, timing_now());
}

static int by_start(const void *a, const void *b)
{
	const struct timing_phase *x = a, *y = b;

	if (x->t0 != y->t0)
		return x->t0 < y->t0 ? -1 : 1;
	/* a span that begins with a mark's phase is a part of it: after it */
	return (int)x->span - (int)y->span;
}

static double ms(uint64_t ns)
{
	return (double)ns / 1e6;
}

void timing_report(void)
{
	if (!timing.on)
		return;
	pthread_mutex_lock(&timing.lock);
	qsort(timing.p, timing.n, sizeof(timing.p[0]), by_start);
	for (unsigned i = 0; i < timing.n; i++) {
		const struct timing_phase *p = &timing.p[i];
		fprintf(stderr, "tally: timing: %s%-*s %8.1f ms  (%.1f .. %.1f)\n",
			p->span ? "  " : "", p->span ? 34 : 36, p->name, ms(p->t1 - p->t0),
			ms(p->t0 - timing.start), ms(p->t1 - timing.start));
	}
	fprintf(stderr, "tally: timing: %-36s %8.1f ms\n", "total (from tally's start)",
		ms(timing_now() - timing.start));
	timing.n = 0;
	timing.on = false;
	pthread_mutex_unlock(&timing.lock);
}
