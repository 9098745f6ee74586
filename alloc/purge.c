// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The purger (docs/DESIGN.md §2): one thread per process, never one per
 * heap, that gives memory back while the program idles. It sweeps the heaps
 * whose owners no longer tick (a quiet thread, or one whose calls all take
 * the fast paths), the orphans and the large pool. The owner's paths take no
 * lock: the purger and each owner are the two sides of common/fence.h's
 * pair, and what the purger may touch, and when, is told beside purge_heap.
 */
#include <errno.h>
#include <linux/futex.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "purge.h"
#include "common/fence.h"

/* Started lazily, once the process has made this many spans reclaimable: a
 * process that never frees never has one. */
#define PURGE_START_KICKS 16	  /* about 1 MiB of spans that could go back */
#define PURGE_STACK (256UL << 10) /* ASan's frames, in the unit tests, are large */
#define PURGE_MIN_MS 10		  /* shortest wait between two passes */

enum purge_run {
	RUN_NEVER = 0, /* not started (in this process: a forked child starts anew) */
	RUN_STARTING = 1,
	RUN_RUNNING = 2,
	RUN_FAILED = 3, /* pthread_create refused: reclaim stays owner-driven */
};

_Atomic bool tally_purge_want;	   /* a kick asks for the thread; purge_poll starts it */
struct heap *tally_purge_heap;	   /* under tally_heaps_lock */
static _Atomic int purge_run;	   /* enum purge_run */
static _Atomic int purge_idle;	   /* futex word: 1 while the purger sleeps with nothing to do */
static _Atomic int purge_hold;	   /* tests: no purge while set */
static _Atomic bool purge_exiting; /* exit: no purge after the allocator's hand-over */
static bool purge_mb;		   /* membarrier registered (set before the thread starts) */

static uint64_t purge_interval_ms(void)
{
	uint64_t i = tally_purge_ms / 4; /* as often as an owner's ticks sweep */
	return i > PURGE_MIN_MS ? i : PURGE_MIN_MS;
}

static long futex(_Atomic int *word, int op, int val, const struct timespec *ts)
{
	return syscall(SYS_futex, (int *)word, op | FUTEX_PRIVATE_FLAG, val, ts, NULL, 0);
}

/*
 * Memory of h became reclaimable (a span dirty or empty, a large block
 * pooled), by whoever holds h. Wakes an idle purger; before the first start,
 * counts towards it. A kick must not start the thread itself: it comes from
 * inside an operation (purge_poll, at its end, does).
 */
void purge_kick(struct heap *h)
{
	int run = atomic_load_explicit(&purge_run, memory_order_relaxed);

	if (likely(run == RUN_RUNNING)) {
		/* The purger sets idle, passes a membarrier, then looks for work:
		 * the work this kick announces was stored before this load, so
		 * either the load sees idle or the purger sees the work. */
		if (unlikely(atomic_load_explicit(&purge_idle, memory_order_relaxed)) &&
		    atomic_exchange_explicit(&purge_idle, 0, memory_order_relaxed)) {
			int saved = errno;
			futex(&purge_idle, FUTEX_WAKE, 1, NULL);
			errno = saved;
		}
		return;
	}
	if (run == RUN_NEVER && ++h->purge_kicks >= PURGE_START_KICKS)
		atomic_store_explicit(&tally_purge_want, true, memory_order_relaxed);
}

/* The rare side's fence (common/fence.h): 0, or -errno (-EPERM, as the
 * kernel answers, where membarrier was not registered). */
static int purge_barrier(void)
{
	return purge_mb ? fence_heavy() : -EPERM;
}

/* Turn h's free fast path off (no span is the owner's), and with direct its
 * malloc fast path too. The fast paths only read these, a value of the
 * purger's only sends them to a slow path, and the owner restores them all in
 * heap_settle.
 * - Only slow operations write owner_tp: the flip comes after the first
 *   barrier has shown none under way, or its write could undo the flip. */
