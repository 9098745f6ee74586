// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocator unit tests, under ASan and UBSan: the allocator runs beside the
 * sanitizers' malloc under tally_p_ names, so nothing but these calls reaches
 * it, and "everything freed" really means zero live bytes at the end.
 * Every batch goes through the replay (alloc_oracle.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "alloc_oracle.h"
#include "expect_abort.h"
#include "alloc_stress.h"

static int64_t live_now(void)
{
	oracle_check("live_now");
	return (int64_t)oracle_stats().live;
}

static void classes__cover_every_size_with_the_smallest_class(void **state)
{
	(void)state;
	T(free)(T(malloc)(1)); /* initializes the class table */
	assert_int_equal(tally_classes[0].size, 16);
	assert_int_equal(tally_classes[CLASS_COUNT - 1].size, CLASS_MAX);
	for (unsigned c = 1; c < CLASS_COUNT; c++) {
		assert_true(tally_classes[c].size > tally_classes[c - 1].size);
		assert_int_equal(tally_classes[c].size % 16, 0);
		if (tally_classes[c].size <= 512)
			assert_int_equal(tally_classes[c].size - tally_classes[c - 1].size, 16);
	}
	for (size_t q = 0; q <= CLASS_MAX; q++) {
		unsigned c = size_to_class(q);
		uint32_t s = tally_classes[c].size;
		assert_true(c < CLASS_COUNT);
		assert_true(s >= q);
		if (c > 0)
			assert_true(tally_classes[c - 1].size < q);
		if (q > 128 && (s - q) * 8 >= s)
			fail_msg("rounding of %zu in class %u is 12.5%% or more", q, s);
	}
}

static void classes__span_geometry_fits_and_divides_exactly(void **state)
{
	(void)state;
	for (unsigned c = 0; c < CLASS_COUNT; c++) {
		const struct tally_class *k = &tally_classes[c];
		assert_true(k->slot_off + (uint64_t)k->nslots * k->size <= SPAN_SIZE);
		uint32_t ncells = (SPAN_SIZE + k->size - 1) / k->size;
		if (k->hdr_cells) {
			/* in the header: an entry for every cell, in its slot */
			assert_int_equal(k->slot_off, 0);
			assert_true(k->hdr_cells >= 2 * ncells);
			assert_true(k->hdr_cells <= SEG_CELLS_SLOT);
			assert_int_equal(k->nslots, SPAN_SIZE / k->size);
		} else if (k->slot_off == 0) {
			assert_true(k->nslots <= SPAN_INLINE_SLOTS);
		} else {
			/* in the span only where the header's slot is too small */
			assert_true(2 * ncells > SEG_CELLS_SLOT);
			/* whole cells, enough for an entry per cell, and no
			 * more than it takes: one cell fewer would not do */
			uint32_t cells = (SPAN_SIZE + k->size - 1) / k->size;
			assert_int_equal(k->slot_off % k->size, 0);
			assert_true(k->slot_off >= 2 * cells);
			assert_true(k->slot_off - k->size < 2 * cells);
			assert_int_equal(k->slot_off % 16, 0);
			/* every slot that fits after it */
			assert_true(k->slot_off + (uint64_t)(k->nslots + 1) * k->size > SPAN_SIZE);
		}
		/* the inline metadata has an entry for every cell too */
		if (k->slot_off == 0 && !k->hdr_cells)
			assert_true(ncells <= SPAN_INLINE_SLOTS);
		for (uint32_t i = 0; i < k->nslots; i++) {
			uint64_t lo = (uint64_t)i * k->size, hi = lo + k->size - 1;
			assert_int_equal((lo * k->recip) >> 32, i);
			assert_int_equal((hi * k->recip) >> 32, i);
		}
	}
}

static void segment__blocks_live_in_aligned_segments(void **state)
{
	(void)state;
	char *p = T(malloc)(100);
	assert_non_null(p);
	assert_true(seg_map_has(p));
	assert_true(arena_has(p)); /* the free path's quick test knows it */
	struct segment *seg = segment_of(p);
	assert_int_equal((uintptr_t)seg % SEGMENT_SIZE, 0);
	struct span *sp = span_of(p);
	assert_int_equal(sp->size, 112);
	assert_true(sp->index >= 1);
	assert_int_equal(((uintptr_t)p - (uintptr_t)span_base(sp) - sp->slot_off) % 112, 0);
	for (size_t q = 16; q <= CLASS_MAX; q += 8) {
		void *b = T(malloc)(q);
		assert_int_equal((uintptr_t)b % 16, 0);
		T(free)(b);
	}
	assert_false(seg_map_has(&seg));
	T(free)(p);
}

/* A 400-byte class keeps its metadata in the segment header, in span i's
 * slot there, on a header page counted as overhead: the span's first page
 * holds slots, so a survivor elsewhere in the span keeps only its own page
 * resident. A 112-byte class keeps it at the span's start. */
static void segment__mid_classes_keep_their_metadata_in_the_header(void **state)
{
	(void)state;
	char *p = T(malloc)(400);
	assert_non_null(p);
	struct span *sp = span_of(p);
	struct segment *seg = segment_of(p);
	uintptr_t cells = (uintptr_t)sp->cells,
		  at = (uintptr_t)seg + SEG_CELLS_OFF + (sp->index - 1u) * SEG_CELLS_SLOT;
	assert_int_equal(sp->slot_off, 0);
	assert_int_equal(cells, at);
	assert_true(cells + 2 * ((SPAN_SIZE + 399) / 400) <= at + SEG_CELLS_SLOT);
	assert_true(seg->cell_pages & (1u << ((at - (uintptr_t)seg) / OS_PAGE)));
	assert_true(seg->hdr_bytes >= SEG_CELLS_OFF + OS_PAGE);
	assert_int_not_equal(span_meta(sp)[span_slot_index(sp, p)], META_FREE);
	assert_int_equal(((uintptr_t)p - (uintptr_t)span_base(sp)) % 400, 0);
	char *q = T(malloc)(100);
	assert_non_null(q);
	assert_true(span_of(q)->slot_off > 0);
	assert_int_equal((uintptr_t)span_of(q)->cells, (uintptr_t)span_base(span_of(q)));
	T(free)(q);
	T(free)(p);
	assert_int_equal(span_meta(sp)[span_slot_index(sp, p)], META_FREE);
}

static void identity__every_operation_balances_and_live_is_exact(void **state)
{
	(void)state;
	int64_t base = live_now();
	char *a = T(malloc)(1);
	assert_int_equal(live_now() - base, 1);
	char *b = T(calloc)(10, 10);
	assert_int_equal(live_now() - base, 101);
	char *c = T(malloc)(40000); /* large */
	assert_int_equal(live_now() - base, 40101);
	assert_int_equal(oracle_stats().large_count, 1);
	char *d = T(malloc)(0);
	assert_non_null(d);
	assert_int_equal(live_now() - base, 40101);
	b = T(realloc)(b, 5000);
	assert_int_equal(live_now() - base, 45001);
	c = T(realloc)(c, 100000);
	assert_int_equal(live_now() - base, 105001);
	c = T(realloc)(c, 10); /* large to small */
	assert_int_equal(live_now() - base, 5011);
	assert_int_equal(oracle_stats().large_count, 0);
	void *e;
	assert_int_equal(T(posix_memalign)(&e, 256, 300), 0);
	assert_int_equal(live_now() - base, 5311);
	T(free)(a);
	T(free)(b);
	T(free)(c);
	T(free)(d);
	T(free)(e);
	assert_int_equal(live_now(), base);
}

/* The metadata records the requested size itself below META_Q_LIMIT and the
 * rounding above it: both sides of the boundary, plain and aligned, in place
 * by realloc, and freed by another thread. */
static void *free_in_thread(void *p)
{
	T(free)(p);
	return NULL;
}

static void identity__live_is_exact_on_both_sides_of_the_metadata_encodings(void **state)
{
	(void)state;
	static const size_t sizes[] = { 1,     1024,  1025,  16382, 16383,
					16384, 16385, 20000, 32767, CLASS_MAX };
	for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
		size_t q = sizes[k];
		int64_t base = live_now();
		char *a = T(malloc)(q);
		assert_int_equal(live_now() - base, (int64_t)q);
		void *b;
		assert_int_equal(T(posix_memalign)(&b, 64, q), 0);
		assert_int_equal(live_now() - base, (int64_t)(2 * q));
		assert_int_equal(T(malloc_usable_size)(a) >= q, 1);
		T(free_sized)(a, q); /* the size it recorded */
		assert_int_equal(live_now() - base, (int64_t)q);
		pthread_t t;
		assert_int_equal(pthread_create(&t, NULL, free_in_thread, b), 0);
		assert_int_equal(pthread_join(t, NULL), 0);
		tally_alloc_collect(0); /* drain the foreign free */
		assert_int_equal(live_now(), base);
		char *c = T(malloc)(q);
		size_t whole = T(malloc_usable_size)(c); /* the slot: same class */
		assert_ptr_equal(T(realloc)(c, whole), c);
		assert_int_equal(live_now() - base, (int64_t)whole);
		T(free)(c);
		assert_int_equal(live_now(), base);
	}
}

