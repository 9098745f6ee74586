/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The allocator's types and the invariants that tie them to the identity of
 * DESIGN.md §2. One heap per thread owns segments; a segment is 64 spans of
 * 64 KiB; span 0 of each segment is its header; a span serves one size class
 * of one resource group.
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
 * the owner's drain). meta_encode and meta_requested convert. The free fast
 * path's whole test of the entry is then "positive as an int16".
 */
#ifndef TALLY_ALLOC_INTERNAL_H
#define TALLY_ALLOC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "../bpf/tally_events.h"
#include "tally_alloc.h"

#define TALLY_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

#define SEGMENT_SHIFT 22
#define SEGMENT_SIZE (1UL << SEGMENT_SHIFT) /* 4 MiB, mapped 4 MiB-aligned */
#define SPAN_SHIFT 16
#define SPAN_SIZE (1UL << SPAN_SHIFT) /* 64 KiB */
#define SPANS_PER_SEGMENT 64
#define OS_PAGE 4096UL
#define PAGES_PER_SPAN (SPAN_SIZE / OS_PAGE) /* 16: one bit each in span.discarded */
#define SPAN_INLINE_SLOTS 16
/* The most slots a span has: 64 KiB of the smallest (16 B) class. */
#define SPAN_MAX_SLOTS (SPAN_SIZE / 16)
/* Metadata in the segment header (classes.c): span i's at SEG_CELLS_OFF +
 * (i - 1) * SEG_CELLS_SLOT, past the descriptors */
#define SEG_CELLS_OFF (SPANS_PER_SEGMENT * 256UL)
#define SEG_CELLS_SLOT 768U

#define CLASS_COUNT 80	/* 16..512 step 16 (32), then 8 per doubling to 32 KiB (48) */
#define CLASS_MAX 32768 /* larger requests are mapped directly */

#define META_FREE 0
#define META_ROUND_MASK 0x3fffu /* rounding + 1 */
#define META_ALIGNED 0x4000u
#define META_FOREIGN 0x8000u		     /* the sign bit: see free_as */
#define META_ROUND_MAX (META_ROUND_MASK - 1) /* largest rounding a slot can record */
#define META_Q_LIMIT META_ROUND_MASK	     /* classes below it record requested + 1 */

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

#define PURGE_MS_DEFAULT 1000
#define TICK_OPS 1024 /* slow-path operations between two looks at the clock */
#define FLUSH_MS 50   /* a partial batch waits at most about this long when traced */

struct tally_class {
	uint32_t size;	    /* slot size, bytes */
	uint32_t nslots;    /* slots per span */
	uint32_t slot_off;  /* offset of slot 0 in the span: the metadata bytes (0 if elsewhere) */
	uint32_t recip;	    /* ceil(2^32 / size): offset / size by multiply and shift */
	uint32_t hdr_cells; /* bytes of metadata in the segment header (0: in the span or inline) */
};

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

/*
 * span.used carries, beside its count, a bit set whenever the span's flags
 * are anything but SPAN_DIRTY (full, or freed into since its last reclaim):
 * the free path then learns from one decrement whether it may stay fast (the
 * result is positive) or must see to the span (it emptied, or a flag needs
 * handling). Every flag change goes through span_set_flags.
 */
#define USED_SLOW 0x80000000u

