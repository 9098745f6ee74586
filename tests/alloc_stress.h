/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* Multi-threaded allocator workloads shared by the unit (sanitizer, tally_p_
 * names) and the stress (real malloc) test drivers. */
#ifndef TALLY_TEST_ALLOC_STRESS_H
#define TALLY_TEST_ALLOC_STRESS_H

#include <stdint.h>

#define STRESS_GROUP 7 /* the workloads' allocations are charged here */

/* Threads do random malloc/calloc/realloc/memalign/free with content checks,
 * exit with half their blocks live; the caller's thread frees those (frees to
 * orphaned heaps). Asserts the group's live bytes exactly after each step. */
void stress_random(unsigned nthreads, unsigned iters, uint64_t seed);
/* Producers allocate, consumers free (cross-thread frees). */
void stress_producer_consumer(unsigned pairs, unsigned objects, uint64_t seed);
/* fork with live blocks; the child frees and allocates normally and checks. */
void stress_fork(uint64_t seed);
/* Threads alternate bursts of random operations with pauses of up to
 * 3 * pause_ms, so that the purger (alloc/purge.c) finds their heaps quiet or
 * busy at any point; contents checked throughout, exact live bytes at the end.
 * Returns how often a thread found, after a pause, that the purger had turned
 * its fast paths off. */
unsigned stress_pausing(unsigned nthreads, unsigned rounds, unsigned pause_ms, uint64_t seed);

#endif
