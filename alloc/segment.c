// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Segments: 4 MiB mapped 4 MiB-aligned, owned by one heap. Span 0 is the
 * header: the descriptors, then the metadata of the spans whose class keeps it
 * there (layout.h). The header's pages in use are segment_overhead; the rest
 * of span 0 is untouched (virgin) until a span's metadata needs it. A segment
 * hands out its unassigned spans and takes back retired ones; when a heap
 * claims one, and when it maps a segment rather than retire an empty span,
 * is the heap's choice (heap_refill).
 */
#include <string.h>

#include "internal.h"

_Atomic uint8_t tally_seg_map[SEG_MAP_LEN];

#if !defined(TALLY_NO_PROBES) && !defined(TALLY_ALLOC_TEST_SINK)
/* In the section the probe notes point their semaphores into; the batch
 * probe's semaphore is a name for two bytes of it (segment.h). */
__attribute__((section(".probes"), used)) struct tally_arena tally_arena;
_Static_assert(offsetof(struct tally_arena, base_word) + 6 == ARENA_SEMAPHORE_OFFSET,
	       "the semaphore is the top two bytes of base_word");
#define STR_(x) #x
#define STR(x) STR_(x)
__asm__(".globl tally_batch_semaphore\n\t"
	".hidden tally_batch_semaphore\n\t"
	".set tally_batch_semaphore, tally_arena + " STR(ARENA_SEMAPHORE_OFFSET));
/* OpenTelemetry's memory probes (sample.c: otel_memory:alloc and :free) name
 * the same two bytes: a reader of theirs raises what the fast paths already
 * test, so that the allocator then samples (docs/DESIGN.md §7.1), and the
 * untraced paths test nothing more. */
#define ARENA_SEMAPHORE_ALIAS(name)                                                                \
	__asm__(".globl " #name "\n\t.hidden " #name "\n\t.set " #name                             \
		", tally_arena + " STR(ARENA_SEMAPHORE_OFFSET))
ARENA_SEMAPHORE_ALIAS(otel_memory_alloc_semaphore);
ARENA_SEMAPHORE_ALIAS(otel_memory_free_semaphore);
#else
struct tally_arena tally_arena;
#endif
static pthread_mutex_t arena_lock = PTHREAD_MUTEX_INITIALIZER;
static bool arena_tried;
/* What the reservation got: ARENA_RESERVE, or less where the address space
 * is limited (ulimit -v, valgrind, which refused 64 GiB and sent every free
 * down the slow path: 230 instructions a malloc+free pair against 93). */
static size_t arena_cap;
#define ARENA_RESERVE_MIN (256UL << 20)

static uintptr_t arena_reserve(void)
{
	for (size_t len = ARENA_RESERVE; len >= ARENA_RESERVE_MIN; len /= 4) {
		void *p = os_reserve(len, SEGMENT_SIZE);
		if (p) {
			arena_cap = len;
			return (uintptr_t)p;
		}
	}
	return 0;
}

/* The next segment of the arena, or NULL when there is none to give. */
static void *arena_carve(void)
{
	void *seg = NULL;

	pthread_mutex_lock(&arena_lock);
	if (!arena_tried) {
		arena_tried = true;
		/* an add, not a store: a tracer may already have raised the
		 * semaphore in the top bytes, and the kernel writes those alone */
		uintptr_t base = arena_reserve();
		tally_arena.base = base; /* before any pointer of the arena exists */
		__atomic_fetch_add(&tally_arena.base_word, base, __ATOMIC_RELAXED);
	}
	uintptr_t base = arena_base(), len = tally_arena.len;
	if (base && len < arena_cap && os_commit((void *)(base + len), SEGMENT_SIZE) == 0) {
		seg = (void *)(base + len);
		/* len grows only over committed memory: a stray pointer inside
		 * [base, base + len) reads a segment header, never a hole */
		__atomic_store_n(&tally_arena.len, len + SEGMENT_SIZE, __ATOMIC_RELEASE);
	}
	pthread_mutex_unlock(&arena_lock);
	return seg;
}

