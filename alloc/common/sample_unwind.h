/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A sample's stack from the objects' .eh_frame rules, each rule read once
 * (sample_unwind.c): the fast side of sample_backtrace (sample_util.h), which
 * falls back on libgcc's unwinder for any frame it cannot follow.
 */
#ifndef TALLY_ALLOC_SAMPLE_UNWIND_H
#define TALLY_ALLOC_SAMPLE_UNWIND_H

#include <stdint.h>

/* The calling thread's return addresses into pcs (at most max), the frames
 * in [lo, hi) left out while they lead, as libgcc's _Unwind_Backtrace
 * reports them: their number, or -1 when a frame needs libgcc (a rule this
 * unwinder does not follow, a signal frame, a frame without unwind data),
 * pcs then undefined. On other architectures than x86-64, always -1. */
int unwind_cached(uint64_t *pcs, unsigned max, uintptr_t lo, uintptr_t hi);

#endif /* TALLY_ALLOC_SAMPLE_UNWIND_H */
