/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What heap profiles need in any library that samples (sample_util.c):
 * libtally_alloc's heaps (sample.c) and libtally_interpose.so's threads.
 * The gaps between samples, the stack of a sample, and the objects its
 * frames lie in, each announced to a tracer once.
 */
#ifndef TALLY_ALLOC_SAMPLE_UTIL_H
#define TALLY_ALLOC_SAMPLE_UTIL_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"

/* A sampled block's birth, for its lifetime: CLOCK_MONOTONIC ns. */
uint64_t sample_clock_ns(void);
/* SAMPLE_FREE's n for a block born at born_ns (bpf/contract/tally_events.h). */
static inline uint32_t sample_life_n(uint64_t born_ns, uint64_t now_ns)
{
	uint64_t us = now_ns > born_ns ? (now_ns - born_ns) / 1000 : 0;
	return us >= UINT32_MAX - 1 ? UINT32_MAX : (uint32_t)us + 1;
}

/* The bytes until the next sample: exponential with mean `rate` (>0),
 * drawn from the xorshift64* state *rng (nonzero). */
int64_t sample_gap(uint64_t *rng, uint64_t rate);
/* The unbiased weight of a block of q bytes sampled at rate (a block is
 * sampled with probability 1 - exp(-q/rate)): q / (1 - exp(-q/rate)),
 * rounded to bytes; the tracer's model uses the same (sites_weight), and
 * q at rate 1 (every block sampled) or 0. */
uint64_t sample_weight(uint64_t q, uint64_t rate);

/* The calling thread's stack, the caller's frame first, frames inside this
 * library's code (the section tally_text) left out while they lead: the
 * number of return addresses put in pcs. The unwinder may allocate. */
unsigned sample_backtrace(uint64_t pcs[TALLY_SAMPLE_FRAMES_MAX]);

/* The objects announced to the current tracer. */
#define SAMPLE_MODS_MAX 512
struct sample_mods {
	unsigned n;
	uint64_t epoch; /* the tracer's: another starts over */
	struct {
		const void *lm; /* its struct link_map */
		uintptr_t start;
	} v[SAMPLE_MODS_MAX];
	char self_exe[TALLY_MODULE_PATH_MAX]; /* the program's path (its link_map has none) */
};
/* For each object of the frames in pcs the tracer of `epoch` has not heard
 * of: its TALLY_EV_MODULE record (e) and the words after it (extra, at
 * most 2 + TALLY_MODULE_PATH_MAX / 8 + 1) handed to put. */
void sample_announce(struct sample_mods *m, uint64_t epoch, const uint64_t *pcs, unsigned n,
		     void (*put)(void *ctx, const struct tally_ev *e, const uint64_t *extra,
				 uint32_t nextra),
		     void *ctx);

#endif /* TALLY_ALLOC_SAMPLE_UTIL_H */
