/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Spans (span.c): the descriptor of a 64 KiB span, the arithmetic that takes
 * a pointer to its span, cell and slot, the span's free list and its count of
 * slots in use. Where a span's bytes are in each state is written at the top
 * of span.c, and checked in the debug build (span_check.c).
 */
#ifndef TALLY_ALLOC_SPAN_H
#define TALLY_ALLOC_SPAN_H

#include <stdatomic.h>

#include "layout.h"
#include "os.h"

enum span_state {
	SPAN_UNASSIGNED = 0, /* no class: never used (virgin) or retired (returned) */
	SPAN_ACTIVE = 1,     /* in its bin's list, or full (in no list) */
	SPAN_EMPTY = 2,	     /* no live slot, retained: its resident bytes are hysteresis */
};

enum span_flags {
	SPAN_FULL = 1,	/* no free slot known to the owner; in no bin list */
	SPAN_DIRTY = 2, /* on the heap's dirty list: freed into since its last reclaim */
};

struct heap;
struct bin;
struct segment;

/*
 * span.used carries, beside its count, a bit set whenever the span's flags
 * are anything but SPAN_DIRTY (full, or freed into since its last reclaim):
 * the free path then learns from one decrement whether it may stay fast (the
 * result is positive) or must see to the span (it emptied, or a flag needs
 * handling). Every flag change goes through span_set_flags.
 */
#define USED_SLOW 0x80000000u
#define SPAN_SAMPLE_CELLS 8

/*
 * One span descriptor; lives in the segment header. SPAN_DESC_SIZE (256)
 * bytes, so that a pointer finds its descriptor by shifts; the first cache
 * line holds all the fast paths read, and the foreign-free list sits on
 * another line, so that other threads' frees do not keep stealing the
 * owner's line. Owner-only fields unless noted.
 */
struct span {
	/* hot: malloc and free */
	void *free;	    /* local free list: free slots none of whose pages is discarded */
	uint16_t *cells;    /* metadata by cell (span_cell_product): the head or inline_meta */
	uintptr_t owner_tp; /* the owning thread's thread pointer; 0 while no thread owns it */
	uint32_t size;	    /* slot size (copy of the class's) */
	uint32_t recip;	    /* copy of the class's reciprocal */
	uint64_t ev_tmpl;   /* the traced fast paths' record but its type and size (ev_word) */
	uint32_t used;	    /* slots allocated or waiting in xfree (span_used), | USED_SLOW */
	uint8_t state;	    /* enum span_state */
	uint8_t flags;	    /* enum span_flags */
	uint8_t src_term;   /* term of bytes at or above bump: virgin or returned */
	uint8_t index;	    /* span number inside its segment */
	/* its sampled blocks still live (sample.c, under its lock), a bit
	 * each: bit cell % 64 of every listed one (sample_cells), all of them
	 * once more than SPAN_SAMPLE_CELLS were; the traced free fast path
	 * takes the slow one only for a block whose bit is set
	 * (span_sample_maybe), one branch rarely taken. (It tested `sampled`
	 * here: at 64 KiB a sixth of the churn's spans held a sample, a branch
	 * the predictor missed on every other free; perf on the churn:
	 * free_traced and free_sampled 4 ns of the 5.9 an operation that
	 * sampling then cost. With 32 bits, 7.6 frees a sample at 512 KiB
	 * still took the slow path for another block's bit, about 25 ns each:
	 * group and cls, read on slow paths only, left this line for 64.) */
	uint64_t sample_bits;
	/*
	 * The span's share of its group's counters (struct group_ctr). The
	 * allocation path counts in one word (acc), folded into abytes and
	 * nalloc every 512 allocations (the span's tick); frees by the owner
	 * are not counted as they happen: what was allocated and is no longer
	 * in the metadata, less what other threads freed, was freed by the owner
	 * (span_owner_frees). All of it goes to the heap's counters when the
	 * span is retired.
	 */
	uint64_t acc;	   /* allocations since the last fold: count << 54 | requested bytes */
	uint64_t abytes;   /* requested bytes allocated, folded from acc */
	uint64_t nalloc;   /* allocations, folded from acc */
	uint64_t xbytes;   /* requested bytes freed by other threads and drained */
	uint64_t ndrained; /* foreign frees drained (counted by the freeing heap) */
	/* cold: slow paths */
	uint32_t nslots;       /* slots in this span */
	uint32_t returned;     /* bytes of free slots on discarded pages: the span's `returned` */
	uint32_t parked_slots; /* free slots with a discarded page: not in the free list */
	uint16_t discarded;    /* page bitmap: pages handed back with madvise */
	uint16_t meta_skip;    /* slot_off / size: slot i's entry is cells[meta_skip + i] */
	uint64_t stamp_ms;     /* SPAN_EMPTY: empty since; dirty: dirty since */
	struct span *next, *prev;	  /* bin list, active or empty (bin.h) */
	struct span *lru_next, *lru_prev; /* heap's empty-span list, oldest first (bin.h) */
	struct span *dirty_next;	  /* heap's dirty list */
	uint16_t inline_meta[SPAN_INLINE_SLOTS];
	/* written by other threads */
	_Atomic(void *) xfree __attribute__((aligned(CACHE_LINE))); /* foreign frees */
	struct span *xnext; /* link in heap.xspans (written by the pusher) */
	struct heap *heap;  /* owner (read by any thread) */
	uint32_t slot_off;  /* offset of slot 0 (== metadata bytes counted as overhead) */
	uint32_t bump;	    /* slots ever handed to the free list: [0, bump); 0 when unassigned */
	/* the cells of its sampled blocks, while `sampled` is at most
	 * SPAN_SAMPLE_CELLS and none overflowed since it was 0 (sample.c) */
	/* (8, not 4: at 64 KiB the churn's spans overflowed 4 often enough
	 * that 50 k of 20 M frees took the table's lock for nothing) */
	uint16_t sample_cells[SPAN_SAMPLE_CELLS];
	uint16_t sampled; /* the table's entries in it */
	uint8_t sample_overflow;
	/* (slow paths only: the hot line holds sample_bits) */
	uint16_t group; /* resource group of every slot */
	uint16_t cls;	/* class index */
} __attribute__((aligned(SPAN_DESC_SIZE)));
_Static_assert(sizeof(struct span) == SPAN_DESC_SIZE, "span descriptors are SPAN_DESC_SIZE");