/* The free path takes a span as the caller's own by its thread pointer: a
 * thread's exit must withdraw that from its heap's spans (a later thread may
 * get the same thread pointer), and the thread that adopts the heap gets it. */
struct tp_probe {
	void *block;
	uintptr_t tp;
	bool owned_while_running;
};

static void *alloc_and_note(void *arg)
{
	struct tp_probe *pr = arg;
	pr->block = T(malloc)(48);
	pr->tp = thread_pointer();
	pr->owned_while_running = span_of(pr->block)->owner_tp == pr->tp;
	return NULL;
}

static void heap__exit_withdraws_the_thread_pointer_and_adoption_sets_it(void **state)
{
	(void)state;
	int64_t base = live_now();
	struct tp_probe a = { 0 }, b = { 0 };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, alloc_and_note, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(a.owned_while_running);
	assert_int_equal(span_of(a.block)->owner_tp, 0); /* orphaned */
	/* the next thread adopts a heap (the orphan, here) and owns its spans */
	assert_int_equal(pthread_create(&t, NULL, alloc_and_note, &b), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(b.owned_while_running);
	assert_int_equal(span_of(b.block)->owner_tp, 0);
	assert_int_equal(live_now() - base, 96);
	T(free)(a.block); /* not ours: the foreign path */
	T(free)(b.block);
	tally_alloc_collect(1);
	assert_int_equal(live_now(), base);
}

static void realloc__same_class_stays_in_place(void **state)
{
	(void)state;
	int64_t base = live_now();
	char *p = T(malloc)(100);
	memset(p, 7, 100);
	char *q = T(realloc)(p, 103);
	assert_ptr_equal(p, q);
	assert_int_equal(live_now() - base, 103);
	q = T(realloc)(q, 97);
	assert_ptr_equal(p, q);
	assert_int_equal(q[96], 7);
	assert_int_equal(live_now() - base, 97);
	q = T(realloc)(q, 1000); /* another class: moves, keeps the bytes */
	assert_int_equal(q[0], 7);
	assert_int_equal(q[96], 7);
	assert_int_equal(live_now() - base, 1000);
	T(free)(q);
	assert_int_equal(live_now(), base);
}

static void calloc__zeroes_recycled_memory_and_checks_overflow(void **state)
{
	(void)state;
	unsigned char *p = T(malloc)(200);
	memset(p, 0xff, 200);
	T(free)(p);
	unsigned char *q = T(calloc)(1, 200);
	for (int i = 0; i < 200; i++)
		assert_int_equal(q[i], 0);
	T(free)(q);
	errno = 0;
	assert_null(T(calloc)(SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(T(reallocarray)(NULL, SIZE_MAX / 2, 3));
	assert_int_equal(errno, ENOMEM);
	errno = 0;
	assert_null(T(malloc)(SIZE_MAX - 10));
	assert_int_equal(errno, ENOMEM);
}

static void aligned__every_alignment_and_size(void **state)
{
	(void)state;
	static const size_t sizes[] = { 0, 1, 24, 100, 5000, 40000, 300000 };
	int64_t base = live_now();
	for (size_t align = 8; align <= (1u << 20); align <<= 1) {
		for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
			void *p = NULL;
			assert_int_equal(T(posix_memalign)(&p, align, sizes[i]), 0);
			assert_int_equal((uintptr_t)p % align, 0);
			assert_true(T(malloc_usable_size)(p) >= sizes[i]);
			memset(p, 1, sizes[i]);
			void *q = T(aligned_alloc)(align, sizes[i]);
			void *m = T(memalign)(align, sizes[i]);
			assert_int_equal((uintptr_t)q % align, 0);
			assert_int_equal((uintptr_t)m % align, 0);
			assert_int_equal(live_now() - base, 3 * (int64_t)sizes[i]);
			T(free)(p);
			T(free_aligned_sized)(q, align, sizes[i]);
			T(free)(m);
		}
	}
	void *v = T(valloc)(10), *pv = T(pvalloc)(10);
	assert_int_equal((uintptr_t)v % 4096, 0);
	assert_int_equal((uintptr_t)pv % 4096, 0);
	assert_true(T(malloc_usable_size)(pv) >= 4096);
	T(free)(v);
	T(free)(pv);
	void *p;
	assert_int_equal(T(posix_memalign)(&p, 24, 10), EINVAL);
	assert_int_equal(T(posix_memalign)(&p, 4, 10), EINVAL);
	/* memalign and aligned_alloc as glibc: up to 16 is malloc's, others
	 * rounded up to a power of two, refused only past SIZE_MAX / 2 + 1 */
	static const size_t odd[][2] = { { 0, 16 },    { 3, 16 },      { 24, 32 },    { 48, 64 },
					 { 100, 128 }, { 3000, 4096 }, { 5000, 8192 } };
	for (unsigned i = 0; i < sizeof(odd) / sizeof(odd[0]); i++) {
		void *a = T(aligned_alloc)(odd[i][0], 10), *m = T(memalign)(odd[i][0], 64);
		assert_non_null(a);
		assert_non_null(m);
		assert_int_equal((uintptr_t)a % odd[i][1], 0);
		assert_int_equal((uintptr_t)m % odd[i][1], 0);
		T(free)(a);
		T(free)(m);
	}
	errno = 0;
	assert_null(T(aligned_alloc)(SIZE_MAX / 2 + 2, 10));
	assert_int_equal(errno, EINVAL);
	errno = 0;
	assert_null(T(memalign)(SIZE_MAX, 10));
	assert_int_equal(errno, EINVAL);
	assert_int_equal(live_now(), base);
}

/* An aligned block whose pointer is its slot's start takes the plain free
 * path: exact live, the slot reused, and a second free still caught. */
static char *aligned_at_slot_start(void **others, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		char *p = NULL;
		assert_int_equal(T(posix_memalign)((void **)&p, 64, 48), 0);
		struct span *sp = span_of(p);
		uint32_t off = (uint32_t)((uintptr_t)p & (SPAN_SIZE - 1)) - sp->slot_off;
		if (off % sp->size == 0)
			return p;
		others[i] = p;
	}
	fail_msg("no 64-aligned block at a slot's start in %zu tries", n);
	return NULL;
}

static void aligned__block_at_its_slot_start_frees_like_any_other(void **state)
{
	(void)state;
	void *others[16] = { 0 };
	int64_t base = live_now();
	char *p = aligned_at_slot_start(others, 16);
	size_t n_others = 0;
	while (n_others < 16 && others[n_others])
		n_others++;
	assert_int_equal(live_now() - base, (int64_t)(48 * (n_others + 1)));
	T(free)(p);
	assert_int_equal(live_now() - base, (int64_t)(48 * n_others));
	/* the slot went back to its span's free list: the next block of the
	 * class is it */
	char *q = T(malloc)(span_of(p)->size);
	assert_ptr_equal(q, p);
	T(free)(q);
	for (size_t i = 0; i < n_others; i++)
		T(free)(others[i]);
	assert_int_equal(live_now(), base);
}

static void large__pool_reuses_and_mremap_keeps_data(void **state)
{
	(void)state;
	tally_alloc_collect(1); /* an empty pool */
	int64_t base = live_now();
	char *p = T(malloc)(1 << 20);
	memset(p, 3, 1 << 20);
	uint64_t hyst = (oracle_check("large"), oracle_stats().hysteresis);
	T(free)(p);
	oracle_check("large freed to the pool");
	assert_int_equal(oracle_stats().hysteresis - hyst, 1 << 20);
	char *q = T(malloc)((1 << 20) - 100); /* fits the pooled mapping */
	assert_ptr_equal(p, q);
	oracle_check("large from the pool");
	assert_int_equal(oracle_stats().hysteresis, hyst);
	assert_int_equal(oracle_stats().rounding >= 100, 1);
	q = T(realloc)(q, 5 << 20);
	assert_int_equal(q[12345], 3);
	assert_int_equal(live_now() - base, 5 << 20);
	T(free)(q);
	tally_alloc_collect(1);
	oracle_check("large after collect");
	assert_int_equal(oracle_stats().large_count, 0);
	assert_int_equal(live_now(), base);
}

/* A pooled mapping serves a smaller block whole, up to 4 MiB smaller (its
 * slack the block's rounding), and no block smaller than that; the figures
 * replay at each step. */
static void large__pool_serves_a_smaller_block_within_its_slack(void **state)
{
	(void)state;
	tally_alloc_collect(1); /* an empty pool */
	int64_t base = live_now();
	char *p = T(malloc)(3 << 20);
	memset(p, 3, 3 << 20);
	char *big = T(malloc)(16 << 20);
	oracle_check("slack: before");
	struct tally_stats s0 = oracle_stats();
	T(free)(p);
	T(free)(big);
	char *q = T(malloc)(100 << 10); /* the 3 MiB mapping, whole */
	assert_ptr_equal(q, p);
	assert_int_equal(T(malloc_usable_size)(q), 3 << 20);
	char *r = T(malloc)(1 << 20); /* a fresh mapping: 16 MiB is too much */
	assert_ptr_not_equal(r, big);
	oracle_check("served whole");
	struct tally_stats s1 = oracle_stats();
	assert_int_equal(s1.mapped - s0.mapped, 1 << 20);
	assert_int_equal(s1.hysteresis - s0.hysteresis, 16 << 20);
	assert_int_equal(s1.rounding - s0.rounding, (3 << 20) - (100 << 10));
	assert_int_equal(live_now() - base, (100 << 10) + (1 << 20));
	T(free)(q);
	T(free)(r);
	tally_alloc_collect(1);
	oracle_check("slack: after collect");
	assert_int_equal(oracle_stats().large_count, 0);
	assert_int_equal(live_now(), base);
}

/* A block of 4 MiB or more is whole chunks (2 MiB): a pooled range of them
 * serves it from its head, cut at the block's end, and the rest stays
 * pooled; the parts freed join again. Nothing is mapped. The figures replay
 * at each step. */
static void large__pool_splits_a_range_of_chunks(void **state)
{
	(void)state;
	tally_alloc_collect(1); /* an empty pool */
	int64_t base = live_now();
	char *p = T(malloc)(12 << 20);
	memset(p, 3, 12 << 20);
	oracle_check("split: before");
	struct tally_stats s0 = oracle_stats();
	T(free)(p);
	char *q = T(malloc)(5 << 20); /* 3 chunks: the range's head */
	assert_ptr_equal(q, p);
	assert_int_equal(T(malloc_usable_size)(q), 6 << 20);
	char *r = T(malloc)((4 << 20) + 1); /* the rest, whole */
	assert_ptr_equal(r, p + (6 << 20));
	oracle_check("split");
	struct tally_stats s1 = oracle_stats();
	assert_int_equal(s1.mapped, s0.mapped);
	assert_int_equal(s1.hysteresis, s0.hysteresis);
	assert_int_equal(live_now() - base, (5 << 20) + (4 << 20) + 1);
	T(free)(r);
	T(free)(q);
	oracle_check("split: freed");
	assert_int_equal(oracle_stats().hysteresis - s0.hysteresis, 12 << 20);
	q = T(malloc)(12 << 20); /* the two parts joined */
	assert_ptr_equal(q, p);
	T(free)(q);
	tally_alloc_collect(1);
	oracle_check("split: after collect");
	assert_int_equal(oracle_stats().large_count, 0);
	assert_int_equal(live_now(), base);
}

static void expect_bytes(const char *p, size_t n, char c)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != c)
			fail_msg("byte %zu is %d, not %d", i, p[i], c);
}