/*
 * One span descriptor; lives in the segment header. 256 bytes, so that a
 * pointer finds its descriptor by shifts; the first cache line holds all the
 * fast paths read, and the foreign-free list sits on another line, so that
 * other threads' frees do not keep stealing the owner's line.
 * Owner-only fields unless noted.
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
	uint16_t group;	    /* resource group of every slot */
	uint16_t cls;	    /* class index */
	uint8_t state;	    /* enum span_state */
	uint8_t flags;	    /* enum span_flags */
	uint8_t src_term;   /* term of bytes at or above bump: virgin or returned */
	uint8_t index;	    /* span number inside its segment */
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
	uint32_t nslots;	  /* slots in this span */
	uint32_t ret;		  /* bytes of free slots on discarded pages: `returned` */
	uint32_t npark;		  /* free slots with a discarded page: not in the free list */
	uint16_t discarded;	  /* page bitmap: pages handed back with madvise */
	uint16_t meta_skip;	  /* slot_off / size: slot i's entry is cells[meta_skip + i] */
	uint64_t stamp_ms;	  /* SPAN_EMPTY: empty since; dirty: dirty since */
	struct span *next, *prev; /* bin list (active or empty) */
	struct span *lru_next, *lru_prev; /* heap's empty-span list, oldest first */
	struct span *dirty_next;	  /* heap's dirty list */
	uint16_t inline_meta[SPAN_INLINE_SLOTS];
	/* written by other threads */
	_Atomic(void *) xfree __attribute__((aligned(64))); /* foreign frees */
	struct span *xnext; /* link in heap.xspans (written by the pusher) */
	struct heap *heap;  /* owner (read by any thread) */
	uint32_t slot_off;  /* offset of slot 0 (== metadata bytes counted as overhead) */
	uint32_t bump;	    /* slots ever handed to the free list: [0, bump); 0 when unassigned */
} __attribute__((aligned(256)));

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
			char span0_hot[64];   /* zero */
			struct heap *heap;    /* owner */
			struct segment *next; /* heap's segment list */
			uint64_t
				free_mask; /* bit i: span i unassigned (bit 0, the header, never) */
			uint32_t hdr_bytes; /* header bytes counted as segment_overhead */
			uint16_t
				cell_pages; /* bit p: page p of the header holds metadata (in use) */
		};
	};
};
_Static_assert(sizeof(struct segment) == SEG_CELLS_OFF,
	       "the header's metadata after the descriptors");
_Static_assert(SEG_CELLS_OFF + (SPANS_PER_SEGMENT - 1) * SEG_CELLS_SLOT <= SPAN_SIZE,
	       "every span's metadata in span 0");
_Static_assert(offsetof(struct span, recip) < 64 && offsetof(struct span, state) < 64,
	       "the header's zero line reads as an unassigned span's");

struct bin {
	struct span *head;  /* spans of this class and group with free slots; head is current */
	struct span *empty; /* empty spans retained (hysteresis) */
};

/*
 * Per-heap counters, written only by the heap's owner (plain adds, read with
 * relaxed loads and merged). Signed: a foreign free adds to the freeing heap
 * what the allocating heap subtracts. The eleven public terms are derived, so
 * that the fast paths count as little as they can:
 *   live      = the sum over groups of allocated - deallocated bytes
 *   slots     = the sum over spans of used * size (allocated or in a
 *               foreign-free list)
 *   rounding  = slots - cache - (live - large_live) + large_round
 *   span_free = pool - slots
 */
struct heap_stats {
	int64_t mapped;
	int64_t segment_overhead;
	int64_t virgin;
	int64_t returned;
	int64_t hysteresis;
	int64_t cache;
	int64_t pool; /* resident slot bytes below bump cursors: free, live or cached */
	int64_t large_live;
	int64_t large_round;
	int64_t large_count;
	int64_t spans_assigned;
};

/* A group's lifetime counters: a heap's, plus the shares of its spans
 * (struct span: abytes ...), which stats.c adds when it reads them. */
struct group_ctr {
	int64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs;
};

/* Discards are gathered and handed to the kernel in one call (os_discard_many):
 * a madvise costs about 100 us on these VMs whatever its length. */
#define DISCARD_BATCH 128

