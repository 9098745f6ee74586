/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The purger (purge.c): memory goes back while the program idles. */
#ifndef TALLY_ALLOC_PURGE_H
#define TALLY_ALLOC_PURGE_H

#include "internal.h"

enum purge_state {
	PURGE_NONE = 0,	   /* the owner's fast paths on */
	PURGE_BUSY = 1,	   /* the purger holds the heap (and tally_heaps_lock) */
	PURGE_FLIPPED = 2, /* fast paths off, heap purged: the owner restores them */
	PURGE_POKED = 3,   /* fast paths off, not purged: the owner restores them and sweeps */
};
#define PURGE_TP 1 /* an owner_tp no thread has: the owner's frees take the slow path */
extern _Atomic bool tally_purge_want;
extern struct heap *tally_purge_heap; /* the purger's own (large pool, orphans), under the lock */
void purge_kick(struct heap *h);
void purge_start(void);
/* After op_end on a slow path: start the purger if a kick asked for it
 * (not inside the operation: pthread_create may call malloc). */
static inline void purge_poll(void)
{
	if (unlikely(atomic_load_explicit(&tally_purge_want, memory_order_relaxed)))
		purge_start();
}
void purge_fork_child(void);
/* Exit: no purge from here on (the hand-over reads the figures once). */
void purge_stop_for_exit(void);

#endif /* TALLY_ALLOC_PURGE_H */