/* A block that no pooled range holds takes the pool's pages, moved into it:
 * only what it lacks is mapped, and the pages it took are resident (no fault
 * to touch them). calloc zeroes them (they held a block); realloc of such a
 * block, which mremap cannot resize, keeps its bytes. Before, the block was
 * mapped whole and afresh, and faulted every page. */
static void large__a_block_takes_the_pooled_pages_it_lacks(void **state)
{
	(void)state;
	tally_alloc_collect(1); /* an empty pool */
	int64_t base = live_now();
	char *a = T(malloc)(8 << 20);
	memset(a, 7, 8 << 20);
	oracle_check("compose: before");
	struct tally_stats s0 = oracle_stats();
	T(free)(a);
	char *b = T(calloc)(1, 12 << 20);
	oracle_check("compose: moved");
	struct tally_stats s1 = oracle_stats();
	assert_int_equal(s1.mapped - s0.mapped, 4 << 20);
	assert_int_equal(s1.hysteresis, s0.hysteresis);
	assert_int_equal(os_resident(b, 8 << 20), 8 << 20);
	expect_bytes(b, 12 << 20, 0);
	memset(b, 5, 12 << 20);
	b = T(realloc)(b, 20 << 20);
	expect_bytes(b, 12 << 20, 5);
	b = T(realloc)(b, 6 << 20);
	expect_bytes(b, 6 << 20, 5);
	oracle_check("compose: resized");
	assert_int_equal(live_now() - base, 6 << 20);
	T(free)(b);
	tally_alloc_collect(1);
	oracle_check("compose: after collect");
	assert_int_equal(oracle_stats().large_count, 0);
	assert_int_equal(oracle_stats().hysteresis, 0);
	assert_int_equal(live_now(), base);
}