static void purge_flip(struct heap *h, bool direct)
{
	for (unsigned i = 0; direct && i < DIRECT_TOTAL; i++)
		__atomic_store_n(&h->direct[i], &tally_span_none, __ATOMIC_RELAXED);
	for (struct segment *seg = __atomic_load_n(&h->segs, __ATOMIC_ACQUIRE); seg;
	     seg = __atomic_load_n(&seg->next, __ATOMIC_ACQUIRE))
		for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++)
			__atomic_store_n(&seg->spans[i].owner_tp, (uintptr_t)PURGE_TP,
					 __ATOMIC_RELAXED);
}

static bool purge_owned(const struct heap *h)
{
	return !h->orphaned && h != tally_purge_heap;
}

/* Anything for a sweep to do, as far as a look without the owner's leave can
 * tell: a hint, read racily, that decides only whether to try. An owned heap
 * whose last purge left nothing it may touch waits for its owner
 * (purge_due_ms UINT64_MAX, until heap_settle). */
static bool purge_hint(const struct heap *h)
{
	if (purge_owned(h) && h->purge_due_ms == UINT64_MAX)
		return false;
	return __atomic_load_n(&h->dirty, __ATOMIC_RELAXED) ||
	       __atomic_load_n(&h->lru_head, __ATOMIC_RELAXED) ||
	       (!purge_owned(h) && atomic_load_explicit(&h->xspans, memory_order_relaxed));
}

/* The block the owner's free is at: in its TLS, at its thread pointer plus the
 * offset of ours (static TLS). Read through the kernel, which answers EFAULT
 * rather than a fault: a thread may end without its heap orphaned (when other
 * TLS destructors keep allocating after glibc's last round).
 * - free's fast path works on any span whose owner_tp is the thread's: it
 *   stores the block in tally_tls_freeing (release), then reads owner_tp
 *   (free.c). The purger flips every owner_tp, passes the second barrier
 *   and reads this: a free that read owner_tp before the owner's barrier
 *   stored its block before it, so this reads that block (or a later one,
 *   stored after the earlier free's stores: that free is over); a free
 *   after it finds the span not its own and takes the slow path.
 * - At most one free is under way (the owner is one thread), and the
 *   purger leaves its span alone. (A free interrupted by a signal handler
 *   that calls free is undefined already: free is not async-signal-safe.) */
static bool purge_read_freeing(const struct heap *h, void **out)
{
	uintptr_t off = (uintptr_t)&tally_tls_freeing - thread_pointer();
	struct iovec local = { out, sizeof(*out) };
	struct iovec remote = { (void *)(h->tp + off), sizeof(*out) };
	int saved = errno;
	long n = syscall(SYS_process_vm_readv, getpid(), &local, 1UL, &remote, 1UL, 0UL);

	errno = saved;
	return n == (long)sizeof(*out);
}

/* One owned heap, under tally_heaps_lock; ph counts and records. Returns
 * when to look at it again (UINT64_MAX: when it has work again). What the
 * purger may touch, and when:
 * - Slow operations (every path but the two fast ones, and the fast paths'
 *   own slow tails) run between op_begin and op_end, which set h->busy, and
 *   look at h->purge (heap_get, op_begin_tail) before they touch the heap.
 *   The purger sets h->purge = BUSY, passes a barrier, then reads h->busy:
 *   an operation under way at the barrier is seen busy (the purger pokes),
 *   and one that starts after it sees BUSY and waits in heap_settle for
 *   tally_heaps_lock, which the purger holds.
 * - malloc's fast path reads direct[], and touches the span it points at
 *   and, traced, h->batch. direct[] holds the bins' current spans, which
 *   only slow operations change: the purger leaves every current span
 *   alone, never writes h->batch, and counts and records what it moves in
 *   its own heap (h->acct), so it runs beside any number of these. They
 *   publish nothing.
 * - free's fast path: purge_flip, then purge_read_freeing.
 * - So the fast paths pay one store (free's), and nothing rests on timing:
 *   an owner preempted for any time inside an operation is seen busy, or
 *   leaves its span alone.
 * - After a sweep (heap_purge_sweep) the heap is FLIPPED: the owner's next
 *   free takes the slow path, and heap_settle gives the spans back to it. A
 *   poke (the owner was busy, or a barrier or the read of its block failed)
 *   turns direct[] off too and leaves the heap POKED: the owner's next call
 *   settles and sweeps it itself. */
