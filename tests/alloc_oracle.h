/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The allocator tests' oracle: every batch the allocator hands over goes
 * through the real replay (user/model/replay.c), and at a quiescent point the
 * replayed figures must equal the allocator's own, field for field.
 */
#ifndef TALLY_TEST_ALLOC_ORACLE_H
#define TALLY_TEST_ALLOC_ORACLE_H

#include <stddef.h>
#include <stdint.h>

#include "../alloc/include/tally_alloc.h"

#ifdef TALLY_ALLOC_PREFIX
#include "../alloc/include/tally_alloc_prefixed.h"
#define T(name) tally_p_##name
#else
#include <malloc.h>
#define T(name) name
/* C23, not yet in this libc's headers */
void free_sized(void *p, size_t n);
void free_aligned_sized(void *p, size_t align, size_t n);
#endif

void tally_alloc_test_flush_all(void);

/* Flush every heap, then fail the test unless the in-process figures are
 * balanced and equal to the replay's (stats and every group's counters). */
void oracle_check(const char *where);
/* The in-process figures, after oracle_check. */
struct tally_stats oracle_stats(void);
/* live bytes of one group (allocated - deallocated), in-process */
int64_t oracle_group_live(uint32_t group);
/* Resident bytes of the allocator's mappings per /proc/self/smaps (anonymous
 * mappings marked "nh" and "rr", which the allocator sets on all of its own). */
uint64_t oracle_smaps_resident(void);

#endif
