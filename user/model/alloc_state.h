/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A running target's allocator state as read from its memory (user/os/remote.c
 * reads it; the model starts from it at a late attach, model_seed_alloc, and
 * completes a view's cut with each heap's pending records). Plain data.
 */
#ifndef TALLY_ALLOC_STATE_H
#define TALLY_ALLOC_STATE_H

#include <stdbool.h>
#include <stdint.h>

#include "../../alloc/include/tally_alloc.h"
#include "../../bpf/contract/tally_events.h"

/* One heap: its position in its record stream (records numbered below `pos`
 * are reflected in the figures read) and the records it holds that it has
 * not handed over yet, numbered seq_first... */
struct remote_heap {
	uint64_t id;
	uint64_t pos;
	uint64_t seq_first;
	uint32_t tid;
	uint32_t npending;
	__u64 *pending; /* npending record words, malloc'd (NULL when none) */
	bool whole;	/* no flush tore the copy: pending may be applied */
	/* its owner (or whoever else moved it) answered the request: pos
	 * and the figures are its own, of one moment; else tally read it */
	bool answered;
};

struct remote_alloc {
	struct tally_stats stats;
	struct tally_group_stats groups[TALLY_MAX_GROUPS];
	uint32_t nheaps;
	struct remote_heap *heaps; /* malloc'd, nheaps entries */
	bool consistent;	   /* no heap's position moved while it was read */
	/* heaps that did not answer the request and were inside an operation
	 * they began before it (alloc/cut.c): not to be cut where they stand */
	uint32_t nbusy;
};

#endif /* TALLY_ALLOC_STATE_H */
