// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A heap's batch of records handed over (docs/DESIGN.md §5): ev_flush, at
 * ticks, at thread exit and at tally_alloc_collect, into the heap's shared
 * ring once the tracer has taken it (common/ring.c; a heap that fills
 * batches gets one), else through the tally:batch probe. At the process's
 * end, the exit hand-over: every heap's records, then the allocator's own
 * figures (tally:stats). Records are only written while the probe's
 * semaphore says a tracer is attached (internal.h: ev_tracing).
 *
 * The test build (TALLY_ALLOC_TEST_SINK) hands every batch to a function of
 * the test instead, with recording always on, to prove the stream complete.
 */
#include <stddef.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "internal.h"
#include "purge.h"

/* set by the exit hand-over once it has read the figures: records made
 * after it are in neither them nor the tracer's rebuild */
static _Atomic bool exit_final;

#if defined(TALLY_ALLOC_TEST_SINK)
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
#elif !defined(TALLY_NO_PROBES)
#include "common/probes.h"
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
static pid_t ev_pid; /* whose heaps these are: a vfork child shares them */
static _Atomic bool exit_begun;

static void ev_child(bool traced)
{
	int saved = errno;
	(void)fence_register_global(); /* cut.c: the child's memory is new */
	errno = saved;
	ev_pid = getpid();
	atomic_store_explicit(&exit_begun, false, memory_order_relaxed);
	atomic_store_explicit(&exit_final, false, memory_order_relaxed);
	for (struct heap *h = tally_heaps; h; h = h->all_next) {
		atomic_store_explicit(&h->handing, HAND_FREE, memory_order_relaxed);
		ring_fork_child(&h->ring);
		if (!traced) {
			h->seq += h->batch.count;
			h->batch.count = 0;
		}
	}
}

__attribute__((constructor)) static void ev_init(void)
{
	ev_pid = getpid();
	probe_guard_init(ev_child);
}
#endif

/* Hand the batch over, in the ring when the tracer has taken it, else
 * through the probe (in a child nobody traces, it is dropped). Not once the
 * exit hand-over has taken the heap's records (it handed over a copy) or
 * read the figures: those records are in neither. */
static void ev_handover(struct heap *h, struct tally_batch *b)
{
	uint8_t was = HAND_FREE;
	if (unlikely(!atomic_compare_exchange_strong_explicit(&h->handing, &was, HAND_OWNER,
							      memory_order_acquire,
							      memory_order_relaxed) ||
		     atomic_load_explicit(&exit_final, memory_order_acquire))) {
		if (was == HAND_FREE)
			atomic_store_explicit(&h->handing, HAND_FREE, memory_order_release);
		h->seq += b->count;
		b->count = 0;
		return;
	}
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
	atomic_store_explicit(&h->handing, HAND_FREE, memory_order_release);
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

/* Where a heap's records stand: handed over, and held in its batch. */
static uint64_t heap_pos(const struct heap *h)
{
	return __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE) +
	       __atomic_load_n(&h->batch.count, __ATOMIC_ACQUIRE);
}

/* The heaps from `first` down but self and the purger's (which the heaps'
 * lock keeps still: no purge passes once the exit began), their positions
 * summed: a change says some thread made records meanwhile. */
static uint64_t others_pos(struct heap *first, const struct heap *self)
{
	uint64_t sum = 0;

	for (struct heap *h = first; h; h = h->all_next)
		if (h != self && h != tally_purge_heap)
			sum += heap_pos(h);
	return sum;
}

/*
 * At exit, another thread's records, which it holds in its batch while it
 * runs on (memcached's workers hold a batch of slab allocations for ever:
 * 174 records of them reached tally, its figures 15x under the allocator's
 * own). The heap is taken from its owner for good (handing: an owner in the
 * middle of a hand-over is waited for, 10 ms at most), so that the owner
 * never hands these records over again; they go out as a copy, numbered
 * from the heap's position. The owner may still append: the words below the
 * count it published are written. *pos: where the records handed over end.
 * false: the owner did not let go, or is in the middle of a slow operation
 * (its records so far are handed over, the rest of them and its figures may
 * come after the figures are read).
 */
