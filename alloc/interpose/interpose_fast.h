/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libtally_interpose.so's wrappers' common call, inline (interpose.c's
 * only): a block of glibc's arenas whose shadow region is mapped, not
 * sampled, of one-word sizes, into a batch with room. Anything else takes
 * the general path (interpose.c's on_alloc, take and record_free), which
 * does all this and the rest; so these touch nothing until they know they
 * can finish, and return false to hand the call to it.
 *
 * Why (issue 34), scripts/bench-inject-calls.sh (callgrind on the churn,
 * 16..256 B in a ring of 4096, the library started in the process):
 * instructions a malloc+free pair beyond glibc's own 187, with the general
 * path alone 341 (calls between four functions, the block passed through
 * memory, the same checks made twice); with these, about 213; with the
 * thread's state in one TLS block, the shadow's last regions kept, the
 * tests merged and the probe's asked only before the general path, 171;
 * with the general paths out of line and free's tail call, 160. Time, the
 * same loop (thread CPU time, 5 interleaved rounds on a loaded 2-CPU VM):
 * 2.31x glibc's before, 1.6-1.8x.
 */
#ifndef TALLY_ALLOC_INTERPOSE_FAST_H
#define TALLY_ALLOC_INTERPOSE_FAST_H

#include "internal.h"

/* glibc's chunk header is read inline (usable_inline, interpose.c),
 * batches are taken without a lock (!ip_locking) and glibc calls no hook
 * back (2.34 or later: ip_free's tail call): one test a call for the three,
 * set at a start before recording begins. */
extern bool ip_fast_ok;

/* Block a's shadow entry (a 16-aligned), NULL while its region has none:
 * from the regions thread t used last (regions are never unmapped), which
 * saves most calls the directories' two dependent loads. */
static inline ip_sh_t *shadow_entry(struct ithread *t, uintptr_t a)
{
	uintptr_t key = a >> IP_SHADOW_REGION_SHIFT;
	size_t i = key % IP_REGIONS;
	ip_sh_t *e;

	if (likely(t->region_key[i] == key))
		return &t->region[i][(a >> 4) & (IP_SHADOW_GRANULES - 1)];
	if (a >> 47 || !(e = ip_shadow_find(a)))
		return NULL;
	t->region_key[i] = key;
	t->region[i] = e - ((a >> 4) & (IP_SHADOW_GRANULES - 1));
	return e;
}

/* A one-word record (tally_ev_word) of fields known in range: group <= 255,
 * n and bytes <= TALLY_EV_WORD_MAX (no masking) */
static inline uint64_t word_of(uint8_t type, uint32_t group, uint64_t n, uint64_t bytes)
{
	return type | (uint64_t)group << 8 | n << 16 | bytes << 40;
}

/* malloc's block p of q bytes (NULL: failed), recorded: true; false, and
 * nothing done, for on_alloc. */
static inline bool alloc_fast(void *p, size_t q)
{
	uintptr_t a = (uintptr_t)p;
	struct ithread *t = ip_tls.me;
	uint32_t g = (uint32_t)ip_tls.group;

	if (unlikely(!ip_fast_ok || !t || !a || (a & 15)))
		return false;
	size_t h = ((const size_t *)p)[-1];
	uint64_t usable = (h & ~(size_t)7) - 8, round = usable - q;
	if (unlikely((h & 2) || round > IP_SHADOW_ROUND_MAX || usable > TALLY_EV_WORD_MAX ||
		     g > 0xff || ip_tls.sample_left < (int64_t)q))
		return false; /* mapped, rounded past the shadow's, large, group not known, sampled */
	ip_sh_t *e = shadow_entry(t, a);
	if (unlikely(!e || (atomic_load_explicit(e, memory_order_relaxed) & IP_SHADOW_VALID)))
		return false; /* its region not mapped; a free unseen */
	if (unlikely(fence_enter(&t->busy, &t->claimed)))
		return false;
	if (unlikely(t->batch.count >= TALLY_BATCH_WORDS)) {
		fence_leave(&t->busy);
		return false;
	}
	atomic_store_explicit(e, (uint16_t)(IP_SHADOW_VALID | round << 8 | g),
			      memory_order_relaxed);
	ip_tls.sample_left -= (int64_t)q;
	t->batch.words[t->batch.count++] = word_of(TALLY_EV_ALLOC, g, q, usable);
	fence_leave(&t->busy);
	return true;
}

/* The free of block p (not NULL), recorded before glibc has it back: true;
 * false, and nothing done, for take and record_free. */
static inline bool free_fast(void *p)
{
	uintptr_t a = (uintptr_t)p;
	struct ithread *t = ip_tls.me;

	if (unlikely(!ip_fast_ok || !t || (a & 15)))
		return false;
	size_t h = ((const size_t *)p)[-1];
	uint64_t usable = (h & ~(size_t)7) - 8;
	if (unlikely((h & 2) || usable > TALLY_EV_WORD_MAX))
		return false;
	ip_sh_t *e = shadow_entry(t, a);
	if (unlikely(!e))
		return false;
	uint16_t v = atomic_load_explicit(e, memory_order_relaxed);
	if (unlikely((v & (IP_SHADOW_VALID | IP_SHADOW_SAMPLED)) != IP_SHADOW_VALID))
		return false; /* untracked (or in the table), or sampled */
	if (unlikely(fence_enter(&t->busy, &t->claimed)))
		return false;
	if (unlikely(t->batch.count >= TALLY_BATCH_WORDS)) {
		fence_leave(&t->busy);
		return false;
	}
	atomic_store_explicit(e, 0, memory_order_relaxed);
	t->batch.words[t->batch.count++] =
		word_of(TALLY_EV_FREE, v & 0xff, usable - ((v >> 8) & IP_SHADOW_ROUND_MAX), usable);
	fence_leave(&t->busy);
	return true;
}

#endif /* TALLY_ALLOC_INTERPOSE_FAST_H */
