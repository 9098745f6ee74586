/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The allocator's internal interface, one header per concern, from the
 * bottom up:
 *
 *   layout.h   geometry, size classes and the per-slot metadata
 *   os.h       the OS layer (os.c)
 *   span.h     a span's descriptor and its arithmetic (span.c)
 *   segment.h  segments, the arena and the segment map (segment.c)
 *   bin.h      the lists spans are on (bin.c)
 *   heap.h     heaps and their counters (heap.c)
 *   debug.h    the debug build's invariant checks (span_check.c)
 *
 * and, here, large blocks (large.c) and the records handed to a tracer
 * (events.c). The identity these keep is docs/DESIGN.md §2's.
 */
#ifndef TALLY_ALLOC_INTERNAL_H
#define TALLY_ALLOC_INTERNAL_H

#include "layout.h"
#include "os.h"
#include "span.h"
#include "segment.h"
#include "bin.h"
#include "heap.h"
#include "debug.h"
#include "sample.h"

/* large.c */
void *large_alloc(struct heap *h, size_t q, size_t align, bool zero);
bool large_free(struct heap *h, void *p, size_t expect_q);
bool large_size(const void *p, size_t *q, size_t *len);
void *large_realloc(struct heap *h, void *p, size_t q);
void *large_alloc_internal(struct heap *h, size_t q, size_t align);
bool large_is_internal(const void *p);
void large_sweep(struct heap *h, bool force);
uint64_t large_due(void);
void large_lock_prepare(void);
void large_lock_release(void);
uint64_t large_resident(void);

/* events.c: one record, when someone traces (else one branch) */
#if defined(TALLY_ALLOC_TEST_SINK)
#define ev_tracing() 1
#elif defined(TALLY_NO_PROBES)
#define ev_tracing() 0
#else
extern unsigned short tally_batch_semaphore __attribute__((visibility("hidden")));
#define ev_tracing() unlikely(tally_batch_semaphore != 0)
#endif
void ev_flush(struct heap *h);
/* The traced fast paths' record of malloc or free of n bytes: one word from
 * the span's template, no second look at the semaphore (their caller
 * looked). True when the batch is full: the caller flushes it, last, so that
 * the fast path keeps no register across a call. */
static inline uint64_t span_ev_template(uint16_t group, uint32_t size)
{
	return tally_ev_word(0, group, 0, size);
}
static inline __attribute__((always_inline)) bool ev_word(struct heap *h, const struct span *sp,
							  uint8_t type, uint32_t n)
{
	struct tally_batch *b = &h->batch;
	b->words[b->count] = sp->ev_tmpl | tally_ev_word(type, 0, n, 0);
	return ++b->count == TALLY_BATCH_WORDS;
}
static inline void ev(struct heap *h, uint8_t type, uint8_t term, uint16_t group, uint32_t n,
		      uint64_t bytes)
{
	if (!ev_tracing())
		return;
	struct tally_batch *b = &h->batch;
	struct tally_ev e = { type, term, group, n, bytes };
	/* a two-word record is never split across batches */
	if (!tally_ev_is_word(type) && b->count + 2 > TALLY_BATCH_WORDS)
		ev_flush(h);
	tally_ev_put(b->words, &b->count, &e);
	if (b->count == TALLY_BATCH_WORDS)
		ev_flush(h);
}

/*
 * cut.c: the hand-over of a cut (docs/DESIGN.md §8). The tracer writes a
 * request into tally_cut.req (a fresh number, shifted left by one; the low
 * bit, CUT_FIGURES, asks for each heap's figures as well). The owner of a
 * heap answers at the start of its next operation, before the operation
 * touches anything: where its stream stands, and with CUT_FIGURES its
 * figures there. Whoever changes an orphan (a thread that sweeps or adopts
 * it) answers for it first; the purger waits for an owned heap's answer
 * (purge.c). Only while traced: untraced, the fast paths keep their one
 * branch.
 */
#define CUT_FIGURES 1ULL
/* The tracer's words (symbol tally_cut): req, the request; done, the last
 * request whose every heap it has read (the purger sweeps a heap that has
 * not answered only after that: purge.c). */
struct tally_cut {
	uint64_t req;
	uint64_t done;
};
extern struct tally_cut tally_cut;
/* tally_cut.req as one load from its own name (an atomic load of the
 * struct's field took two instructions: an lea, then the load) */
extern volatile uint64_t tally_cut_now __attribute__((visibility("hidden")));
void cut_answer(struct heap *h, uint64_t req);
/* The request now, for an owner that looks at it (acquire: nothing of the
 * operation that follows is done before the look). */
static inline __attribute__((always_inline)) uint64_t cut_req(void)
{
	return __atomic_load_n(&tally_cut.req, __ATOMIC_ACQUIRE);
}
/* Whether h has a request to answer (tally_heap_none, which no reader
 * walks, answers nothing): the traced fast paths' test, whose answer is a
 * tail call so that they keep no register across it (callgrind: 151.7
 * instructions a recorded pair, 143.7 without the test; inline, with an
 * acquire load, 167.7). A relaxed load, which
 * the compiler may share with the operation's own loads (an acquire made it
 * load the heap's pointer twice): the operation's stores depend on the
 * branch on it, and x86 keeps stores after earlier loads. */
static inline __attribute__((always_inline)) bool cut_due(const struct heap *h)
{
	return unlikely(tally_cut_now != h->cut_gen) && h != &tally_heap_none;
}
/* At the start of an operation on h, while traced. */
static inline __attribute__((always_inline)) void cut_poll(struct heap *h)
{
	if (cut_due(h))
		cut_answer(h, cut_req());
}
/* The start of a slow operation (op_begin) that looks at the request. */
static inline __attribute__((always_inline)) void op_start(struct heap *h)
{
	op_begin(h);
	if (ev_tracing())
		cut_poll(h);
}

#endif /* TALLY_ALLOC_INTERNAL_H */
