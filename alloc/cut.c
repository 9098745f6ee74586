// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A heap's answer to the tracer's request for a cut (docs/DESIGN.md §8).
 *
 * A read of a heap from outside, while its owner writes it, is torn: a busy
 * target gave tally's late attach a state of one moment in 2 runs of 5. So
 * the heap's owner publishes its own state, at the start of an operation,
 * where no write of its is half done: the position of its record stream
 * (records numbered below cut_pos are in the figures, those from cut_pos on
 * are not) and, when asked, its figures there. A heap is then a prefix of
 * its stream, and the tracer's cut is a set of prefixes, one per heap.
 *
 * Why such a set is one moment (no free counted before the allocation it
 * frees): a record made after its heap saw the request is past its cut,
 * and a record that came before some operation that saw it is below its
 * heap's. The free of a block happens after its allocation, in the order
 * the program itself passed the pointer: if the free's heap had not seen the
 * request yet, the allocation's had not either.
 */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "stats_walk.h"

/* Written by the tracer (process_vm_writev), read by every owner. */
struct tally_cut tally_cut;
__asm__(".globl tally_cut_now\n\t.hidden tally_cut_now\n\t.set tally_cut_now, tally_cut");

/*
 * Which heaps tally may cut where they stand (user/os/remote.c): a heap whose
 * owner is not inside a slow operation (busy, op_begin) and has not answered
 * will answer before its next one. That is Dekker's pair of common/fence.h
 * across two processes: the owner stores busy, then reads the request
 * (op_start); tally stores the request, then passes
 * membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED), then reads busy. The
 * registration makes this process one that barrier reaches.
 */
__attribute__((constructor)) static void cut_init(void)
{
	int saved = errno;
	(void)fence_register_global();
	errno = saved;
}

/* The heap's figures as stats.c sums them, for this heap alone. */
static void cut_walk(struct heap *h)
{
	struct stats_walk *w = &h->cut_walk;

	memset(w, 0, sizeof(*w));
	stats_walk_heap(w, h);
	for (struct segment *seg = h->segs; seg; seg = seg->next)
		for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
			struct span *sp = &seg->spans[i];
			if (WALK_LOAD(sp->state) != SPAN_UNASSIGNED)
				stats_walk_span(w, sp, span_meta(sp));
		}
}

void cut_answer(struct heap *h, uint64_t req)
{
	if (req & CUT_FIGURES)
		cut_walk(h);
	__atomic_store_n(&h->cut_pos, h->seq + h->batch.count, __ATOMIC_RELAXED);
	/* release: a reader that sees the number sees the position and the
	 * figures; every record made after it is stored after it */
	__atomic_store_n(&h->cut_gen, req, __ATOMIC_RELEASE);
}
