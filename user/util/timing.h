/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where tally's own time goes (TALLY_TIMING=1, or -v): its start up to the
 * target's first instruction (BTF, each BPF object's load, the attaches, the
 * exec) and its end (the drain, the output, the links let go), one line per
 * phase on stderr once the session is closed. Off, each call is one test of
 * a flag.
 */
#ifndef TALLY_TIMING_H
#define TALLY_TIMING_H

#include <stdbool.h>
#include <stdint.h>

/* On from here if TALLY_TIMING is set (not "0") or on is true (-v). */
void timing_enable(bool on);
bool timing_on(void);
/* CLOCK_MONOTONIC in ns: where a phase timed with timing_span begins. */
uint64_t timing_now(void);
/* The phase of the main sequence that ends now: from the last mark (or
 * tally's start) to now. */
void timing_mark(const char *phase);
/* A phase from t0 to now outside the main sequence: on another thread, or
 * a part of a phase marked later. */
void timing_span(const char *phase, uint64_t t0);
/* The same, from t0 to t1. */
void timing_span_to(const char *phase, uint64_t t0, uint64_t t1);
/* The phases so far on stderr, once; then nothing is kept. */
void timing_report(void);

#endif /* TALLY_TIMING_H */
