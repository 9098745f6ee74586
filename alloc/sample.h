/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Heap profiles by call site (sample.c, docs/DESIGN.md §7): while a tracer is
 * attached, each heap counts down the bytes its thread allocates; when the
 * count goes below zero the block is sampled (its stack unwound and handed
 * over in a TALLY_EV_SAMPLE record) and the next gap is drawn from an
 * exponential distribution of mean tally_sample_rate. A sampled block is
 * remembered by address, and its span flagged, so that its free is reported
 * (TALLY_EV_SAMPLE_FREE). Untraced, none of this runs.
 */
#ifndef TALLY_ALLOC_SAMPLE_H
#define TALLY_ALLOC_SAMPLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "heap.h"
#include "span.h"

#define SAMPLE_RATE_DEFAULT (512u << 10)

/* Mean bytes between two samples; 0: no sampling. TALLY_SAMPLE_RATE sets it
 * at start, and tally writes it into a running process at attach. */
extern uint64_t tally_sample_rate __attribute__((visibility("default")));
/* Written by each tracer that attaches to a running process: the objects
 * announced to an earlier one are announced again. */
extern uint64_t tally_sample_epoch __attribute__((visibility("default")));

void sample_init(void);
/* A heap's first gap (heap_new_locked), and a new one when the rate changed
 * (ev_flush, the owner only). */
void sample_redraw(struct heap *h);
/* The countdown went below zero at block p (a slot's start or a large
 * mapping) of q bytes charged to group: the gap's rate is kept, a new gap
 * drawn, the block taken as the heap's pending sample, which sample_run
 * completes once the thread is out of the allocator's operation. */
void sample_mark(struct heap *h, void *p, size_t q, uint16_t group, bool large);
static inline void sample_count(struct heap *h, void *p, size_t q, uint16_t group, bool large)
{
	h->sample_left -= (int64_t)q;
	if (__builtin_expect(h->sample_left < 0, 0))
		sample_mark(h, p, q, group, large);
}
/* The pending sample: its stack unwound (outside any operation, as the
 * unwinder may itself allocate), then its record and its mark. */
void sample_run(struct heap *h);
/* A traced free of block p, in a span flagged sampled or large: its
 * SAMPLE_FREE record if it was sampled. */
void sample_forget(struct heap *h, void *p);
/* A traced free of the block at slot p of span sp: sample_forget, when it
 * may have been sampled. */
static inline void sample_freeing(struct heap *h, const struct span *sp, void *p)
{
	uint32_t cell = (uint32_t)(span_cell_product(sp, p) >> 32);

	if (__builtin_expect(span_sample_maybe(sp, cell), 0) && span_sample_hit(sp, cell))
		sample_forget(h, p);
}
/* The same from the traced free fast path (its own short operation), which
 * then goes on. */
__attribute__((noinline, cold)) void sample_forget_fast(void *p);
/* A traced realloc of block p to np, q bytes, in place or not: for the
 * profile, a free and an allocation. */
static inline void sample_resized(struct heap *h, void *p, void *np, size_t q, uint16_t group,
				  bool large)
{
	if (large || span_of(p)->sampled)
		sample_forget(h, p);
	sample_count(h, np, q, group, large);
}
void sample_lock_prepare(void);
void sample_lock_release(void);
uint64_t sample_resident(void);

#endif /* TALLY_ALLOC_SAMPLE_H */