/* Whether the block at metadata cell `cell` may be a sampled one, at a
 * glance: its bit (span_sample_hit says for sure). */
static inline bool span_sample_maybe(const struct span *sp, uint32_t cell)
{
	return (__atomic_load_n(&sp->sample_bits, __ATOMIC_RELAXED) >> (cell & 63)) & 1;
}

/* Whether the block at metadata cell `cell` may be a sampled one: its span
 * lists them while they are few, else any may be. Read without the lock:
 * a block's own entry is in place before the block is handed out. */
static inline bool span_sample_hit(const struct span *sp, uint32_t cell)
{
	uint32_t n = __atomic_load_n(&sp->sampled, __ATOMIC_RELAXED);

	if (n > SPAN_SAMPLE_CELLS || __atomic_load_n(&sp->sample_overflow, __ATOMIC_RELAXED))
		return true;
	for (uint32_t k = 0; k < n; k++)
		if (__atomic_load_n(&sp->sample_cells[k], __ATOMIC_RELAXED) == cell)
			return true;
	return false;
}

static inline struct segment *segment_of(const void *p)
{
	return (struct segment *)((uintptr_t)p & ~(SEGMENT_SIZE - 1));
}
static inline char *span_base(const struct span *sp)
{
	return (char *)segment_of(sp) + ((size_t)sp->index << SPAN_SHIFT);
}
/* Span i's descriptor is i * SPAN_DESC_SIZE bytes into its segment (segment.h
 * asserts it): the span number shifted into place by one shift and one mask. */
static inline struct span *span_of(const void *p)
{
	uintptr_t a = (uintptr_t)p;
	return (struct span *)((a & ~(SEGMENT_SIZE - 1)) |
			       ((a >> (SPAN_SHIFT - SPAN_DESC_SHIFT)) &
				((SPANS_PER_SEGMENT - 1) << SPAN_DESC_SHIFT)));
}
/* A pointer's cell: the slot it is in is cell - slot_off / size. The low half
 * of the product is below recip exactly when p is at a cell's start. */