static int maps_count(void)
{
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0, c;

	assert_non_null(f);
	while ((c = fgetc(f)) != EOF)
		n += c == '\n';
	fclose(f);
	return n;
}

/* Blocks made of moved chunks, freed and moved again, many times over: the
 * process's mappings stay within the layouts' bound (16 a range), each block
 * keeps its bytes, and the figures replay. */
static void large__moved_chunks_keep_the_mappings_few(void **state)
{
	(void)state;
	enum { RING = 8, ROUNDS = 300 };
	char *ring[RING] = { 0 };
	size_t size[RING] = { 0 };
	uint64_t rng = 0x9e3779b97f4a7c15ull;
	tally_alloc_collect(1);
	int64_t base = live_now();
	int maps0 = maps_count();
	for (int i = 0; i < ROUNDS; i++) {
		rng = rng * 6364136223846793005ull + 1442695040888963407ull;
		unsigned slot = (unsigned)(rng >> 33) % RING;
		size_t n = (4 << 20) + (size_t)(rng >> 40) % (8 << 20);
		char *p = T(malloc)(n);
		for (size_t o = 0; o < n; o += 64 << 10)
			p[o] = (char)i;
		if (ring[slot]) {
			for (size_t o = 0; o < size[slot]; o += 64 << 10)
				if (ring[slot][o] != ring[slot][0])
					fail_msg("round %d: a block lost its bytes", i);
			T(free)(ring[slot]);
		}
		ring[slot] = p;
		size[slot] = n;
		memset(p, i, 1); /* its first byte, as the rest */
	}
	int grown = maps_count() - maps0;
	oracle_check("moved chunks");
	if (grown > (RING + 64) * 16)
		fail_msg("%d mappings more", grown);
	for (int i = 0; i < RING; i++)
		T(free)(ring[i]);
	tally_alloc_collect(1);
	oracle_check("moved chunks: after collect");
	assert_int_equal(live_now(), base);
}

