// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Handing a heap's batch of records to whoever traces: one USDT probe,
 * tally:batch(batch, bytes), per TALLY_BATCH_RECS records, at ticks, at thread
 * exit and at tally_alloc_collect. Records are only written while the probe's
 * semaphore says a tracer is attached (internal.h: ev()).
 *
 * The test build (TALLY_ALLOC_TEST_SINK) hands every batch to a function of
 * the test instead, with recording always on, to prove the stream complete.
 */
#include <stddef.h>

#include "internal.h"

#if defined(TALLY_ALLOC_TEST_SINK)
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
#elif !defined(TALLY_NO_PROBES)
#include "probes.h"
TALLY_SEMAPHORE(batch);
#endif

void ev_flush(struct heap *h)
{
	struct tally_batch *b = &h->batch;

	if (!b->count)
		return;
	b->magic = TALLY_BATCH_MAGIC;
	b->version = TALLY_BATCH_VERSION;
	b->source = TALLY_SRC_ALLOC;
	b->tid = h->tid;
	b->heap_id = h->id;
	b->seq_first = h->seq;
	size_t bytes = offsetof(struct tally_batch, recs) + (size_t)b->count * sizeof(b->recs[0]);
#if defined(TALLY_ALLOC_TEST_SINK)
	tally_alloc_test_sink(b, bytes);
#elif !defined(TALLY_NO_PROBES)
	STAP_PROBE2(tally, batch, b, bytes);
#else
	(void)bytes;
#endif
	h->seq += b->count;
	b->count = 0;
	h->last_flush_ms = h->now_ms;
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
