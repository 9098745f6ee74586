/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The allocator's geometry, its size classes and the per-slot metadata that
 * ties a slot to the identity of docs/DESIGN.md §2. One heap per thread owns
 * segments; a segment is 64 spans of 64 KiB; span 0 of each segment is its
 * header; a span serves one size class of one resource group.
 *
 * Span layout (span i of a segment starts at seg + i * SPAN_SIZE):
 *
 *   [slot metadata: u16 per size-wide cell of the span][slot 0][slot 1]...[tail]
 *
 * The metadata is indexed by offset-in-span / size (the cell), so that the
 * fast paths find a slot's entry with one multiply and no subtraction; the
 * metadata's own cells and the tail's are never written and read as free,
 * which is how the free path refuses a pointer into them without a bounds
 * check. slot_off is therefore a whole number of cells. Two kinds of class
 * keep their metadata elsewhere, with slot_off 0: those with at most
 * SPAN_INLINE_SLOTS slots in the span descriptor, so that e.g. two 32 KiB
 * slots still fit a span; and those whose metadata fits SEG_CELLS_SLOT bytes
 * in the segment header, after the descriptors (span i's at a fixed place),
 * so that a span whose few survivors are far apart does not keep a page of
 * its own resident for their metadata alone: twelve spans' metadata share a
 * header page (the idle purge's floor, purge.c).
 *
 * Per-slot metadata (u16): 0 = free; otherwise bits 0..13 hold the requested
 * size + 1 (classes below META_Q_LIMIT: what malloc has in hand, so that it
 * stores it without a look at the span) or the rounding + 1 (slot size
 * minus requested size, plus one: the largest classes, whose sizes do not
 * fit), bit 14 marks an aligned block whose pointer may be inside the slot
 * and bit 15 a foreign free in flight (set by the freeing thread, cleared by
 * the owner's drain). meta_encode and meta_requested convert; the encoding
 * is part of the event contract (tally_meta_requested), as the traced free
 * writes the entry itself into its record. The free fast
 * path's whole test of the entry is then "positive as an int16".
 */
#ifndef TALLY_ALLOC_LAYOUT_H
#define TALLY_ALLOC_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../bpf/contract/tally_events.h"

#define TALLY_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define CACHE_LINE 64
#define SEGMENT_SHIFT 22
#define SEGMENT_SIZE (1UL << SEGMENT_SHIFT) /* 4 MiB, mapped 4 MiB-aligned */
#define SPAN_SHIFT 16
#define SPAN_SIZE (1UL << SPAN_SHIFT) /* 64 KiB */
#define SPANS_PER_SEGMENT 64
/* A span descriptor's size (struct span): span_of finds one by shifts. */
#define SPAN_DESC_SHIFT 8
#define SPAN_DESC_SIZE (1UL << SPAN_DESC_SHIFT)
#define OS_PAGE 4096UL
#define PAGES_PER_SPAN (SPAN_SIZE / OS_PAGE) /* 16: one bit each in span.discarded */
#define SPAN_INLINE_SLOTS 16
/* Metadata in the segment header (classes.c): span i's at SEG_CELLS_OFF +
 * (i - 1) * SEG_CELLS_SLOT, past the descriptors */
#define SEG_CELLS_OFF (SPANS_PER_SEGMENT * SPAN_DESC_SIZE)
#define SEG_CELLS_SLOT 768U

/*
 * Size classes (classes.c): CLASS_LINEAR classes in steps of CLASS_STEP up to
 * CLASS_LINEAR_MAX, then CLASS_PER_DOUBLING per doubling up to CLASS_MAX.
 * Every class size is a multiple of CLASS_STEP, and so is every slot_off:
 * every slot is SLOT_ALIGN-aligned.
 */
#define CLASS_STEP 16
#define CLASS_MIN CLASS_STEP /* the smallest class */
#define SLOT_ALIGN CLASS_STEP
#define CLASS_LINEAR 32					/* 16..512 */
#define CLASS_LINEAR_SHIFT 9				/* log2 of the last linear class */
#define CLASS_LINEAR_MAX (1U << CLASS_LINEAR_SHIFT)	/* 512 == CLASS_LINEAR * CLASS_STEP */
#define CLASS_DOUBLING_SHIFT 3				/* log2 of the classes per doubling */
#define CLASS_PER_DOUBLING (1U << CLASS_DOUBLING_SHIFT) /* 8: rounding under 12.5 % */
#define CLASS_COUNT 80	/* 32 linear, then 8 per doubling from 512 to 32 KiB (48) */
#define CLASS_MAX 32768 /* larger requests are mapped directly */
/* The most slots a span has: 64 KiB of the smallest class. */
#define SPAN_MAX_SLOTS (SPAN_SIZE / CLASS_MIN)
/* Requests up to DIRECT_MAX bytes find their class (tally_class_small) and
 * the heap's current span for it (heap.direct) in a table indexed by
 * direct_index(q), the size in 8-byte steps rounded up. */
#define DIRECT_MAX 1024
#define DIRECT_SHIFT 3
#define DIRECT_ENTRIES ((DIRECT_MAX >> DIRECT_SHIFT) + 1) /* 129 */
/* Past those, the table has an entry per class (DIRECT_CLASS), for the
 * requests above DIRECT_MAX, which find their class by size_to_class. */
#define DIRECT_CLASS(c) (DIRECT_ENTRIES + (c))
#define DIRECT_TOTAL (DIRECT_ENTRIES + CLASS_COUNT)
static inline size_t direct_index(size_t q)
{
	return (q + (1U << DIRECT_SHIFT) - 1) >> DIRECT_SHIFT;
}

#define META_FREE 0
#define META_ENTRY 2U			      /* bytes of metadata per cell: a uint16_t */
#define META_ROUND_MASK TALLY_META_ROUND_MASK /* rounding + 1 */
#define META_ALIGNED 0x4000u
#define META_FOREIGN 0x8000u		     /* the sign bit: see free_as */
#define META_ROUND_MAX (META_ROUND_MASK - 1) /* largest rounding a slot can record */
#define META_Q_LIMIT TALLY_META_Q_LIMIT	     /* classes below it record requested + 1 */
_Static_assert(META_ENTRY == sizeof(uint16_t), "a metadata entry is a uint16_t");

/* The metadata of a block of `q` bytes in a slot of `size`, flags aside;
 * meta_fits says whether it can be recorded at all. */
static inline uint16_t meta_encode(uint32_t size, size_t q)
{
	return (uint16_t)(size < META_Q_LIMIT ? q + 1 : size - q + 1);
}
static inline bool meta_fits(uint32_t size, size_t q)
{
	return size < META_Q_LIMIT || size - q <= META_ROUND_MAX;
}
/* The slot holds a block its owner may free: allocated, and no foreign free
 * in flight. With META_FOREIGN the sign bit, one sign test. */
static inline bool meta_owned(uint16_t m)
{
	return (int16_t)m > 0;
}
/* The requested size of the block whose metadata is m (not free). */
static inline uint32_t meta_requested(uint32_t size, uint16_t m)
{
	uint32_t v = (uint32_t)(m & META_ROUND_MASK) - 1;
	return size < META_Q_LIMIT ? v : size - v;
}

struct tally_class {
	uint32_t size;	    /* slot size, bytes */
	uint32_t nslots;    /* slots per span */
	uint32_t slot_off;  /* offset of slot 0 in the span: the metadata bytes (0 if elsewhere) */
	uint32_t recip;	    /* ceil(2^32 / size): offset / size by multiply and shift */
	uint32_t hdr_cells; /* bytes of metadata in the segment header (0: in the span or inline) */
};

/* classes.c */
extern struct tally_class tally_classes[CLASS_COUNT];
extern uint8_t tally_class_small[DIRECT_ENTRIES];  /* class of every q <= DIRECT_MAX */
extern uint8_t tally_class_direct_lo[CLASS_COUNT]; /* direct[] entries of each class: lo..hi */
extern uint8_t tally_class_direct_hi[CLASS_COUNT];
void classes_init(void);
static inline unsigned size_to_class(size_t q)
{
	if (q <= DIRECT_MAX)
		return tally_class_small[direct_index(q)];
	unsigned k = 63 - __builtin_clzl(q - 1); /* 2^k < q <= 2^(k+1), k >= 10 */
	size_t step = 1UL << (k - CLASS_DOUBLING_SHIFT);
	unsigned j = (unsigned)((q - (1UL << k) + step - 1) / step); /* 1..8 */
	return CLASS_LINEAR + (k - CLASS_LINEAR_SHIFT) * CLASS_PER_DOUBLING + (j - 1);
}

#endif /* TALLY_ALLOC_LAYOUT_H */
