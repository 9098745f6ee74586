// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's per-thread batches of records (internal.h),
 * handed over through the tally:batch probe, as libtally_alloc's are.
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../bpf/contract/tally_events.h"
#include "internal.h"
#include "../common/probes.h"
#include "../common/ring.h"

/* raised by the kernel while tally's probe is attached (interpose.c reads it) */
TALLY_SEMAPHORE(batch);

static struct ithread *_Atomic ip_threads;
static _Atomic uint64_t ip_heap_ids;
__thread struct ip_tls ip_tls = { .group = -1 };
bool ip_locking;
static pthread_key_t ip_key; /* the thread's exit: its batch handed over */

/* The tracer's key for the shared rings: one per start (a new tracer gets
 * every ring announced again). */
uint64_t ip_ring_key;

/*
 * The tracer's cut at its end (user/session/inject_cut.c). Records a thread
 * still held when tally stopped reading were never handed over: a block one
 * thread allocated and another freed in the last tick showed as a free
 * without its allocation (python3 -m http.server under wrk: live -15040
 * bytes, and exact). tally writes a new number to cut_req; the library's
 * thread (ip_cut_take) stops every thread at its next record, hands over
 * every batch, then drops whatever is recorded later under this start, and
 * writes the number to cut_done: tally takes the ring up to there, a
 * consistent moment (a free whose allocation came after the cut is after it
 * too: its thread saw the claim first).
 */
IP_API _Atomic uint64_t tally_interpose_cut_req, tally_interpose_cut_done;
static _Atomic uint64_t cut_key; /* the start (ip_ring_key) cut: nothing more is handed over */
static _Atomic uint8_t cutting;	 /* a thread new to the list waits while it is 1 */

/* Hand the batch over: in the thread's shared ring once the tracer has
 * taken it, else through the probe. A thread whose batches fill (`full`)
 * gets a ring, announced in a batch of its own, as libtally_alloc's heaps
 * do (alloc/common/ring.c). */
static void handover(struct ithread *t, bool full)
{
	struct tally_batch *b = &t->batch;
	uint64_t key = __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED);

	if (!b->count)
		return;
	if (unlikely(atomic_load_explicit(&cut_key, memory_order_relaxed) == key)) {
		/* past the tracer's cut: it reads no more of this start */
		t->seq += b->count;
		b->count = 0;
		return;
	}
	size_t bytes = tally_batch_seal(b, TALLY_SRC_INTERPOSE, t->tid, t->heap_id, t->seq);
	if (probe_guard_ok() && !ring_put(&t->ring, key, b, bytes))
		STAP_PROBE2(tally, batch, b, bytes);
	t->seq += b->count;
	b->count = 0;
	/* (the ring, announced, is not the tracer's yet: the probe takes it) */
	if (full && ring_wanted(&t->ring, key) && probe_guard_ok() &&
	    ring_announce(&t->ring, key, t->heap_id, b))
		handover(t, false);
}

static void batch_give(struct ithread *t);
static struct ithread *batch_enter(struct ithread *t);

/* The calling thread's own batch, handed over. */
static void own_flush(struct ithread *t)
{
	batch_enter(t);
	handover(t, false);
	batch_give(t);
}

static void thread_exit(void *p)
{
	struct ithread *t = p;

	own_flush(t);
	atomic_store_explicit(&t->used, 0, memory_order_relaxed);
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
		t = ip_map(sizeof(*t));
		if (!t)
			return NULL;
		t->used = 1;
		t->heap_id = atomic_fetch_add(&ip_heap_ids, 1) + 1;
		for (int i = 0; i < IP_REGIONS; i++)
			t->region_key[i] = UINTPTR_MAX;
		t->next = atomic_load(&ip_threads);
		while (!atomic_compare_exchange_weak(&ip_threads, &t->next, t))
			;
		/* linked before `cutting` is read (both seq_cst): either the cut's
		 * walk claims it, or it waits for the cut, before its first record */
		while (atomic_load(&cutting))
			;
	}
	t->tid = (uint32_t)syscall(SYS_gettid);
	ip_tls.me = t;
	/* (glibc's calloc, for keys past the first few: passed on, ip_depth) */
	pthread_setspecific(ip_key, t);
	return t;
}

/* The owner's side: the batch is its own until batch_give. */
static struct ithread *batch_enter(struct ithread *t)
{
	if (unlikely(ip_locking)) {
		while (atomic_exchange_explicit(&t->claimed, 1, memory_order_acquire))
			;
		return t;
	}
	/* while the flusher hands it over: a few microseconds */
	while (fence_enter(&t->busy, &t->claimed))
		while (atomic_load_explicit(&t->claimed, memory_order_acquire))
			;
	return t;
}

/* The calling thread's batch, its own, with room for `words`; NULL when the
 * thread has none and cannot get one. */
static struct ithread *batch_take(uint32_t words)
{
	struct ithread *t = ip_tls.me;

	if (unlikely(!t) && !(t = thread_get()))
		return NULL;
	batch_enter(t);
	if (t->batch.count + words > TALLY_BATCH_WORDS)
		handover(t, true);
	return t;
}

