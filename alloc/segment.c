// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Segments: 4 MiB mapped 4 MiB-aligned, owned by one heap. Span 0 is the
 * header (the descriptors); the header's pages are segment_overhead and the
 * rest of span 0 is never touched (virgin).
 */
#include <string.h>

#include "internal.h"

_Atomic uint8_t tally_seg_map[SEG_MAP_LEN];

static void seg_map_set(struct segment *seg, bool on)
{
	atomic_store_explicit(&tally_seg_map[(uintptr_t)seg >> SEGMENT_SHIFT], on,
			      memory_order_release);
}

static struct segment *segment_new(struct heap *h)
{
	struct segment *seg = os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
	if (!seg)
		return NULL;
	uint32_t hdr = (uint32_t)((sizeof(*seg) + OS_PAGE - 1) & ~(OS_PAGE - 1));
	_Static_assert(sizeof(struct segment) <= SPAN_SIZE, "segment header fits span 0");

	seg->heap = h;
	seg->free_mask = ~1ULL;
	seg->hdr_bytes = hdr;
	for (unsigned i = 0; i < SPANS_PER_SEGMENT; i++) {
		seg->spans[i].index = (uint8_t)i;
		seg->spans[i].src_term = TALLY_TERM_VIRGIN;
		seg->spans[i].heap = h;
		seg->spans[i].flags = 0;
	}
	os_touch(seg, hdr);
	seg->next = h->segs;
	h->segs = seg;
	seg_map_set(seg, true);

	h->st.mapped += SEGMENT_SIZE;
	h->st.segment_overhead += hdr;
	h->st.virgin += SEGMENT_SIZE - hdr;
	ev(h, TALLY_EV_SEG_MAP, 0, 0, hdr, SEGMENT_SIZE);
	return seg;
}

/* An unassigned span of one of the heap's segments, mapping a new segment if
 * none is left. The caller assigns it a class. */
struct span *segment_claim_span(struct heap *h)
{
	struct segment *seg;

	for (seg = h->segs; seg; seg = seg->next)
		if (seg->free_mask)
			break;
	if (!seg) {
		/* Before growing, give an empty span of another class a new life. */
		if (h->lru_head) {
			span_retire(h, h->lru_head);
			return segment_claim_span(h);
		}
		seg = segment_new(h);
		if (!seg)
			return NULL;
	}
	unsigned i = (unsigned)__builtin_ctzll(seg->free_mask);
	seg->free_mask &= ~(1ULL << i);
	return &seg->spans[i];
}

void segment_release_span(struct heap *h, struct span *sp)
{
	(void)h;
	segment_of(sp)->free_mask |= 1ULL << sp->index;
}
