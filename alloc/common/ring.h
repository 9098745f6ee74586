/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A producer's shared ring (ring.c; struct tally_ring, bpf/contract/tally_events.h):
 * where a traced heap of libtally_alloc, or a thread of
 * libtally_interpose.so, puts its full batches for the tracer to read in
 * place. `key` names the tracer: a new one (another key) gets the ring
 * announced again.
 */
#ifndef TALLY_ALLOC_RING_H
#define TALLY_ALLOC_RING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"

struct ring_state {
	struct tally_ring *ring;
	uint64_t key;  /* the tracer's key it was announced with (0: none) */
	uint32_t next; /* the slot the next batch goes to */
	bool failed;   /* no mapping for one: batches go through the probe */
};

/* The batch into the ring: false when it must go through the probe (no
 * ring, not taken by the tracer of `key`, its slot not read yet). */
bool ring_put(struct ring_state *rs, uint64_t key, const struct tally_batch *b, size_t bytes);
/* Whether the producer should announce a ring to the tracer of `key`. */
bool ring_wanted(const struct ring_state *rs, uint64_t key);
/* Map the ring if there is none, and put its announcement to the tracer of
 * `key` in b (empty). False when there is no ring to announce. */
bool ring_announce(struct ring_state *rs, uint64_t key, uint64_t heap_id, struct tally_batch *b);
/* In a forked child: the ring is the parent's, and its tracer's. */
void ring_fork_child(struct ring_state *rs);

#endif /* TALLY_ALLOC_RING_H */