/* Pooled pages are unmapped once the purge delay passes, by the purger. */
static void large__pooled_pages_go_after_the_delay(void **state)
{
	(void)state;
	tally_alloc_collect(1);
	char *p = T(malloc)(5 << 20);
	memset(p, 1, 5 << 20);
	oracle_check("large purge: before");
	struct tally_stats s0 = oracle_stats();
	T(free)(p);
	oracle_check("large purge: freed");
	assert_int_equal(oracle_stats().hysteresis - s0.hysteresis, 6 << 20);
	/* TALLY_ALLOC_PURGE_MS is 100 in this binary (main) */
	struct timespec ts = { 0, 250 * 1000000 };
	nanosleep(&ts, NULL);
	oracle_check("large purge: after the delay");
	assert_int_equal(oracle_stats().hysteresis, s0.hysteresis);
	assert_int_equal(s0.mapped - oracle_stats().mapped, 6 << 20);
}

static void reclaim__scattered_frees_hand_pages_back(void **state)
{
	(void)state;
	enum { N = 20000 };
	char **v = calloc(N, sizeof(*v));
	assert_non_null(v);
	for (int i = 0; i < N; i++) {
		v[i] = T(malloc)(200);
		memset(v[i], 1, 200);
	}
	oracle_check("reclaim: filled");
	uint64_t ret0 = oracle_stats().returned;
	for (int i = 0; i < N; i++)
		if (i % 64) {
			T(free)(v[i]);
			v[i] = NULL;
		}
	tally_alloc_collect(1);
	oracle_check("reclaim: collected");
	/* 63 of 64 blocks gone: most pages hold no survivor */
	assert_true(oracle_stats().returned - ret0 > (uint64_t)N * 200 / 2);
	/* and they are reused */
	for (int i = 0; i < N; i++)
		if (!v[i]) {
			v[i] = T(malloc)(200);
			memset(v[i], 2, 200);
		}
	oracle_check("reclaim: refilled");
	for (int i = 0; i < N; i++)
		T(free)(v[i]);
	oracle_check("reclaim: freed");
	free(v);
}