static bool ev_exit_take(struct heap *h, uint64_t *pos)
{
	static struct tally_batch copy; /* the exit hand-over runs once */
	uint8_t was = HAND_FREE;

	for (int i = 0; !atomic_compare_exchange_strong(&h->handing, &was, HAND_EXIT); i++) {
		if (was == HAND_EXIT || i == 1000)
			break;
		was = HAND_FREE;
		usleep(10);
	}
	*pos = heap_pos(h);
	if (was != HAND_FREE)
		return was == HAND_EXIT;
	uint32_t n = __atomic_load_n(&h->batch.count, __ATOMIC_ACQUIRE);
	uint64_t seq = __atomic_load_n(&h->seq, __ATOMIC_ACQUIRE);
	*pos = seq + n;
	if (n) {
		memcpy(copy.words, h->batch.words, n * sizeof(copy.words[0]));
		copy.count = n;
		size_t bytes = tally_batch_seal(&copy, TALLY_SRC_ALLOC, h->tid, h->id, seq);
		STAP_PROBE2(tally, batch, &copy, bytes);
	}
	return !__atomic_load_n(&h->busy, __ATOMIC_ACQUIRE);
}

/* The heaps' lock, at exit: from _exit, which a signal handler may call
 * while its own thread (or one stopped for good) holds it, tried for about
 * 100 ms and then given up. */
static bool exit_lock(bool from_exit)
{
	if (!from_exit)
		return pthread_mutex_lock(&tally_heaps_lock) == 0;
	for (int i = 0; i < 1000; i++) {
		if (pthread_mutex_trylock(&tally_heaps_lock) == 0)
			return true;
		usleep(100);
	}
	return false;
}

/* Whether this end may hand over: once, while traced, in the process whose
 * heaps these are (a vfork child that calls _exit shares its parent's), and
 * for _exit not from inside an operation of the allocator (a signal). */
static bool exit_may(bool from_exit)
{
	if ((!tally_stats_semaphore && !ev_tracing()) || !probe_guard_ok())
		return false;
	struct heap *self = tally_tls_heap;
	if (from_exit &&
	    (syscall(SYS_getpid) != ev_pid || (self != &tally_heap_none && self->busy)))
		return false;
	return !atomic_exchange(&exit_begun, true);
}

/* Every heap's records: the caller's and the orphans' flushed under the
 * heaps' lock, which the caller took and this lets go, the other threads'
 * taken (ev_exit_take). Returns where they end, summed as others_pos;
 * *held: some could not be taken. */
static uint64_t exit_records(struct heap *first, struct heap *self, bool *held)
{
	uint64_t handed = 0;

	for (struct heap *h = first; h; h = h->all_next)
		if (h == self || h->orphaned)
			ev_flush(h);
	pthread_mutex_unlock(&tally_heaps_lock);
	for (struct heap *h = first; h; h = h->all_next) {
		uint64_t pos;
		if (h == self || h == tally_purge_heap)
			continue;
		if (h->orphaned)
			pos = heap_pos(h);
		else if (!ev_exit_take(h, &pos))
			*held = true;
		handed += pos;
	}
	return handed;
}

/*
 * At the end, while traced (exit's destructors, or _exit and _Exit): every
 * heap's pending records (exit_records), then the allocator's own figures,
 * which the tracer reports as stats_inprocess beside its rebuild. The
 * library is preloaded or linked, so the destructor runs after the
 * program's own. When other threads made records meanwhile, the figures
 * include what the tracer never receives: the hand-over says so
 * (TALLY_STATS_THREADS_HELD) and the tracer calls its figures inexact.
 * Records made after the figures were read are handed over by nobody.
 */
static void exit_handover(bool from_exit)
{
	struct heap *self = tally_tls_heap;
	struct tally_stats st;
	bool held = false;

	if (!exit_may(from_exit))
		return;
	purge_stop_for_exit();
	if (!exit_lock(from_exit))
		return;
	struct heap *first = tally_heaps;
	uint64_t handed = exit_records(first, self, &held);
	if (tally_alloc_stats(&st) || !exit_lock(from_exit))
		return;
	uint64_t resident = ev_resident();
	held |= tally_heaps != first || others_pos(first, self) != handed;
	pthread_mutex_unlock(&tally_heaps_lock);
	atomic_store_explicit(&exit_final, true, memory_order_release);
	uint64_t v[TALLY_STATS_FIELDS];
	tally_stats_to_array(&st, v);
	STAP_PROBE3(tally, stats, v, resident, held ? TALLY_STATS_THREADS_HELD : 0);
}

__attribute__((destructor)) static void ev_exit_handover(void)
{
	exit_handover(false);
}

/* _exit and _Exit end a process without its destructors (dash ends every
 * sh -c so, python's os._exit and multiprocessing's workers too): the
 * hand-over first, then the system call glibc's would make. Untraced, only
 * the system call. */
TALLY_API __attribute__((noreturn)) void _exit(int status)
{
	exit_handover(true);
	for (;;)
		syscall(SYS_exit_group, status);
}

TALLY_API __attribute__((noreturn)) void _Exit(int status)
{
	_exit(status);
}
#endif
