/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Dekker's two flags with the fence paid on one side: what orders a guest's
 * frequent side (an owner's fast path) against its rare side (the purger,
 * alloc/purge.c; the interposer's flusher and cut, interpose_batch.c).
 * Header-only: the frequent side sits on the hot paths and stays inline.
 *
 * Invariants:
 * - The frequent side stores its flag, passes fence_light, then reads the
 *   rare side's flag; the rare side stores its flag, passes fence_heavy,
 *   then reads the frequent side's. Either the frequent side sees the rare
 *   one and steps back, or the rare side sees it and leaves the thing to
 *   it; never both miss.
 * - fence_light orders the compiler only: the processor may still take the
 *   read before the store. fence_heavy (membarrier) makes every other
 *   thread of the process pass a full barrier before it returns, which
 *   orders that thread's store and read for it: one side pays for both.
 * - fence_heavy works only once fence_register succeeded in the process;
 *   without it the rare side has no order (the purger pokes instead, the
 *   interposer takes its flag as a lock: ip_locking).
 * - What the frequent side did under its flag is seen by a rare side that
 *   reads it clear: the flag is cleared with a release store (fence_leave,
 *   alloc/heap.h's op_end), read with acquire.
 * - fence_register and fence_heavy return 0 or -errno, and leave errno as
 *   the syscall set it: a caller that must keep errno saves it.
 */
#ifndef TALLY_ALLOC_COMMON_FENCE_H
#define TALLY_ALLOC_COMMON_FENCE_H

#include <errno.h>
#include <linux/membarrier.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Once per process, before the first fence_heavy: 0 or -errno. */
static inline int fence_register(void)
{
	long r = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0);

	return r ? -errno : 0;
}

/* The same for a rare side in another process: the tracer's cut (alloc/cut.c,
 * user/os/remote.c), whose membarrier(MEMBARRIER_CMD_GLOBAL_EXPEDITED)
 * reaches the processes that registered so. Per process: again in a
 * forked child, whose new memory is not registered. 0 or -errno. */
static inline int fence_register_global(void)
{
	long r = syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED, 0, 0);

	return r ? -errno : 0;
}

/* The rare side's fence, between its store and its read: microseconds (a
 * barrier on every CPU that runs a thread of the process). 0 or -errno. */
static inline int fence_heavy(void)
{
	return syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) ? -errno : 0;
}

/* The frequent side's fence, between its store and its read: no
 * instruction, the compiler only. */
static inline void fence_light(void)
{
	atomic_signal_fence(memory_order_seq_cst);
}

/* The frequent side's entry on one-byte flags: 0 with *mine set, or -EBUSY
 * (the rare side holds `theirs`; *mine is clear again). */
static inline int fence_enter(_Atomic uint8_t *mine, _Atomic uint8_t *theirs)
{
	atomic_store_explicit(mine, 1, memory_order_relaxed);
	fence_light();
	if (__builtin_expect(!atomic_load_explicit(theirs, memory_order_acquire), 1))
		return 0;
	atomic_store_explicit(mine, 0, memory_order_release);
	return -EBUSY;
}

/* ... and its exit: everything done under the flag is seen by a rare side
 * that reads it clear. */
static inline void fence_leave(_Atomic uint8_t *mine)
{
	fence_light();
	atomic_store_explicit(mine, 0, memory_order_release);
}

#endif /* TALLY_ALLOC_COMMON_FENCE_H */
