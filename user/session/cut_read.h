/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The allocator's state of one moment, from a target that keeps running: the
 * cut's request written into it, and each heap taken as its owner answered
 * or, for a heap whose owner is out of the allocator, as tally reads it
 * (docs/DESIGN.md §8, alloc/cut.c). Used for the root and for every other
 * process of the tree, at attach, at each view's tick and at the end.
 */
#ifndef TALLY_CUT_READ_H
#define TALLY_CUT_READ_H

#include <stdint.h>
#include <sys/types.h>

#include "../os/remote.h"

struct cut_target {
	pid_t pid;
	uint64_t heaps_addr; /* tally_heaps */
	uint64_t cut_addr;   /* tally_cut (0: an allocator without it) */
};

/* Called between two tries, for what came through the ring meanwhile: only
 * for an allocator without the request, whose every try cuts anew. */
typedef void (*cut_wait_fn)(void *ctx);

/* The figures, every heap's, of one moment: out->consistent unless wait_ms
 * went by first (a heap that neither answered nor stood still: an owner that
 * runs outside the allocator yet never stops). 0 or -errno, as
 * remote_alloc_read; *out is then the last try. */
int cut_read_figures(const struct cut_target *t, uint32_t wait_ms, cut_wait_fn between, void *ctx,
		     struct remote_alloc *out);
/* Only where each heap's stream is cut, and its pending records: a view's
 * tick (no wait: a heap that has not answered yet is cut where it stands). */
int cut_read_positions(const struct cut_target *t, struct remote_alloc *out);

#endif /* TALLY_CUT_READ_H */