struct heap {
	/* the current span of the current group's bin for every request of at
	 * most 1024 bytes, by (size + 7) / 8: one load from size to span; never
	 * NULL (tally_span_none, whose free list is empty, stands for none) */
	struct span *direct[129];
	struct bin *bins;     /* the current group's bins */
	uint32_t group;	      /* the current group */
	int32_t tick;	      /* operations left until the next tick */
	struct heap_stats st; /* see above */
	struct group_ctr gc[TALLY_MAX_GROUPS];
	struct bin *gbins[TALLY_MAX_GROUPS]; /* per-group bin tables, created on first use */
	struct bin bins0[CLASS_COUNT];	     /* root's bins */
	struct segment *segs;
	_Atomic(struct span *) xspans; /* spans whose xfree went non-empty */
	struct span *dirty;	       /* spans with local frees since their last reclaim */
	struct span *lru_head, *lru_tail;
	uint64_t now_ms; /* coarse clock, updated at ticks */
	uint64_t last_sweep_ms;
	uint64_t last_flush_ms;
	struct heap *all_next;	  /* registry of every heap */
	struct heap *orphan_next; /* orphan list */
	bool orphaned;
	uint32_t tid;
	uintptr_t tp; /* the owning thread's thread pointer (spans' owner_tp); 0: orphaned */
	uint64_t id;
	uint64_t seq; /* records handed over so far */
	/* idle purge (purge.c) */
	uint64_t busy;	       /* 1 inside a slow operation of the owner (op_begin) */
	struct heap *acct;     /* NULL, or the heap a purge counts and records in */
	_Atomic uint8_t purge; /* enum purge_state; written under tally_heaps_lock */
	uint64_t purge_due_ms; /* the purger's: when its sweep is due (0: not known yet) */
	uint32_t purge_kicks;  /* spans that became reclaimable, until the purger runs */
	uint32_t ndiscard;     /* pages ranges waiting in discard[] (heap_discard) */
	struct iovec discard[DISCARD_BATCH];
	struct tally_batch batch;
};

/*
 * A slow operation: every call into the allocator that may touch the calling
 * thread's heap beyond the fast paths runs between op_begin and op_end, which
 * set and clear the heap's busy word: the purger (purge.c) reads it, after a
 * membarrier, to know that none is in flight. The fast paths publish less
 * (purge.c says what). A thread without a heap writes tally_heap_none's,
 * which nobody reads.
 */
static inline __attribute__((always_inline)) void op_begin(struct heap *h)
{
	h->busy = 1;
	/* the compiler must not move the operation's loads above the store; the
	 * processor may, and the purger's membarrier takes care of that */
	__atomic_signal_fence(__ATOMIC_SEQ_CST);
}
static inline __attribute__((always_inline)) void op_end(struct heap *h)
{
	/* release: a purger that reads 0 sees every store of the operation */
	__atomic_store_n(&h->busy, 0, __ATOMIC_RELEASE);
}

/* The heap whose counters and records take a sweep's byte movements: the
 * heap itself, or the purger's own while it sweeps another thread's. */
static inline struct heap *heap_acct(struct heap *h)
{
	return h->acct ? h->acct : h;
}

/* classes.c */
extern struct tally_class tally_classes[CLASS_COUNT];
extern uint8_t tally_class_small[129];
extern uint8_t tally_class_direct_lo[CLASS_COUNT]; /* direct[] entries of each class: lo..hi */
extern uint8_t tally_class_direct_hi[CLASS_COUNT];
void classes_init(void);
static inline unsigned size_to_class(size_t q)
{
	if (q <= 1024)
		return tally_class_small[(q + 7) >> 3];
	unsigned k = 63 - __builtin_clzl(q - 1); /* 2^k < q <= 2^(k+1), k >= 10 */
	size_t step = 1UL << (k - 3);
	unsigned j = (unsigned)((q - (1UL << k) + step - 1) / step); /* 1..8 */
	return 32 + (k - 9) * 8 + (j - 1);
}

/* os.c */
void *os_map(size_t len);
void *os_map_flags(size_t len, int flags);
void *os_map_aligned(size_t len, size_t align);
void *os_reserve(size_t len, size_t align);
int os_commit(void *p, size_t len);
int os_unmap(void *p, size_t len);
void os_discard(void *p, size_t len);
void os_discard_many(const struct iovec *iov, unsigned n);
void os_touch(void *p, size_t len);
uint64_t os_now_ms(void);
uint64_t os_resident(const void *p, size_t len);
uint32_t os_gettid(void);
void tally_fatal(const char *what, const void *ptr) __attribute__((noreturn));

