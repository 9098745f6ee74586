// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's per-thread batches of records (interpose.h),
 * handed over through the tally:batch probe, as libtally_alloc's are.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../bpf/tally_events.h"
#include "interpose.h"
#include "probes.h"

/* raised by the kernel while tally's probe is attached (interpose.c reads it) */
TALLY_SEMAPHORE(batch);

/*
 * A thread's records. The owner appends under `lock` (a byte it takes with
 * one exchange, which the flusher only ever tries): the flusher hands over
 * the batch of a thread that went quiet, and at exit the library hands
 * over every thread's. A thread's struct outlives it (reused by the next
 * thread), so that the flusher never reads freed memory.
 */
struct ithread {
	struct tally_batch batch;
	_Atomic uint8_t lock;
	_Atomic uint8_t used; /* a live thread's */
	uint32_t tid;
	uint64_t heap_id;
	uint64_t seq;
	struct ithread *next; /* every struct, never unlinked */
};
static struct ithread *_Atomic ip_threads;
static _Atomic uint64_t ip_heap_ids;
static __thread struct ithread *ip_me;
static pthread_key_t ip_key; /* the thread's exit: its batch handed over */

static void handover(struct ithread *t)
{
	struct tally_batch *b = &t->batch;

	if (!b->count)
		return;
	size_t bytes = tally_batch_seal(b, TALLY_SRC_INTERPOSE, t->tid, t->heap_id, t->seq);
	if (probe_guard_ok())
		STAP_PROBE2(tally, batch, b, bytes);
	t->seq += b->count;
	b->count = 0;
}

static void thread_exit(void *p)
{
	struct ithread *t = p;

	while (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire))
		;
	handover(t);
	atomic_store_explicit(&t->used, 0, memory_order_relaxed);
	atomic_store_explicit(&t->lock, 0, memory_order_release);
}

static struct ithread *thread_get(void)
{
	struct ithread *t;

	for (t = atomic_load(&ip_threads); t; t = t->next) {
		uint8_t no = 0;
		if (atomic_compare_exchange_strong(&t->used, &no, 1))
			break;
	}
	if (!t) {
		t = mmap(NULL, sizeof(*t), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
			 0);
		if (t == MAP_FAILED)
			return NULL;
		t->used = 1;
		t->heap_id = atomic_fetch_add(&ip_heap_ids, 1) + 1;
		t->next = atomic_load(&ip_threads);
		while (!atomic_compare_exchange_weak(&ip_threads, &t->next, t))
			;
	}
	t->tid = (uint32_t)syscall(SYS_gettid);
	ip_me = t;
	/* (glibc's calloc, for keys past the first few: passed on, ip_depth) */
	pthread_setspecific(ip_key, t);
	return t;
}

/* The calling thread's batch, locked, with room for `words`; NULL when the
 * thread has none and cannot get one. */
static struct ithread *batch_take(uint32_t words)
{
	struct ithread *t = ip_me;

	if (unlikely(!t) && !(t = thread_get()))
		return NULL;
	while (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire))
		;
	if (t->batch.count + words > TALLY_BATCH_WORDS)
		handover(t);
	return t;
}

static void batch_give(struct ithread *t)
{
	atomic_store_explicit(&t->lock, 0, memory_order_release);
}

void ip_put_word(uint8_t type, uint64_t q, uint64_t usable)
{
	struct ithread *t;

	if (q <= TALLY_EV_WORD_MAX && usable <= TALLY_EV_WORD_MAX) {
		if (!(t = batch_take(1)))
			return;
		t->batch.words[t->batch.count++] =
			tally_ev_word(type, 0, (uint32_t)q, (uint32_t)usable);
	} else {
		struct tally_ev e = {
			.type = type == TALLY_EV_ALLOC ? TALLY_EV_LARGE_ALLOC : TALLY_EV_LARGE_FREE,
			.n = (uint32_t)(usable - q),
			.bytes = q,
		};
		if (!(t = batch_take(2)))
			return;
		tally_ev_put(t->batch.words, &t->batch.count, &e);
	}
	batch_give(t);
}

void ip_put_ev(const struct tally_ev *e, const uint64_t *extra, uint32_t nextra)
{
	struct ithread *t = batch_take(2 + nextra);

	if (!t)
		return;
	tally_ev_put(t->batch.words, &t->batch.count, e);
	memcpy(&t->batch.words[t->batch.count], extra, nextra * sizeof(*extra));
	t->batch.count += nextra;
	batch_give(t);
}

/* Hand over the batches of every thread whose lock is free (one that is
 * appending hands its own over when full). */
void ip_flush_all(bool wait)
{
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next) {
		if (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire)) {
			if (!wait)
				continue;
			while (atomic_exchange_explicit(&t->lock, 1, memory_order_acquire))
				;
		}
		handover(t);
		atomic_store_explicit(&t->lock, 0, memory_order_release);
	}
}

int ip_batch_init(void)
{
	return -pthread_key_create(&ip_key, thread_exit);
}

void ip_batch_child(bool drop)
{
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next) {
		atomic_store(&t->lock, 0);
		/* the parent's other threads are not in the child */
		if (t != ip_me)
			atomic_store(&t->used, 0);
		if (drop)
			t->batch.count = 0;
	}
}
