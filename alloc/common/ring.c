// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A heap's shared ring (struct tally_ring, bpf/contract/tally_events.h): its full
 * batches go there, for the tracer to read in place, once the tracer has
 * taken the ring. The probe's copy of a batch into the BPF ring buffer is
 * the traced fast path's largest cost after the records themselves: a trap
 * and 32 KiB copied by the kernel into pages the consumer's CPU read last,
 * 8 to 75 us a batch here (bpf_stats: 73 us a run while tally drains on the
 * other CPU); a memcpy into a slot costs about 0.9 us.
 *
 * Only heaps that fill whole batches get one (a thread that allocates a
 * little never maps the ring's 1 MiB for it), and only while traced. A tracer is
 * known by its key, tally_sample_epoch + 1: a new tracer writes another
 * epoch (session_sample.c), the ring is announced again and waits for it.
 * Anything unusual (no mapping, no tracer has taken the ring, the slot not
 * read yet) leaves the batch to tally:batch, as before rings.
 *
 * The mapping is MAP_SHARED | MAP_ANONYMOUS: plain mmap, which any process
 * that allocates may call (a seccomp filter that allows malloc allows it;
 * memfd_create it might not), and no file the program could truncate under
 * the tracer. A forked child shares it with its parent: the child lets go
 * of it as probe_guard.c catches it (ring_fork_child), glibc's fork or a raw
 * one, and maps its own when it needs one.
 */
#include <errno.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "probes.h"
#include "ring.h"

#if !defined(TALLY_ALLOC_TEST_SINK) && !defined(TALLY_NO_PROBES)

bool ring_put(struct ring_state *rs, uint64_t key, const struct tally_batch *b, size_t bytes)
{
	struct tally_ring *r = rs->ring;
	uint32_t i = rs->next;

	if (!r || rs->key != key || __atomic_load_n(&r->accepted, __ATOMIC_ACQUIRE) != rs->key)
		return false;
	/* the tracer has not read this slot yet: the probe takes the batch */
	if (__atomic_load_n(&r->full[i], __ATOMIC_ACQUIRE))
		return false;
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	memcpy(&r->slot[i], b, bytes);
	r->ts_ns[i] = (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
	__atomic_store_n(&r->full[i], 1, __ATOMIC_RELEASE);
	rs->next = (i + 1) % TALLY_RING_SLOTS;
	return true;
}

bool ring_wanted(const struct ring_state *rs, uint64_t key)
{
	return !rs->failed && rs->key != key;
}

bool ring_announce(struct ring_state *rs, uint64_t key, uint64_t heap_id, struct tally_batch *b)
{
	struct tally_ring *r = rs->ring;

	/* a child must let go of its parent's ring before its first batch,
	 * which only a guard that catches any fork sees to */
	if (!probe_guard_wipes()) {
		rs->failed = true;
		return false;
	}
	if (!r) {
		int saved = errno; /* a malloc that succeeds leaves errno alone */
		void *p = mmap(NULL, TALLY_RING_BYTES, PROT_READ | PROT_WRITE,
			       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
		errno = saved;
		if (p == MAP_FAILED) {
			rs->failed = true;
			return false;
		}
		r = p;
		r->magic = TALLY_RING_MAGIC;
		r->version = TALLY_RING_VERSION;
		r->slots = TALLY_RING_SLOTS;
		r->heap_id = heap_id;
		rs->ring = r;
	}
	/* Until the new tracer takes it, nothing goes in; what an earlier one
	 * left unread is not the new one's (it read this process's state at
	 * its attach), so every slot is free again, from the first. */
	__atomic_store_n(&r->accepted, 0, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < TALLY_RING_SLOTS; i++)
		__atomic_store_n(&r->full[i], 0, __ATOMIC_RELAXED);
	rs->next = 0;
	rs->key = key;
	__atomic_store_n(&r->announced, key, __ATOMIC_RELEASE);
	struct tally_ev e = { TALLY_EV_RING, 0, 0, (uint32_t)TALLY_RING_BYTES, (uintptr_t)r };
	tally_ev_put(b->words, &b->count, &e);
	return true;
}

/* (events.c's ev_child, from probe_guard.c, before the child's first
 * batch) */
void ring_fork_child(struct ring_state *rs)
{
	if (rs->ring)
		munmap(rs->ring, TALLY_RING_BYTES);
	*rs = (struct ring_state){ 0 };
}

#endif