static void purge__empty_spans_retire_after_the_delay_without_collect(void **state)
{
	(void)state;
	enum { N = 6000 };
	char **v = calloc(N, sizeof(*v));
	assert_non_null(v);
	tally_alloc_collect(1);
	for (int i = 0; i < N; i++)
		v[i] = T(malloc)(1000);
	for (int i = 0; i < N; i++)
		T(free)(v[i]);
	oracle_check("purge: freed");
	assert_true(oracle_stats().hysteresis > 0);
	/* TALLY_ALLOC_PURGE_MS is 100 in this binary (main) */
	struct timespec ts = { 0, 250 * 1000000 };
	nanosleep(&ts, NULL);
	for (int i = 0; i < 3 * TICK_OPS; i++)
		T(free)(T(malloc)(32));
	oracle_check("purge: after the delay");
	assert_int_equal(oracle_stats().hysteresis, 0);
	free(v);
}

static void groups__free_charges_the_allocating_group(void **state)
{
	(void)state;
	struct tally_group_stats g5a, g5b, g0a, g0b;
	tally_alloc_group_stats(5, &g5a);
	tally_alloc_group_stats(0, &g0a);
	tally_alloc__set_group(5);
	char *p = T(malloc)(1000), *big = T(malloc)(100000);
	tally_alloc__set_group(0);
	T(free)(p);
	T(free)(big);
	tally_alloc_group_stats(5, &g5b);
	tally_alloc_group_stats(0, &g0b);
	assert_int_equal(g5b.allocated_bytes - g5a.allocated_bytes, 101000);
	assert_int_equal(g5b.deallocated_bytes - g5a.deallocated_bytes, 101000);
	assert_int_equal(g5b.allocated_objects - g5a.allocated_objects, 2);
	assert_int_equal(g5b.deallocated_objects - g5a.deallocated_objects, 2);
	assert_memory_equal(&g0a, &g0b, sizeof(g0a));
	/* realloc moves the block to the current group, even within its class */
	tally_alloc__set_group(6);
	p = T(malloc)(50);
	tally_alloc__set_group(8);
	p = T(realloc)(p, 52);
	tally_alloc__set_group(0);
	assert_int_equal(oracle_group_live(6), 0);
	assert_int_equal(oracle_group_live(8), 52);
	T(free)(p);
	assert_int_equal(oracle_group_live(8), 0);
	tally_alloc__set_group(TALLY_MAX_GROUPS + 3); /* out of range: root */
	p = T(malloc)(10);
	tally_alloc__set_group(0);
	T(free)(p);
	oracle_check("groups");
}