static uint64_t purge_heap(struct heap *h, struct heap *ph, uint64_t now)
{
	if (!purge_owned(h))
		return UINT64_MAX;
	/* A cut (cut.c): the sweep's records are the purger's heap's, its
	 * changes h's, both past the cut. So it waits until the purger's own
	 * heap has answered the request, and h has too, or the tracer has read
	 * it (done). The purger never answers for h: the owner may be in a
	 * fast path beside it, and an answer is of no operation's middle. */
	uint64_t req = cut_req();
	if (ev_tracing() &&
	    (req != ph->cut_gen ||
	     (h->cut_gen != req && __atomic_load_n(&tally_cut.done, __ATOMIC_ACQUIRE) != req)))
		return now + purge_interval_ms();
	if (!purge_hint(h)) {
		if (h->purge_due_ms != UINT64_MAX)
			h->purge_due_ms = 0;
		return UINT64_MAX;
	}
	/* an owner that still sweeps at its ticks (every purge_ms / 4 while it
	 * allocates) is left to do it */
	uint64_t recent = tally_purge_ms / 2 > 2 * purge_interval_ms() ? tally_purge_ms / 2 :
									 2 * purge_interval_ms();
	if (__atomic_load_n(&h->last_sweep_ms, __ATOMIC_RELAXED) + recent > now)
		return now + purge_interval_ms();
	/* first seen with work: all of it is due within a purge delay (stamped
	 * at the latest now), and nothing is touched before */
	if (!h->purge_due_ms)
		h->purge_due_ms = now + tally_purge_ms;
	if (h->purge_due_ms > now)
		return h->purge_due_ms;
	atomic_store_explicit(&h->purge, PURGE_BUSY, memory_order_relaxed);
	if (purge_barrier() || __atomic_load_n(&h->busy, __ATOMIC_ACQUIRE))
		goto poke;
	purge_flip(h, false);
	void *freeing;
	if (purge_barrier() || __atomic_load_n(&h->busy, __ATOMIC_ACQUIRE) ||
	    !purge_read_freeing(h, &freeing))
		goto poke;
	/* the span of the free that may be under way (only compared) */
	const struct span *skip = seg_map_has(freeing) ? span_of(freeing) : NULL;
	ph->now_ms = now;
	heap_purge_sweep(h, skip, ph);
	uint64_t due = heap_due(h, true, skip);
	/* UINT64_MAX: nothing left it may touch until the owner is back */
	h->purge_due_ms = due ? due : 1;
	atomic_store_explicit(&h->purge, PURGE_FLIPPED, memory_order_release);
	return due;
poke:
	purge_flip(h, true);
	atomic_store_explicit(&h->purge, PURGE_POKED, memory_order_release);
	h->purge_due_ms = now + purge_interval_ms();
	return h->purge_due_ms;
}

/* No pass now: a test reads its figures, or the process exits. */
static bool purge_held(void)
{
	return atomic_load_explicit(&purge_hold, memory_order_acquire) ||
	       atomic_load_explicit(&purge_exiting, memory_order_acquire);
}

static uint64_t min_u64(uint64_t a, uint64_t b)
{
	return a < b ? a : b;
}

/* One look at every heap and the large pool; returns when the next is due
 * (UINT64_MAX: nothing pending anywhere).
 * - The orphans and the large pool need no barrier: swept under the heaps
 *   lock, as live threads do at their ticks, on behalf of the purger's heap.
 * - Heaps whose owner still sweeps at its ticks are left to it. */
