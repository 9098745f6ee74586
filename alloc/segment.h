/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Segments (segment.c): 4 MiB mapped 4 MiB-aligned, owned by one heap, and
 * the two ways a pointer is known to be in one: the arena, one reservation
 * carved into segments, and a map of the segments beyond it.
 */
#ifndef TALLY_ALLOC_SEGMENT_H
#define TALLY_ALLOC_SEGMENT_H

#include "span.h"

/*
 * The header, span 0 of its segment. Span 0 is no span, and its descriptor's
 * slot holds the segment's own fields, past a first line that stays zero (so
 * that a pointer into the header reads as in an unassigned span: recip 0,
 * state 0): the descriptors then start at the segment's first byte, and
 * span_of is a mask, a shift and an or, with nothing to add.
 */
struct segment {
	union {
		struct span spans[SPANS_PER_SEGMENT];
		struct {
			char span0_hot[CACHE_LINE]; /* zero */
			struct heap *heap;	    /* owner */
			struct segment *next;	    /* heap's segment list */
			uint64_t
				free_mask; /* bit i: span i unassigned (bit 0, the header, never) */
			uint32_t hdr_bytes; /* header bytes counted as segment_overhead */
			uint16_t
				cell_pages; /* bit p: page p of the header holds metadata (in use) */
		};
	};
};
_Static_assert(offsetof(struct segment, spans) == 0, "descriptors from the segment's start");
_Static_assert(sizeof(struct segment) == SEG_CELLS_OFF,
	       "the header's metadata after the descriptors");
_Static_assert(SEG_CELLS_OFF + (SPANS_PER_SEGMENT - 1) * SEG_CELLS_SLOT <= SPAN_SIZE,
	       "every span's metadata in span 0");
_Static_assert(offsetof(struct span, recip) < CACHE_LINE &&
		       offsetof(struct span, state) < CACHE_LINE,
	       "the header's zero line reads as an unassigned span's");

/* A byte per 4 MiB of the 47-bit user address space: 1 where a segment of
 * ours is. 32 MiB of .bss, of which only the pages covering our segments are
 * ever touched; a byte (not a bit) so that the free path tests it with one
 * compare. */
#define USER_VA_BITS 47
#define SEG_MAP_LEN (1UL << (USER_VA_BITS - SEGMENT_SHIFT))
extern _Atomic uint8_t tally_seg_map[SEG_MAP_LEN];
static inline bool seg_map_has(const void *p)
{
	uintptr_t i = (uintptr_t)p >> SEGMENT_SHIFT;
	return i < SEG_MAP_LEN && atomic_load_explicit(&tally_seg_map[i], memory_order_relaxed);
}
/*
 * The arena: one reservation of address space, carved into segments in
 * address order and never given back, so that [base, base + len) holds only
 * segments of ours and the free path knows a pointer is one of ours by one
 * subtraction and one compare, with no load that depends on the pointer.
 * Segments beyond it (the reservation refused or used up) are mapped one by
 * one and known by the map above. base is set once, by the first segment
 * (before the program can have passed a pointer of ours to another thread).
 *
 * The word holding base also holds, in its top two bytes (bits 48..63, above
 * any user address), the semaphore of the tally:batch probe (segment.c):
 * the kernel raises it while a tracer is attached, which puts base_word
 * 2^48 or more above base, so that p - base_word wraps past len for every
 * p and arena_has_untraced fails. The untraced free path thus learns both
 * things from one subtraction and one compare, at no cost for the probe.
 */
#define ARENA_RESERVE (64UL << 30) /* 16384 segments */
#define ARENA_BASE_BITS 48
#define ARENA_BASE_MASK ((1ULL << ARENA_BASE_BITS) - 1)
/*
 * Plain words, read without atomics so that the free path's test can take
 * them as memory operands: each is aligned (one load, never torn), base is
 * added once, before any pointer exists, with an atomic add that keeps the
 * kernel's semaphore, and len only grows, under arena_lock, with a release
 * store.
 */
struct tally_arena {
	uint64_t base_word; /* bits 0..47: base; bytes 6..7: tally_batch_semaphore */
	uintptr_t len;	    /* bytes carved, from base */
	/* base alone, for the traced free path's test, which otherwise masks
	 * base_word (three instructions of its 51) */
	uintptr_t base;
};
/* offsetof(base_word) + 6, for the assembler */
#define ARENA_SEMAPHORE_OFFSET 6
_Static_assert(ARENA_SEMAPHORE_OFFSET * 8 == ARENA_BASE_BITS, "the semaphore is above base");
extern struct tally_arena tally_arena __attribute__((visibility("hidden")));
static inline uintptr_t arena_base(void)
{
	return tally_arena.base;
}
static inline bool arena_has(const void *p)
{
	return (uintptr_t)p - arena_base() < tally_arena.len;
}
/* arena_has, and nobody tracing */
static inline bool arena_has_untraced(const void *p)
{
	return (uintptr_t)p - tally_arena.base_word < tally_arena.len;
}

/* segment.c: the heap decides when to take a span from which (heap_refill) */
struct span *segment_claim_span(struct heap *h);
struct span *segment_claim_new_span(struct heap *h);
uint16_t *segment_cells(struct heap *h, struct span *sp, uint32_t len);
void segment_release_span(struct heap *h, struct span *sp);
void segment_lock_prepare(void);
void segment_lock_release(void);

#endif /* TALLY_ALLOC_SEGMENT_H */
