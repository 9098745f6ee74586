// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The debug build's check of a span (debug.h): its byte map, written as prose
 * at the top of span.c, found again by a walk of the span and held against
 * SPAN_SIZE and against the span's own counters. span.c calls it at every
 * transition of a span's state and at every discard and reuse of its pages.
 *
 * The walk sorts every slot below the bump cursor into one of three: held
 * (its metadata is not free), on the free list, or parked (free, with a page
 * handed back, and so off the free list). The terms then sum to SPAN_SIZE
 * exactly when that is a partition: a slot lost (freed but on no list), or
 * on two (listed twice, listed while held or while parked), moves the sum
 * off by its size.
 */
#ifdef TALLY_DEBUG
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

void tally_assert_fail(const char *what, const char *file, int line)
{
	char buf[256];
	int n = snprintf(buf, sizeof(buf), "tally_alloc: internal check failed: %s (%s:%d)\n", what,
			 file, line);
	if (n > 0)
		(void)!write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	abort();
}

/* Bytes of [off, off + len) on pages of the span handed back. */
static uint32_t discarded_bytes(const struct span *sp, uint32_t off, uint32_t len)
{
	uint32_t end = off + len, bytes = 0;

	for (uint32_t p = off / OS_PAGE; p * OS_PAGE < end; p++) {
		if (!(sp->discarded & (1u << p)))
			continue;
		uint32_t lo = p * OS_PAGE > off ? p * OS_PAGE : off;
		uint32_t hi = (p + 1) * OS_PAGE < end ? (p + 1) * OS_PAGE : end;
		bytes += hi - lo;
	}
	return bytes;
}

/* The free list's length; stray: links that are no free slot of the span
 * below bump on resident pages (a walk longer than bump counts as one). */
static uint32_t free_list_walk(const struct span *sp, uint32_t *stray)
{
	uint32_t n = 0;

	for (const struct free_slot *f = sp->free; f; f = f->next) {
		uint32_t i = span_slot_index(sp, f);
		if (span_of(f) != sp || i >= sp->bump || span_slot(sp, i) != (const char *)f ||
		    span_meta(sp)[i] != META_FREE ||
		    discarded_bytes(sp, sp->slot_off + i * sp->size, sp->size)) {
			(*stray)++;
			break;
		}
		if (++n > sp->bump) {
			(*stray)++;
			break;
		}
	}
	return n;
}

void span_bytes_of(const struct span *sp, struct span_bytes *out)
{
	uint64_t size = sp->size, held = 0, foreign = 0, parked_resident = 0;

	*out = (struct span_bytes){ 0 };
	uint64_t *src = sp->src_term == TALLY_TERM_VIRGIN ? &out->virgin : &out->returned;
	if (sp->state == SPAN_UNASSIGNED) {
		*src = SPAN_SIZE;
		return;
	}
	for (uint32_t i = 0; i < sp->bump; i++) {
		uint16_t m = __atomic_load_n(&span_meta(sp)[i], __ATOMIC_RELAXED);
		if (m != META_FREE) {
			held++;
			foreign += (m & META_FOREIGN) != 0;
			continue;
		}
		uint32_t d = discarded_bytes(sp, sp->slot_off + i * sp->size, sp->size);
		if (d) {
			out->parked_slots++;
			out->parked_bytes += d;
			parked_resident += size - d;
		}
	}
	out->free_slots = free_list_walk(sp, &out->stray_links);
	out->held = held * size;
	out->cache = foreign * size;
	out->returned = out->parked_bytes;
	*src += SPAN_SIZE - sp->slot_off - sp->bump * size; /* at or above bump, and the tail */
	uint64_t free_resident = out->free_slots * size + parked_resident;
	if (sp->state == SPAN_EMPTY) {
		out->hysteresis = sp->slot_off + free_resident;
	} else {
		out->segment_overhead = sp->slot_off;
		out->span_free = free_resident;
	}
}

uint64_t span_bytes_sum(const struct span_bytes *b)
{
	return b->segment_overhead + b->held + b->span_free + b->returned + b->virgin +
	       b->hysteresis;
}

void span_check(const struct span *sp)
{
	struct span_bytes b;

	span_bytes_of(sp, &b);
	TALLY_ASSERT_INTERNAL(b.stray_links == 0);
	TALLY_ASSERT_INTERNAL(span_bytes_sum(&b) == SPAN_SIZE);
	TALLY_ASSERT_INTERNAL(sp->src_term == TALLY_TERM_VIRGIN ||
			      sp->src_term == TALLY_TERM_RETURNED);
	if (sp->state == SPAN_UNASSIGNED) {
		TALLY_ASSERT_INTERNAL(sp->bump == 0 && sp->free == NULL && sp->recip == 0);
		return;
	}
	TALLY_ASSERT_INTERNAL(sp->state == SPAN_ACTIVE || sp->state == SPAN_EMPTY);
	if (sp->state == SPAN_EMPTY)
		TALLY_ASSERT_INTERNAL(b.held == 0 && !(sp->flags & SPAN_FULL));
	TALLY_ASSERT_INTERNAL(sp->bump <= sp->nslots);
	TALLY_ASSERT_INTERNAL(sp->slot_off + (uint64_t)sp->nslots * sp->size <= SPAN_SIZE);
	TALLY_ASSERT_INTERNAL(b.held == (uint64_t)span_used(sp) * sp->size);
	TALLY_ASSERT_INTERNAL(b.parked_bytes == sp->returned);
	TALLY_ASSERT_INTERNAL(b.parked_slots == sp->parked_slots);
}
#endif /* TALLY_DEBUG */