static void batch_give(struct ithread *t)
{
	fence_leave(unlikely(ip_locking) ? &t->claimed : &t->busy);
}

void ip_put_word_slow(uint8_t type, uint16_t group, uint64_t q, uint64_t usable)
{
	struct ithread *t;

	if (q <= TALLY_EV_WORD_MAX && usable <= TALLY_EV_WORD_MAX) {
		if (!(t = batch_take(1)))
			return;
		t->batch.words[t->batch.count++] =
			tally_ev_word(type, group, (uint32_t)q, (uint32_t)usable);
	} else {
		struct tally_ev e = {
			.type = type == TALLY_EV_ALLOC ? TALLY_EV_LARGE_ALLOC : TALLY_EV_LARGE_FREE,
			.group = group,
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

/* Hand over the batches of every thread not appending now (one that is
 * hands its own over when full); `wait`: every thread's. */
void ip_flush_all(bool wait)
{
	struct ithread *t;

	if (ip_locking) {
		for (t = atomic_load(&ip_threads); t; t = t->next) {
			uint8_t no = 0;
			if (!atomic_compare_exchange_strong(&t->claimed, &no, 1)) {
				if (!wait)
					continue;
				batch_enter(t);
			}
			handover(t, false);
			atomic_store_explicit(&t->claimed, 0, memory_order_release);
		}
		return;
	}
	bool any = false;
	for (t = atomic_load(&ip_threads); t; t = t->next) {
		if (t->batch.count && t != ip_tls.me) {
			atomic_store_explicit(&t->claimed, 1, memory_order_relaxed);
			any = true;
		}
	}
	if (!any || fence_heavy()) {
		/* (the barrier cannot fail once registered; if it does, no claim
		 * stands) */
		for (t = atomic_load(&ip_threads); t; t = t->next)
			atomic_store_explicit(&t->claimed, 0, memory_order_release);
		if (ip_tls.me && ip_tls.me->batch.count)
			own_flush(ip_tls.me);
		return;
	}
	for (t = atomic_load(&ip_threads); t; t = t->next) {
		if (!atomic_load_explicit(&t->claimed, memory_order_relaxed))
			continue;
		bool busy = atomic_load_explicit(&t->busy, memory_order_acquire);
		while (busy && wait)
			busy = atomic_load_explicit(&t->busy, memory_order_acquire);
		if (!busy)
			handover(t, false);
		atomic_store_explicit(&t->claimed, 0, memory_order_release);
	}
	if (ip_tls.me && ip_tls.me->batch.count)
		own_flush(ip_tls.me);
}

int ip_batch_init(void)
{
	int err = pthread_key_create(&ip_key, thread_exit);

	if (err)
		return -err;
	ip_locking = fence_register() != 0;
	return 0;
}

void ip_batch_child(bool drop)
{
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next) {
		atomic_store(&t->busy, 0);
		atomic_store(&t->claimed, 0);
		ring_fork_child(&t->ring);
		/* the parent's other threads are not in the child */
		if (t != ip_tls.me)
			atomic_store(&t->used, 0);
		if (drop)
			t->batch.count = 0;
	}
}

bool ip_cut_asked(void)
{
	return atomic_load_explicit(&tally_interpose_cut_req, memory_order_acquire) !=
	       atomic_load_explicit(&tally_interpose_cut_done, memory_order_relaxed);
}

static void release_all(void)
{
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next)
		atomic_store_explicit(&t->claimed, 0, memory_order_release);
	atomic_store(&cutting, 0);
}

/* Every thread stopped at its next record: claimed (the lock, without
 * membarrier), and with the barrier each owner either sees the claim or is
 * seen busy and is waited for. 0, or -errno without the barrier (none
 * claimed then). */
static int claim_all(void)
{
	struct ithread *t;
	int err;

	atomic_store(&cutting, 1);
	for (t = atomic_load(&ip_threads); t; t = t->next) {
		if (ip_locking)
			while (atomic_exchange_explicit(&t->claimed, 1, memory_order_acquire))
				;
		else
			atomic_store_explicit(&t->claimed, 1, memory_order_relaxed);
	}
	if (!ip_locking && (err = fence_heavy())) {
		release_all();
		return err;
	}
	for (t = atomic_load(&ip_threads); t; t = t->next)
		while (!ip_locking && atomic_load_explicit(&t->busy, memory_order_acquire))
			;
	return 0;
}

void ip_cut_take(void)
{
	uint64_t req = atomic_load_explicit(&tally_interpose_cut_req, memory_order_acquire);

	/* no answer without the barrier: tally then says the end is not exact */
	if (claim_all())
		return;
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next)
		handover(t, false);
	atomic_store(&cut_key, __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED));
	release_all();
	atomic_store_explicit(&tally_interpose_cut_done, req, memory_order_release);
}

/* Records a batch still holds from an earlier tracer's time (after its cut,
 * or after its last tick and before its detach) are not the new one's: a
 * second injection took a previous one's last frees (python3's http.server
 * injected again and again: live -2048 bytes). */
void ip_batch_restart(void)
{
	if (claim_all())
		return;
	for (struct ithread *t = atomic_load(&ip_threads); t; t = t->next)
		t->batch.count = 0;
	release_all();
}