/* segment.c */
/* A byte per 4 MiB of the 47-bit user address space: 1 where a segment of
 * ours is. 32 MiB of .bss, of which only the pages covering our segments are
 * ever touched; a byte (not a bit) so that the free path tests it with one
 * compare. */
#define SEG_MAP_LEN (1UL << (47 - SEGMENT_SHIFT))
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
#define ARENA_BASE_MASK ((1ULL << 48) - 1)
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
};
#define ARENA_SEMAPHORE_OFFSET 6 /* offsetof(base_word) + 6, for the assembler */
extern struct tally_arena tally_arena __attribute__((visibility("hidden")));
static inline uintptr_t arena_base(void)
{
	return tally_arena.base_word & ARENA_BASE_MASK;
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
static inline struct segment *segment_of(const void *p)
{
	return (struct segment *)((uintptr_t)p & ~(SEGMENT_SIZE - 1));
}
static inline char *span_base(const struct span *sp)
{
	return (char *)segment_of(sp) + ((size_t)sp->index << SPAN_SHIFT);
}
static inline struct span *span_of(const void *p)
{
	_Static_assert(sizeof(struct span) == 256, "span descriptors are 256 bytes");
	/* span i's descriptor is i * 256 bytes into its segment: the span
	 * number shifted into place by one shift and one mask */
	uintptr_t a = (uintptr_t)p;
	_Static_assert(offsetof(struct segment, spans) == 0,
		       "descriptors from the segment's start");
	return (struct span *)((a & ~(SEGMENT_SIZE - 1)) |
			       ((a >> (SPAN_SHIFT - 8)) & ((SPANS_PER_SEGMENT - 1) << 8)));
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

static inline char *span_slot(const struct span *sp, uint32_t i)
{
	return span_base(sp) + sp->slot_off + (size_t)i * sp->size;
}
struct span *segment_claim_span(struct heap *h);
uint16_t *segment_cells(struct heap *h, struct span *sp, uint32_t len);
void segment_release_span(struct heap *h, struct span *sp);
void segment_lock_prepare(void);
void segment_lock_release(void);

/* span.c */
struct span *span_acquire(struct heap *h, unsigned cls);
void span_make_empty(struct heap *h, struct span *sp);
void span_retire(struct heap *h, struct span *sp);
void span_reclaim(struct heap *h, struct span *sp);
void span_drain(struct heap *h, struct span *sp);
void span_free_slow(struct heap *h, struct span *sp);
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

/* heap.c */
extern __thread struct heap *tally_tls_heap __attribute__((tls_model("initial-exec")));
/* The block the thread's free is at (the free fast path's one store): the
 * purger leaves that block's span alone (purge.c). */
extern __thread void *tally_tls_freeing __attribute__((tls_model("initial-exec")));
/* Past the thread's exit hand-over: each call borrows a heap (heap.c). */
extern __thread bool tally_tls_exited __attribute__((tls_model("initial-exec")));
void heap_release(struct heap *h);
extern struct heap tally_heap_none;
extern struct span tally_span_none;
extern uint32_t tally_purge_ms;
extern pthread_mutex_t tally_heaps_lock;
extern struct heap *tally_heaps; /* registry, under tally_heaps_lock */
struct heap *heap_get_slow(void);
void heap_settle(struct heap *h);
/* The calling thread's thread pointer (%fs:0 on x86-64): one load, with no
 * look-up of the heap's TLS slot, for the free path's "is it mine". */
static inline uintptr_t thread_pointer(void)
{
	return (uintptr_t)__builtin_thread_pointer();
}
/* The calling thread's heap, for a slow path inside op_begin/op_end: if the
 * purger has turned its fast paths off, they are restored (heap_settle) before
 * the heap is touched. */
static inline struct heap *heap_get(void)
{
	struct heap *h = tally_tls_heap;
	if (unlikely(h == &tally_heap_none))
		h = heap_get_slow();
	if (h && unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
	return h;
}
void heap_drain_xspans(struct heap *h);
void heap_tick(struct heap *h);
void heap_sweep(struct heap *h, bool force);
void heap_purge_sweep(struct heap *h, const struct span *skip, struct heap *acct);
uint64_t heap_due(const struct heap *h, bool owned, const struct span *skip);
uint64_t heap_sweep_orphans(struct heap *by);
void heap_set_owner(struct heap *h, uintptr_t tp);
void heap_direct_fill(struct heap *h);
/* A direct[] entry: none while the purger has the fast paths off (the owner
 * fills the table anew when it settles). */
static inline struct span *heap_direct_entry(struct heap *h, struct span *head)
{
	return head && !atomic_load_explicit(&h->purge, memory_order_relaxed) ? head :
										&tally_span_none;
}
static inline void heap_direct_sync(struct heap *h, struct bin *b)
{
	if (b < h->bins || b >= h->bins + CLASS_COUNT)
		return;
	unsigned c = (unsigned)(b - h->bins);
	for (unsigned i = tally_class_direct_lo[c]; i <= tally_class_direct_hi[c]; i++)
		h->direct[i] = heap_direct_entry(h, b->head);
}
void *heap_meta_alloc(struct heap *h, size_t len);
struct heap *heap_new_locked(void);
void heap_discard(struct heap *h, void *p, size_t len);
void heap_discard_flush(struct heap *h);

/* large.c */
void *large_alloc(struct heap *h, size_t q, size_t align, bool zero);
bool large_free(struct heap *h, void *p, size_t expect_q);
bool large_size(const void *p, size_t *q, size_t *len);
void *large_realloc(struct heap *h, void *p, size_t q);
void large_sweep(struct heap *h, bool force);
uint64_t large_due(void);
void large_lock_prepare(void);
void large_lock_release(void);
uint64_t large_resident(void);

/* events.c: one record, when someone traces (else one branch) */
#if defined(TALLY_ALLOC_TEST_SINK)
#define ev_tracing() 1
#elif defined(TALLY_NO_PROBES)
#define ev_tracing() 0
#else
extern unsigned short tally_batch_semaphore __attribute__((visibility("hidden")));
#define ev_tracing() unlikely(tally_batch_semaphore != 0)
#endif
void ev_flush(struct heap *h);
/* The traced fast paths' record of malloc or free of n bytes: one word from
 * the span's template, no second look at the semaphore (their caller
 * looked). True when the batch is full: the caller flushes it, last, so that
 * the fast path keeps no register across a call. */
static inline uint64_t span_ev_template(uint16_t group, uint32_t size)
{
	return tally_ev_word(0, group, 0, size);
}
static inline __attribute__((always_inline)) bool ev_word(struct heap *h, const struct span *sp,
							  uint8_t type, uint32_t n)
{
	struct tally_batch *b = &h->batch;
	b->words[b->count] = sp->ev_tmpl | (uint64_t)n << 16 | type;
	return ++b->count == TALLY_BATCH_WORDS;
}
static inline void ev(struct heap *h, uint8_t type, uint8_t term, uint16_t group, uint32_t n,
		      uint64_t bytes)
{
	if (!ev_tracing())
		return;
	struct tally_batch *b = &h->batch;
	struct tally_ev e = { type, term, group, n, bytes };
	/* a two-word record is never split across batches */
	if (!tally_ev_is_word(type) && b->count + 2 > TALLY_BATCH_WORDS)
		ev_flush(h);
	tally_ev_put(b->words, &b->count, &e);
	if (b->count == TALLY_BATCH_WORDS)
		ev_flush(h);
}

#endif /* TALLY_ALLOC_INTERNAL_H */
