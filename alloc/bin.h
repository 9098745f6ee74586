/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Bins (bin.c): the lists an assigned span is on. A bin holds the spans of
 * one size class of one resource group, in two lists linked through
 * span.next and span.prev:
 *
 *   head   ACTIVE spans with free slots, or not yet known to be full; the
 *          head is the class's current span, the one malloc takes slots from,
 *          which the heap's direct table mirrors for the current group
 *   empty  EMPTY spans, retained (hysteresis) until they are retired
 *
 * and every EMPTY span of a heap is also on the heap's list of them, oldest
 * first (lru_head .. lru_tail, linked through span.lru_next and lru_prev),
 * which decides which retires first. A full span (SPAN_FULL) is on no list,
 * and neither is an unassigned one.
 */
#ifndef TALLY_ALLOC_BIN_H
#define TALLY_ALLOC_BIN_H

#include "span.h"

struct bin {
	struct span *head;  /* spans of this class and group with free slots; head is current */
	struct span *empty; /* empty spans retained (hysteresis) */
};

/* The active list: sp becomes the bin's current span, or leaves the list. */
void bin_push(struct heap *h, struct bin *b, struct span *sp);
void bin_remove(struct heap *h, struct bin *b, struct span *sp);
/* The active list, behind the current span (the head where there is none). */
void bin_push_behind(struct heap *h, struct bin *b, struct span *sp);
/* The empty list, and the heap's list of empty spans with it. */
void bin_push_empty(struct heap *h, struct bin *b, struct span *sp);
void bin_remove_empty(struct heap *h, struct bin *b, struct span *sp);

#endif /* TALLY_ALLOC_BIN_H */