static uint64_t purge_pass(uint32_t tid)
{
	uint64_t now = os_now_ms(), next = UINT64_MAX;
	struct heap *first;

	pthread_mutex_lock(&tally_heaps_lock);
	if (purge_held()) {
		pthread_mutex_unlock(&tally_heaps_lock);
		return now + purge_interval_ms();
	}
	if (!tally_purge_heap)
		tally_purge_heap = heap_new_locked();
	struct heap *ph = tally_purge_heap;
	if (!ph) { /* no memory for it: try again later */
		pthread_mutex_unlock(&tally_heaps_lock);
		return now + purge_interval_ms();
	}
	/* the pool and the orphans answer to no thread: swept on behalf of the
	 * purger's own heap (its clock, its records for the pool) */
	ph->tid = tid;
	ph->now_ms = now;
	/* a pass is the purger's heap's operation: busy for a cut (cut.c) */
	op_start(ph);
	large_sweep(ph, false);
	next = min_u64(large_due(), heap_sweep_orphans(ph));
	if (ev_tracing())
		ev_flush(ph);
	first = tally_heaps;
	pthread_mutex_unlock(&tally_heaps_lock);
	/* heaps are only ever added, at the head: the list from first is stable */
	for (struct heap *h = first; h; h = h->all_next) {
		pthread_mutex_lock(&tally_heaps_lock);
		if (purge_held()) {
			next = min_u64(next, now + purge_interval_ms());
		} else {
			next = min_u64(next, purge_heap(h, ph, os_now_ms()));
			/* every record out before the lock goes: a reader of the
			 * figures under it sees the records too */
			if (ev_tracing())
				ev_flush(ph);
		}
		pthread_mutex_unlock(&tally_heaps_lock);
	}
	op_end(ph);
	return next;
}

/* Anything pending anywhere (hints), with idle already set: see purge_kick. */
static bool purge_pending(void)
{
	bool any = large_due() != UINT64_MAX;

	pthread_mutex_lock(&tally_heaps_lock);
	for (struct heap *h = tally_heaps; h && !any; h = h->all_next)
		any = purge_hint(h);
	pthread_mutex_unlock(&tally_heaps_lock);
	return any;
}

static void purge_sleep_ms(uint64_t ms)
{
	struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
	while (clock_nanosleep(CLOCK_MONOTONIC, 0, &ts, &ts) == EINTR)
		;
}

/* Nothing pending: sleep on a futex until a kick. Without membarrier the
 * kick's look at idle is not ordered, so the sleep is bounded. */
static void purge_sleep_idle(void)
{
	atomic_store_explicit(&purge_idle, 1, memory_order_seq_cst);
	if (purge_barrier())
		atomic_thread_fence(memory_order_seq_cst);
	if (!purge_pending()) {
		uint64_t ms = tally_purge_ms > PURGE_MIN_MS ? tally_purge_ms : PURGE_MIN_MS;
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
		futex(&purge_idle, FUTEX_WAIT, 1, purge_mb ? NULL : &ts);
	}
	atomic_store_explicit(&purge_idle, 0, memory_order_relaxed);
}

/* The thread: allocates nothing, sleeps when nothing anywhere is pending. */
static void *purge_main(void *arg)
{
	uint32_t tid = os_gettid();

	(void)arg;
	prctl(PR_SET_NAME, (unsigned long)TALLY_PURGER_COMM, 0, 0, 0);
	for (;;) {
		uint64_t next = purge_pass(tid), now = os_now_ms();
		if (next == UINT64_MAX) {
			purge_sleep_idle();
			continue;
		}
		uint64_t wait = next > now ? next - now : 0;
		uint64_t lo = purge_interval_ms(), hi = tally_purge_ms > lo ? tally_purge_ms : lo;
		purge_sleep_ms(wait < lo ? lo : wait > hi ? hi : wait);
	}
	return NULL;
}