static inline uint64_t span_cell_product(const struct span *sp, const void *p)
{
	return (uint64_t)((uintptr_t)p & (SPAN_SIZE - 1)) * sp->recip;
}
/* The metadata by slot index (slot i's entry is span_meta(sp)[i]). */
static inline uint16_t *span_meta(const struct span *sp)
{
	return sp->cells + sp->meta_skip;
}
static inline uint32_t span_slot_index(const struct span *sp, const void *p)
{
	uint32_t off = (uint32_t)((uintptr_t)p & (SPAN_SIZE - 1)) - sp->slot_off;
	return (uint32_t)(((uint64_t)off * sp->recip) >> 32);
}
static inline char *span_slot(const struct span *sp, uint32_t i)
{
	return span_base(sp) + sp->slot_off + (size_t)i * sp->size;
}

/*
 * A free slot holds its free-list link, nothing else: malloc finds the
 * slot's metadata from its address (span_slot_index), which it has before
 * the slot's own cache line arrives, so the metadata store does not wait
 * for it, and free writes one word into the slot, not two.
 */
struct free_slot {
	struct free_slot *next;
};

/* A free slot's link is the slot's first word, which a write to the freed
 * block overwrites: a link that leaves its span is such a write (or a wild
 * one), said in one line before it is followed to a crash or a corrupted
 * heap. One compare on the pop; links inside the span are not checked. */
static inline void free_link_check(const void *slot, const void *next)
{
	if (__builtin_expect(((uintptr_t)next ^ (uintptr_t)slot) >= SPAN_SIZE, 0) && next)
		tally_fatal(
			"a free block's link was overwritten: a write to a freed block, or past "
			"the end of the block before it",
			slot);
}

static inline void span_push_free(struct span *sp, void *p)
{
	struct free_slot *f = p;
	f->next = sp->free;
	sp->free = f;
}

static inline uint32_t span_used(const struct span *sp)
{
	return sp->used & ~USED_SLOW;
}
static inline void span_set_flags(struct span *sp, uint8_t flags)
{
	sp->flags = flags;
	sp->used = span_used(sp) | (flags == SPAN_DIRTY ? 0 : USED_SLOW);
}
/* A free's decrement of used: false while the span needs nothing more.
 * On x86-64 one instruction and the branch on its flags (the compiler would
 * load, subtract, store and test). */
static inline __attribute__((always_inline)) bool span_used_dec(struct span *sp)
{
#if defined(__x86_64__) && !defined(__clang__)
	__asm__ goto("subl $1, %0\n\tjle %l[slow]" : "+m"(sp->used) : : "cc" : slow);
	return false;
slow:
	return true;
#else
	return (int32_t)--sp->used <= 0;
#endif
}

/* acc counts allocations in its top 10 bits: the 512th makes it negative,
 * which the add itself tells (the sign flag), and that is the fold. The
 * bytes of 512 allocations stay below 2^54. */
#define ACC_SHIFT 54
#define ACC_BYTES ((1ULL << ACC_SHIFT) - 1)
static inline void span_fold_acc(struct span *sp)
{
	sp->abytes += sp->acc & ACC_BYTES;
	sp->nalloc += sp->acc >> ACC_SHIFT;
	sp->acc = 0;
}
struct span_frees {
	uint64_t abytes, nalloc; /* allocated: bytes and objects */
	uint64_t bytes, objs;	 /* freed by the owner */
};
/* The span's allocations and what the owner has freed of them, from its
 * counters and a scan of its metadata. Any thread may call it; exact when
 * the owner is not inside the allocator. */
struct span_frees span_owner_frees(const struct span *sp);

/* span.c: the transitions of a span's life, each with its byte movements */
struct span *span_find_free(struct heap *h, struct bin *b);
void span_claim(struct heap *h, struct span *sp, unsigned cls);
void span_make_empty(struct heap *h, struct span *sp);
void span_retire(struct heap *h, struct span *sp);
void span_repurpose(struct heap *h, struct span *sp, unsigned cls);
void span_reclaim(struct heap *h, struct span *sp);
void span_drain(struct heap *h, struct span *sp);
void span_free_slow(struct heap *h, struct span *sp);

#endif /* TALLY_ALLOC_SPAN_H */