/* fork: the child must not inherit the lock held by a thread it does not have */
void segment_lock_prepare(void)
{
	pthread_mutex_lock(&arena_lock);
}

void segment_lock_release(void)
{
	pthread_mutex_unlock(&arena_lock);
}

static void seg_map_set(struct segment *seg, bool on)
{
	atomic_store_explicit(&tally_seg_map[(uintptr_t)seg >> SEGMENT_SHIFT], on,
			      memory_order_release);
}

static struct segment *segment_new(struct heap *h)
{
	struct segment *seg = arena_carve();
	if (!seg)
		seg = os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE);
	if (!seg)
		return NULL;
	uint32_t hdr = (uint32_t)((sizeof(*seg) + OS_PAGE - 1) & ~(OS_PAGE - 1));
	_Static_assert(sizeof(struct segment) <= SPAN_SIZE, "segment header fits span 0");

	seg->heap = h;
	seg->free_mask = ~1ULL;
	seg->hdr_bytes = hdr;
	seg->cell_pages = (uint16_t)((1u << (hdr / OS_PAGE)) - 1);
	for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
		seg->spans[i].index = (uint8_t)i;
		seg->spans[i].src_term = TALLY_TERM_VIRGIN;
		seg->spans[i].heap = h;
		seg->spans[i].owner_tp = h->tp;
		seg->spans[i].flags = 0;
	}
	os_touch(seg, hdr);
	seg->next = h->segs;
	h->segs = seg;
	seg_map_set(seg, true);

	h->stats.mapped += SEGMENT_SIZE;
	h->stats.segment_overhead += hdr;
	h->stats.virgin += SEGMENT_SIZE - hdr;
	ev(h, TALLY_EV_SEG_MAP, 0, 0, hdr, SEGMENT_SIZE);
	return seg;
}

/* The lowest unassigned span of seg, which has one, taken. */
static struct span *segment_take_span(struct segment *seg)
{
	unsigned i = (unsigned)__builtin_ctzll(seg->free_mask);
	seg->free_mask &= ~(1ULL << i);
	return &seg->spans[i];
}

/* An unassigned span of one of the heap's segments; NULL when every span of
 * them is assigned. The caller assigns it a class. */
struct span *segment_claim_span(struct heap *h)
{
	for (struct segment *seg = h->segs; seg; seg = seg->next)
		if (seg->free_mask)
			return segment_take_span(seg);
	return NULL;
}

/* The first span of a segment mapped for it; NULL when out of memory. */
struct span *segment_claim_new_span(struct heap *h)
{
	struct segment *seg = segment_new(h);

	return seg ? segment_take_span(seg) : NULL;
}

/*
 * The metadata of span sp, len bytes in its segment's header (classes with
 * hdr_cells), all free. A header page first used for it goes from virgin to
 * segment_overhead (recorded as the header growing), and stays there: the
 * header's pages are never handed back.
 */
uint16_t *segment_cells(struct heap *h, struct span *sp, uint32_t len)
{
	struct segment *seg = segment_of(sp);
	uint32_t off = (uint32_t)SEG_CELLS_OFF + (sp->index - 1u) * SEG_CELLS_SLOT;
	uint32_t grown = 0;

	for (uint32_t p = off / OS_PAGE; p <= (off + len - 1) / OS_PAGE; p++) {
		if (seg->cell_pages & (1u << p))
			continue;
		seg->cell_pages |= (uint16_t)(1u << p);
		os_touch((char *)seg + p * OS_PAGE, OS_PAGE);
		grown += OS_PAGE;
	}
	if (grown) {
		seg->hdr_bytes += grown;
		h->stats.virgin -= grown;
		h->stats.segment_overhead += grown;
		ev(h, TALLY_EV_SEG_MAP, 0, 0, grown, 0);
	}
	uint16_t *cells = (uint16_t *)((char *)seg + off);
	/* a former span's here were all free when it retired; a stray write
	 * through a dangling pointer is not worth trusting that */
	memset(cells, 0, len);
	return cells;
}

void segment_release_span(struct heap *h, struct span *sp)
{
	(void)h;
	segment_of(sp)->free_mask |= 1ULL << sp->index;
}
