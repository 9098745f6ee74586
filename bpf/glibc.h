/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What bpf/glibc.bpf.c (glibc mode) shares with its loader, user/probes/glibc.c:
 * the figures in its .bss, which the loader reads through the mmapped
 * section (the skeleton names struct glibc_totals without defining it, and
 * asserts its size), and the default size of the block map.
 */
#ifndef TALLY_BPF_GLIBC_H
#define TALLY_BPF_GLIBC_H

#include "contract/tally_events.h"

/* Live blocks the block map holds unless the loader says otherwise: about
 * 100 MB of kernel memory when full (the map is not preallocated). */
#define GLIBC_DEFAULT_BLOCKS (1U << 20)

/*
 * The figures, over blocks allocated since the probes were armed (or since
 * the target's last exec). Invariant, over blocks in the block map:
 *   live == sum(requested), rounding == sum(usable - requested),
 *   large_count == count(mmapped),
 *   sum over groups of (alloc_bytes - dealloc_bytes) == live,
 *   sum over groups of (alloc_objs - dealloc_objs) == blocks in the map.
 */
struct glibc_totals {
	__u64 live;	     /* bytes */
	__u64 rounding;	     /* bytes */
	__u64 large_count;   /* blocks */
	__u64 calls;	     /* outermost calls of the family (free(NULL) included) */
	__u64 nested;	     /* calls made inside a traced call: accounted by the outer one */
	__u64 untracked;     /* blocks not recorded: map full, or no glibc chunk header */
	__u64 unknown_frees; /* frees (and realloc's release) of blocks not in the map */
	__u64 lost;	     /* calls whose return was not seen, frees not seen */
	__u64 alloc_bytes[TALLY_MAX_GROUPS];   /* requested bytes, by the allocating group */
	__u64 alloc_objs[TALLY_MAX_GROUPS];    /* blocks */
	__u64 dealloc_bytes[TALLY_MAX_GROUPS]; /* requested bytes, by the allocating group */
	__u64 dealloc_objs[TALLY_MAX_GROUPS];  /* blocks */
};
_Static_assert(sizeof(struct glibc_totals) == 8 * 8 + 4 * 8 * TALLY_MAX_GROUPS,
	       "glibc_totals layout");

#endif /* TALLY_BPF_GLIBC_H */
