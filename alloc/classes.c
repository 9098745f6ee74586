// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Size classes: 16..512 B in steps of 16, then 8 classes per doubling up to
 * 32 KiB, so the rounding of any request above 128 B is under 12.5 % of its
 * slot. Two departures from the first plan (docs/DESIGN.md §2: steps of
 * 8 B to 128 B, then 8 per doubling):
 * - no 8-byte steps: a 24-byte stride would leave every other slot only
 *   8-byte aligned, and x86-64 programs rely on 16 (clang marks operator
 *   new's result 16-aligned; glibc, jemalloc and mimalloc all give 16);
 * - 16-byte steps up to 512 B, not 32: objects of a few hundred bytes are
 *   everywhere, and with 32-byte steps their rounding plus the 2 bytes of
 *   per-slot metadata packs them worse than glibc's 16-byte chunks do.
 */
#include "internal.h"

struct tally_class tally_classes[CLASS_COUNT];
/* class of every q <= DIRECT_MAX, indexed by direct_index(q) */
uint8_t tally_class_small[DIRECT_ENTRIES];
uint8_t tally_class_direct_lo[CLASS_COUNT], tally_class_direct_hi[CLASS_COUNT];

static uint32_t class_size(unsigned idx)
{
	if (idx < CLASS_LINEAR)
		return CLASS_MIN + CLASS_STEP * idx;
	/* 2^k + j * 2^k / 8, j = 1..8 */
	unsigned k = CLASS_LINEAR_SHIFT + (idx - CLASS_LINEAR) / CLASS_PER_DOUBLING,
		 j = 1 + (idx - CLASS_LINEAR) % CLASS_PER_DOUBLING;
	return (1u << k) + j * (1u << (k - CLASS_DOUBLING_SHIFT));
}

void classes_init(void)
{
	for (unsigned c = 0; c < CLASS_COUNT; c++) {
		struct tally_class *k = &tally_classes[c];

		k->size = class_size(c);
		k->recip = (uint32_t)(((1ULL << 32) + k->size - 1) / k->size);
		k->hdr_cells = 0;
		if (SPAN_SIZE / k->size <= SPAN_INLINE_SLOTS) {
			/* few slots: metadata inline in the descriptor, no slot lost to it */
			k->nslots = SPAN_SIZE / k->size;
			k->slot_off = 0;
			continue;
		}
		/* the metadata has an entry per cell of the span (layout.h) */
		uint32_t cells = (uint32_t)((SPAN_SIZE + k->size - 1) / k->size);
		if (META_ENTRY * cells <= SEG_CELLS_SLOT) {
			/* in the segment header: no slot lost to it either (its
			 * length in 16-byte units) */
			k->nslots = SPAN_SIZE / k->size;
			k->slot_off = 0;
			k->hdr_cells = (META_ENTRY * cells + 15) & ~15U;
			continue;
		}
		/* at the span's start, in whole cells */
		uint32_t meta_cells = (META_ENTRY * cells + k->size - 1) / k->size;
		k->slot_off = meta_cells * k->size;
		k->nslots = (uint32_t)((SPAN_SIZE - k->slot_off) / k->size);
	}
	for (unsigned i = 0; i < DIRECT_ENTRIES; i++) {
		size_t q = (size_t)i << DIRECT_SHIFT;
		unsigned c = 0;
		while (c < CLASS_COUNT - 1 && tally_classes[c].size < q)
			c++;
		tally_class_small[i] = (uint8_t)c;
	}
	/* classes above DIRECT_MAX bytes have no direct entry: lo > hi */
	for (unsigned c = 0; c < CLASS_COUNT; c++) {
		tally_class_direct_lo[c] = 1;
		tally_class_direct_hi[c] = 0;
	}
	for (int i = DIRECT_ENTRIES - 1; i >= 0; i--)
		tally_class_direct_lo[tally_class_small[i]] = (uint8_t)i;
	for (unsigned i = 0; i < DIRECT_ENTRIES; i++)
		tally_class_direct_hi[tally_class_small[i]] = (uint8_t)i;
}
