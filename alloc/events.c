// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Handing a heap's batch of records to whoever traces: one USDT probe,
 * tally:batch(batch, bytes), per TALLY_BATCH_WORDS words of records, at ticks, at thread
 * exit and at tally_alloc_collect. Records are only written while the probe's
 * semaphore says a tracer is attached (internal.h: ev()).
 *
 * The test build (TALLY_ALLOC_TEST_SINK) hands every batch to a function of
 * the test instead, with recording always on, to prove the stream complete.
 */
#include <stddef.h>

#include "internal.h"
#include "purge.h"

#if defined(TALLY_ALLOC_TEST_SINK)
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
#elif !defined(TALLY_NO_PROBES)
#include "probes.h"
#include "sample.h"
/* tally:batch's semaphore is part of tally_arena (segment.c) */
TALLY_SEMAPHORE_REF(batch);
TALLY_SEMAPHORE(stats);

/* The tracer's key: a new tracer writes another sampling epoch at its
 * attach (session_sample.c), and gets the heaps' rings announced again. */
static uint64_t ring_key(void)
{
	return __atomic_load_n(&tally_sample_epoch, __ATOMIC_RELAXED) + 1;
}

/* A child (probe_guard.c; single-threaded, glibc's fork or a raw one) lets
 * go of its parent's shared rings. One nobody can trace drops the records
 * it inherited: its parent hands them over itself. One that can be traced
 * keeps them: a tracer that follows it counts them in it too. */
static void ev_child(bool traced)
{
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		ring_fork_child(&h->ring);
		if (!traced) {
			h->seq += h->batch.count;
			h->batch.count = 0;
		}
	}
}

__attribute__((constructor)) static void ev_init(void)
{
	probe_guard_init(ev_child);
}
#endif

/* Hand the batch over, in the ring when the tracer has taken it, else
 * through the probe (in a child nobody traces, it is dropped). */
static void ev_handover(struct heap *h, struct tally_batch *b)
{
	size_t bytes = tally_batch_seal(b, TALLY_SRC_ALLOC, h->tid, h->id, h->seq);
#if defined(TALLY_ALLOC_TEST_SINK)
	tally_alloc_test_sink(b, bytes);
#elif !defined(TALLY_NO_PROBES)
	if (probe_guard_ok() && !ring_put(&h->ring, ring_key(), b, bytes))
		STAP_PROBE2(tally, batch, b, bytes);
#else
	(void)bytes;
#endif
	h->seq += b->count;
	b->count = 0;
	h->last_flush_ms = h->now_ms;
}

void ev_flush(struct heap *h)
{
	struct tally_batch *b = &h->batch;

	/* tally wrote another rate (at its attach): a new gap, by the owner */
	if (unlikely(h->sample.rate != tally_sample_rate) && h == tally_tls_heap)
		sample_redraw(h);
	if (!b->count)
		return;
	/* (a two-word record may leave the last word empty) */
	bool full = b->count >= TALLY_BATCH_WORDS - 1;
	ev_handover(h, b);
#if !defined(TALLY_ALLOC_TEST_SINK) && !defined(TALLY_NO_PROBES)
	/* a heap that fills batches gets a ring, announced in a batch of its
	 * own (the tracer looks for it first in one) */
	if (full && ring_wanted(&h->ring, ring_key()) && probe_guard_ok() &&
	    ring_announce(&h->ring, ring_key(), h->id, b))
		ev_handover(h, b);
#else
	(void)full;
#endif
}

#if defined(TALLY_ALLOC_TEST_SINK)
/* Tests, at a quiescent point (no thread inside the allocator): hand over
 * every heap's pending records, so the replay has seen all there is. */
void tally_alloc_test_flush_all(void);
void tally_alloc_test_flush_all(void)
{
	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h; h = h->all_next)
		ev_flush(h);
	pthread_mutex_unlock(&tally_heaps_lock);
}
#endif

#if !defined(TALLY_ALLOC_TEST_SINK) && !defined(TALLY_NO_PROBES)
/* Resident bytes of all the allocator's mappings: heaps, their bin tables,
 * segments, large mappings; the figure /proc/PID/smaps gives over them. */
static uint64_t ev_resident(void)
{
	size_t hlen = (sizeof(struct heap) + OS_PAGE - 1) & ~(OS_PAGE - 1);
	size_t blen = (sizeof(struct bin) * CLASS_COUNT + OS_PAGE - 1) & ~(OS_PAGE - 1);
	uint64_t bytes = large_resident() + sample_resident();

	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		bytes += os_resident(h, hlen);
		for (unsigned g = 1; g < TALLY_MAX_GROUPS; g++)
			if (h->gbins[g])
				bytes += os_resident(h->gbins[g], blen);
		for (struct segment *seg = h->segs; seg; seg = seg->next)
			bytes += os_resident(seg, SEGMENT_SIZE);
	}
	return bytes;
}

/* The other live threads' positions in their record streams (seq + the
 * words they hold), summed: records they hold, or add while the figures are
 * read, are in the figures and not in the tracer's rebuild. */
static uint64_t others_held(const struct heap *self, bool *held)
{
	uint64_t sum = 0;

	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		if (h == self || h->orphaned || h == tally_purge_heap)
			continue;
		uint32_t n = __atomic_load_n(&h->batch.count, __ATOMIC_ACQUIRE);
		*held |= n != 0;
		sum += __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) + n;
	}
	return sum;
}

/*
 * At exit, while traced: hand over the pending records of the calling
 * thread's heap and of every orphaned heap (threads still running keep
 * theirs), then the allocator's own figures, which the tracer reports as
 * stats_inprocess beside its rebuild. The library is preloaded or linked, so
 * this destructor runs after the program's own. When exit() comes while other
 * threads hold records, or make some meanwhile, the figures include what the
 * tracer will never receive: the hand-over says so (TALLY_STATS_THREADS_HELD)
 * and the tracer calls its figures inexact.
 */
__attribute__((destructor)) static void ev_exit_handover(void)
{
	struct heap *self = tally_tls_heap;
	struct tally_stats st;
	uint64_t resident;

	if ((!tally_stats_semaphore && !ev_tracing()) || !probe_guard_ok())
		return;
	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h; h = h->all_next)
		if (h == self || h->orphaned)
			ev_flush(h);
	pthread_mutex_unlock(&tally_heaps_lock);
	bool held = false;
	pthread_mutex_lock(&tally_heaps_lock);
	uint64_t before = others_held(self, &held);
	pthread_mutex_unlock(&tally_heaps_lock);
	if (tally_alloc_stats(&st))
		return;
	pthread_mutex_lock(&tally_heaps_lock);
	resident = ev_resident();
	held |= others_held(self, &held) != before;
	pthread_mutex_unlock(&tally_heaps_lock);
	uint64_t flags = held ? TALLY_STATS_THREADS_HELD : 0;
	uint64_t v[TALLY_STATS_FIELDS];
	tally_stats_to_array(&st, v);
	STAP_PROBE3(tally, stats, v, resident, flags);
}
#endif