/* Start the purger, once per process; outside any operation (purge_poll).
 * With every signal blocked from its first instruction: the program's
 * signals are for its own threads. If it cannot start, reclaim stays
 * owner-driven (RUN_FAILED). */
void purge_start(void)
{
	int expect = RUN_NEVER, saved = errno;
	sigset_t all, old;
	pthread_attr_t attr;
	pthread_t t;
	int err;

	atomic_store_explicit(&tally_purge_want, false, memory_order_relaxed);
	if (!atomic_compare_exchange_strong(&purge_run, &expect, RUN_STARTING))
		return;
	purge_mb = fence_register() == 0;
	/* what pthread_create allocates (the thread's DTV) is the allocator's
	 * doing, not the caller's group's */
	uint32_t group = tally_tls_heap->group;
	if (group)
		tally_alloc__set_group(0);
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	/* and it is no allocation of the program at all: the DTV (288 bytes)
	 * was in its live bytes, at a site purge_start < purge_poll. Every
	 * call of this thread takes a slow path meanwhile, where the blocks
	 * become metadata of its heap (heap.h: tally_tls_internal). */
	struct heap *self = tally_tls_heap;
	bool own = self != &tally_heap_none;
	if (own) {
		tally_tls_internal = self;
		tally_tls_heap = &tally_heap_none;
	}
	err = pthread_attr_init(&attr);
	if (!err) {
		pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
		pthread_attr_setstacksize(&attr, PURGE_STACK);
		err = pthread_create(&t, &attr, purge_main, NULL);
		pthread_attr_destroy(&attr);
		/* named before the caller goes on (the thread names itself too,
		 * later): a tracer that sees the caller fork next must know this
		 * thread for the allocator's own, which is never in the middle
		 * of an operation at a fork */
		if (!err)
			pthread_setname_np(t, TALLY_PURGER_COMM);
	}
	if (own) {
		tally_tls_heap = self;
		tally_tls_internal = NULL;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (group)
		tally_alloc__set_group(group);
	atomic_store_explicit(&purge_run, err ? RUN_FAILED : RUN_RUNNING, memory_order_release);
	errno = saved;
}

/* fork: the child has no purger; it starts one when its own frees ask for it
 * (heap.c's fork_child, with the heaps lock held, so no pass was under way). */
void purge_fork_child(void)
{
	if (atomic_load_explicit(&purge_run, memory_order_relaxed) != RUN_FAILED)
		atomic_store_explicit(&purge_run, RUN_NEVER, memory_order_relaxed);
	atomic_store_explicit(&purge_idle, 0, memory_order_relaxed);
	atomic_store_explicit(&tally_purge_want, false, memory_order_relaxed);
	atomic_store_explicit(&purge_exiting, false, memory_order_relaxed);
	purge_mb = false;
}

/*
 * At exit, no purge after this: the allocator's hand-over to a tracer
 * (events.c) reads the figures once, and a sweep after it would add records
 * they do not include. Every purge looks at the flag under the heaps' lock,
 * which the hand-over takes after this (this file is linked after events.c,
 * so this destructor runs first). No lock here: exit may come from a signal
 * handler of a thread that holds it.
 */
void purge_stop_for_exit(void)
{
	atomic_store_explicit(&purge_exiting, true, memory_order_seq_cst);
}

__attribute__((destructor)) static void purge_exit(void)
{
	purge_stop_for_exit();
}

#if defined(TALLY_ALLOC_TEST_SINK)
/* Tests: no purge while held, and none under way once this returns, so that
 * a replay and the in-process figures are read at the same point. */
void tally_alloc_test_purge_hold(int hold);
void tally_alloc_test_purge_hold(int hold)
{
	atomic_store_explicit(&purge_hold, hold, memory_order_seq_cst);
	pthread_mutex_lock(&tally_heaps_lock);
	pthread_mutex_unlock(&tally_heaps_lock);
}
#endif