static void double_free(void)
{
	void *p = T(malloc)(64);
	T(free)(p);
	T(free)(p);
}

static void foreign_pointer_free(void)
{
	int x;
	T(free)(&x);
}

static void interior_free(void)
{
	char *p = T(malloc)(64);
	T(free)(p + 16);
}

static void never_given_free(void)
{
	char *p = T(malloc)(64);
	T(free)(p + 64 * 50); /* a slot of the same span no one asked for */
}

/* The part of the arena no segment has been carved from yet: never read. */
static void arena_hole_free(void)
{
	void *p = T(malloc)(64);
	(void)p;
	uintptr_t end = arena_base() + tally_arena.len;
	T(free)((void *)(end + 3 * SEGMENT_SIZE + 4096));
}

/* A segment's header span is no block. */
static void segment_header_free(void)
{
	char *p = T(malloc)(64);
	T(free)((char *)segment_of(p) + 512);
}

static void wrong_size_free(void)
{
	void *p = T(malloc)(64);
	T(free_sized)(p, 65);
}

static void aligned_double_free(void)
{
	void *others[16] = { 0 };
	char *p = aligned_at_slot_start(others, 16);
	T(free)(p);
	T(free)(p);
}

static void large_double_free(void)
{
	void *p = T(malloc)(100000);
	T(free)(p);
	T(free)(p);
}

/* malloc_usable_size and realloc of a freed block say who asked (issue 12
 * item 18: the diagnostic named free) */
static void usable_size_of_freed(void)
{
	void *p = T(malloc)(100);
	T(free)(p);
	(void)T(malloc_usable_size)(p);
}

static void realloc_of_freed(void)
{
	void *p = T(malloc)(100);
	T(free)(p);
	(void)T(realloc)(p, 200);
}

/* Writes into a free slot's link (issue 12 item 18: the next malloc
 * segfaulted with no message). */
static void write_after_free(void)
{
	char *p = T(malloc)(64);
	T(free)(p);
	memcpy(p, "written after its free", 23);
	for (int i = 0; i < 3; i++)
		(void)T(malloc)(64);
}

static void overflow_into_free(void)
{
	char *a = T(malloc)(64), *b = T(malloc)(64);
	T(free)(b);
	memset(a, 'x', 80); /* past a's end, over b's link */
	for (int i = 0; i < 3; i++)
		(void)T(malloc)(64);
}

static void *free_and_write(void *p)
{
	T(free)(p);
	memcpy(p, "written after a foreign free", 29);
	return NULL;
}

static void write_after_foreign_free(void)
{
	pthread_t t;
	void *p = T(malloc)(48);
	pthread_create(&t, NULL, free_and_write, p);
	pthread_join(t, NULL);
	/* the owner drains the span's foreign frees when its own list runs dry */
	for (int i = 0; i < 4096; i++)
		(void)T(malloc)(48);
}

static void errors__bad_frees_stop_with_a_diagnostic(void **state)
{
	(void)state;
	expect_abort(usable_size_of_freed, "malloc_usable_size of a freed block");
	expect_abort(realloc_of_freed, "realloc of a freed block");
	expect_abort(double_free, "double free");
	expect_abort(foreign_pointer_free, "never allocated");
	expect_abort(interior_free, "middle of a block");
	expect_abort(never_given_free, "never allocated");
	expect_abort(arena_hole_free, "never allocated");
	expect_abort(segment_header_free, "never allocated");
	expect_abort(wrong_size_free, "free_sized");
	expect_abort(aligned_double_free, "double free");
	expect_abort(large_double_free, "never allocated");
	expect_abort(write_after_free, "link was overwritten");
	expect_abort(overflow_into_free, "link was overwritten");
	expect_abort(write_after_foreign_free, "link was overwritten");
}

static void stress__threads_random_operations(void **state)
{
	(void)state;
	stress_random(4, 20000, 1);
}

static void stress__producer_consumer_cross_thread_frees(void **state)
{
	(void)state;
	stress_producer_consumer(2, 20000, 2);
}

static void stress__fork_child_allocates_normally(void **state)
{
	(void)state;
	stress_fork(3);
}

static void final__everything_freed_and_collected_leaves_nothing(void **state)
{
	(void)state;
	tally_alloc_collect(1);
	oracle_check("final");
	struct tally_stats s = oracle_stats();
	assert_int_equal(s.live, 0);
	assert_int_equal(s.rounding, 0);
	assert_int_equal(s.cache, 0);
	assert_int_equal(s.span_free, 0);
	assert_int_equal(s.hysteresis, 0);
	assert_int_equal(s.large_count, 0);
	assert_int_equal(s.spans_assigned, 0);
	assert_true(s.mapped > 0);
	assert_int_equal(tally_stats_predicted_resident(&s), s.segment_overhead);
}

int main(void)
{
	setenv("TALLY_ALLOC_PURGE_MS", "100", 1);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(classes__cover_every_size_with_the_smallest_class),
		cmocka_unit_test(classes__span_geometry_fits_and_divides_exactly),
		cmocka_unit_test(segment__blocks_live_in_aligned_segments),
		cmocka_unit_test(segment__mid_classes_keep_their_metadata_in_the_header),
		cmocka_unit_test(identity__every_operation_balances_and_live_is_exact),
		cmocka_unit_test(identity__live_is_exact_on_both_sides_of_the_metadata_encodings),
		cmocka_unit_test(heap__exit_withdraws_the_thread_pointer_and_adoption_sets_it),
		cmocka_unit_test(realloc__same_class_stays_in_place),
		cmocka_unit_test(calloc__zeroes_recycled_memory_and_checks_overflow),
		cmocka_unit_test(aligned__every_alignment_and_size),
		cmocka_unit_test(aligned__block_at_its_slot_start_frees_like_any_other),
		cmocka_unit_test(large__pool_reuses_and_mremap_keeps_data),
		cmocka_unit_test(large__pool_serves_a_smaller_block_within_its_slack),
		cmocka_unit_test(large__pool_splits_a_range_of_chunks),
		cmocka_unit_test(large__a_block_takes_the_pooled_pages_it_lacks),
		cmocka_unit_test(large__moved_chunks_keep_the_mappings_few),
		cmocka_unit_test(large__pooled_pages_go_after_the_delay),
		cmocka_unit_test(reclaim__scattered_frees_hand_pages_back),
		cmocka_unit_test(purge__empty_spans_retire_after_the_delay_without_collect),
		cmocka_unit_test(groups__free_charges_the_allocating_group),
		cmocka_unit_test(errors__bad_frees_stop_with_a_diagnostic),
		cmocka_unit_test(stress__threads_random_operations),
		cmocka_unit_test(stress__producer_consumer_cross_thread_frees),
		cmocka_unit_test(stress__fork_child_allocates_normally),
		cmocka_unit_test(final__everything_freed_and_collected_leaves_nothing),
	};
	return cmocka_run_group_tests_name("alloc_unit", tests, NULL, NULL);
}
