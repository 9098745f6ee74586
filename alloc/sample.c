// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sampling for heap profiles (sample.h, docs/DESIGN.md §7), as jemalloc, tcmalloc
 * and Go's runtime do: the gap between two samples is exponential with mean
 * RATE bytes, so that every allocated byte has the same chance, 1/RATE, to
 * end a gap; a block of S bytes is sampled with probability 1 - exp(-S/RATE),
 * and the tracer scales it by the inverse.
 *
 * Stacks are unwound here, in the process, with libgcc's unwinder from the
 * .eh_frame tables every x86-64 object carries (Debian builds without frame
 * pointers), paid once per sample, against a probe per sample or a copy of
 * the user stack into the kernel for an unwinder in BPF. The unwinder may
 * allocate (for frames registered at run time), so it runs outside the
 * allocator's operation, with the heap's `busy` keeping those allocations
 * from being sampled in turn.
 *
 * What a sample cost the churn (alloc_bench churn 1, 8 frames a stack;
 * callgrind on the test-sink build at TALLY_SAMPLE_RATE=65536, instructions
 * a sample): libgcc's unwind 12.8 k; the table's insert and its lock 0.2 k;
 * the module announcements (_dl_find_object a frame's object) 0.22 k; the
 * next gap 0.16 k; the free's lookup, lock and clock 0.38 k. In time (a
 * loop over each, 7 frames, caches cold: 4 MiB touched between calls): the
 * unwind 1.2-1.8 us, a clock read 0.03-0.06 us (kvm-clock's vDSO), a gap
 * 0.05 us. Before the spans' sample bits, the free fast path's look at the
 * span cost more than all of these together (span.h: sample_bits). A cache
 * of each return address's unwind rule (0.58 k instructions an unwind) was
 * tried and taken out: with it, a late attach to a busy process lost its
 * objects' announcements (every frame <unknown>) in 11 of 110 attaches with
 * heap rings, against 1 in 100 without (tests/profile's busy attach).
 *
 * Sampled blocks are remembered by address in one table (sampling is rare:
 * one lock), and each span counts the table's entries in it and sets a bit
 * per entry (sample_bits), so that the traced free fast path sends to the
 * slow path only the frees of blocks whose bit is set, where the span's list
 * (span_sample_hit) and then the table say whether it was sampled. A free while nobody
 * traces leaves its entry behind: a later sample at its address takes it
 * over, a later free reports an id the tracer never saw (which it ignores),
 * and a new tracer (tally_sample_epoch) starts with an empty table.
 */
#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "ptr_table.h"
#include "common/hash.h"
#include "common/sample_util.h"

/*
 * OpenTelemetry's memory profiling contract (the eBPF profiler's design doc
 * 00003-memory-profiling): otel_memory:alloc(user, size, w) for each sampled
 * block, w its unbiased weight in bytes, and otel_memory:free(ptr) for the
 * free of one. Their semaphores are tally:batch's two bytes (segment.c), so
 * a reader of theirs alone makes the traced paths run and the allocator
 * sample; they fire where tally's SAMPLE and SAMPLE_FREE records are made,
 * for the same blocks. A forked child that nobody traces has its sites
 * undone (probe_guard.c) and never reaches them.
 */
#if !defined(TALLY_ALLOC_TEST_SINK) && !defined(TALLY_NO_PROBES)
#include "common/probes.h"
extern unsigned short otel_memory_alloc_semaphore __attribute__((visibility("hidden")));
extern unsigned short otel_memory_free_semaphore __attribute__((visibility("hidden")));
static inline void otel_alloc(void *p, uint64_t q, uint64_t rate)
{
	uint64_t w = sample_weight(q, rate);
	if (probe_guard_ok())
		STAP_PROBE3(otel_memory, alloc, p, q, w);
}
static inline void otel_free(void *p)
{
	if (probe_guard_ok())
		STAP_PROBE1(otel_memory, free, p);
}
#else
static inline void otel_alloc(void *p, uint64_t q, uint64_t rate)
{
	(void)p, (void)q, (void)rate;
}
static inline void otel_free(void *p)
{
	(void)p;
}
#endif

uint64_t tally_sample_rate = SAMPLE_RATE_DEFAULT;
uint64_t tally_sample_epoch;

/* The objects whose frames samples carry, announced to the tracer in
 * TALLY_EV_MODULE records: once each, until tally_sample_epoch changes (a
 * new tracer, which saw none of them). Under sample_lock. */
static struct sample_mods mods;
/* the tracer the table's entries are for (tally_sample_epoch) */
static uint64_t tab_epoch;

/* The sampled blocks by address (ptr_table.h), under sample_lock. */
struct sample_ent {
	uintptr_t ptr;	  /* 0: empty */
	uint64_t tag;	  /* id << 1 | 1 for a large mapping (in no span) */
	uint64_t born_ns; /* its sample's moment (its lifetime at its free) */
	uint64_t pad;	  /* (a page holds a power of two of them) */
};
_Static_assert(OS_PAGE % sizeof(struct sample_ent) == 0 &&
		       !((OS_PAGE / sizeof(struct sample_ent)) &
			 (OS_PAGE / sizeof(struct sample_ent) - 1)),
	       "a page of entries is a power of two");

static pthread_mutex_t sample_lock = PTHREAD_MUTEX_INITIALIZER;
/* (slots are at least 16-byte aligned) */
static struct ptr_table tab = { .esize = sizeof(struct sample_ent), .key_shift = 4 };
static uint64_t next_id = 1;
void sample_init(void)
{
	const char *e = getenv("TALLY_SAMPLE_RATE");

	if (e && *e) {
		char *end;
		unsigned long long v = strtoull(e, &end, 10);
		if (!*end && e[0] != '-')
			tally_sample_rate = v;
	}
}

void sample_redraw(struct heap *h)
{
	struct heap_sample *s = &h->sample;
	uint64_t rate = __atomic_load_n(&tally_sample_rate, __ATOMIC_RELAXED);

	if (!s->rng) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		s->rng = hash_fib64(h->id) ^ (uint64_t)ts.tv_nsec ^ (uintptr_t)h;
		s->rng |= 1;
	}
	s->rate = rate;
	if (!rate) {
		h->sample_left = INT64_MAX;
		return;
	}
	h->sample_left = sample_gap(&s->rng, rate);
}

void sample_mark(struct heap *h, void *p, size_t q, uint16_t group, bool large)
{
	struct heap_sample *s = &h->sample;
	uint64_t rate = s->rate;

	sample_redraw(h);
	if (!rate || s->busy || h == &tally_heap_none)
		return;
	if (s->p) {
		s->dropped++;
		return;
	}
	s->p = p;
	s->q = q;
	s->group = group;
	s->large = large;
	s->p_rate = rate;
}

static void put_module(void *ctx, const struct tally_ev *e, const uint64_t *extra, uint32_t nextra);

/* The span's bits for the free fast path (span.h: sample_bits), from its
 * list, last. Under sample_lock. */
static void span_bits(struct span *sp)
{
	uint32_t n = sp->sampled;
	uint64_t bits = 0;

	if (n > SPAN_SAMPLE_CELLS || sp->sample_overflow)
		bits = ~0ull;
	for (uint32_t k = 0; bits != ~0ull && k < n; k++)
		bits |= 1ull << (sp->sample_cells[k] & 63);
	__atomic_store_n(&sp->sample_bits, bits, __ATOMIC_RELEASE);
}

/* One table entry more or less for a small block's span: its count is the
 * table's entries in it, whatever happened to the span meanwhile (segments
 * are never unmapped). Under sample_lock. */
static void span_count(const struct sample_ent *e, int d)
{
	if (e->tag & 1)
		return;
	struct span *sp = span_of((void *)e->ptr);
	uint16_t cell = (uint16_t)(span_cell_product(sp, (void *)e->ptr) >> 32);
	uint32_t n = sp->sampled;
	uint16_t *c = sp->sample_cells;
	if (d > 0) {
		if (n < SPAN_SAMPLE_CELLS)
			__atomic_store_n(&c[n], cell, __ATOMIC_RELAXED);
		else
			__atomic_store_n(&sp->sample_overflow, 1, __ATOMIC_RELAXED);
		__atomic_store_n(&sp->sampled, (uint16_t)(n + 1), __ATOMIC_RELEASE);
		span_bits(sp);
		return;
	}
	/* the last listed takes the place of the one that goes */
	for (uint32_t k = 0; n <= SPAN_SAMPLE_CELLS && k < n; k++) {
		if (c[k] == cell) {
			__atomic_store_n(&c[k], c[n - 1], __ATOMIC_RELAXED);
			break;
		}
	}
	__atomic_store_n(&sp->sampled, (uint16_t)(n - 1), __ATOMIC_RELEASE);
	if (n == 1)
		__atomic_store_n(&sp->sample_overflow, 0, __ATOMIC_RELAXED);
	span_bits(sp);
}

/* A new tracer (tally_sample_epoch): it never saw the entries of an earlier
 * one, nor the objects it was told of. Under sample_lock. */
static void epoch_check(void)
{
	uint64_t epoch = __atomic_load_n(&tally_sample_epoch, __ATOMIC_RELAXED);

	if (tab_epoch == epoch)
		return;
	tab_epoch = epoch;
	struct sample_ent *e = tab.v;
	for (size_t i = 0; i < tab.cap; i++) {
		if (e[i].ptr)
			span_count(&e[i], -1);
		e[i].ptr = 0;
	}
	tab.len = 0;
}

/* The block's id in the table, 0 when the table cannot grow. An entry left
 * at its address (its block freed while nobody traced) is taken over. */
static uint64_t tab_insert(struct heap *h, uintptr_t p, bool large, const uint64_t *pcs, unsigned n,
			   uint64_t born)
{
	uint64_t id = 0;

	pthread_mutex_lock(&sample_lock);
	epoch_check();
	struct sample_ent *e = ptr_table_find(&tab, p);
	if (!e && !ptr_table_reserve(&tab, h)) {
		e = ptr_table_put(&tab, p);
		e->tag = large;
		span_count(e, 1);
	}
	if (e) {
		id = next_id++;
		e->tag = id << 1 | (e->tag & 1);
		e->born_ns = born;
		sample_announce(&mods, tab_epoch, pcs, n, put_module, h);
	}
	pthread_mutex_unlock(&sample_lock);
	return id;
}

static void ev_sample(struct heap *h, uint64_t id, const struct heap_sample *s, const uint64_t *pcs,
		      unsigned n, uint64_t born)
{
	struct tally_batch *b = &h->batch;
	struct tally_ev e = { TALLY_EV_SAMPLE, 0, s->group, n, id };

	if (b->count + 2 + TALLY_SAMPLE_WORDS + n > TALLY_BATCH_WORDS)
		ev_flush(h);
	tally_ev_put(b->words, &b->count, &e);
	b->words[b->count++] = s->q;
	b->words[b->count++] = s->p_rate;
	b->words[b->count++] = born;
	memcpy(&b->words[b->count], pcs, n * sizeof(*pcs));
	b->count += n;
	if (b->count == TALLY_BATCH_WORDS)
		ev_flush(h);
}

/* A TALLY_EV_MODULE record into the heap's batch. */
static void put_module(void *ctx, const struct tally_ev *e, const uint64_t *extra, uint32_t nextra)
{
	struct heap *h = ctx;
	struct tally_batch *b = &h->batch;

	if (b->count + 2 + nextra > TALLY_BATCH_WORDS)
		ev_flush(h);
	tally_ev_put(b->words, &b->count, e);
	memcpy(&b->words[b->count], extra, nextra * sizeof(*extra));
	b->count += nextra;
	if (b->count == TALLY_BATCH_WORDS)
		ev_flush(h);
}

void sample_run(struct heap *h)
{
	struct heap_sample *s = &h->sample;
	uint64_t pcs[TALLY_SAMPLE_FRAMES_MAX];

	s->busy = true;
	unsigned n = sample_backtrace(pcs);
	s->busy = false;
	op_start(h);
	if (unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
	uint64_t born = sample_clock_ns();
	uint64_t id = ev_tracing() ? tab_insert(h, (uintptr_t)s->p, s->large, pcs, n, born) : 0;
	if (id) {
		ev_sample(h, id, s, pcs, n, born);
		otel_alloc(s->p, s->q, s->p_rate);
	} else {
		s->dropped++;
	}
	s->p = NULL;
	op_end(h);
}

void sample_forget(struct heap *h, void *p)
{
	uint64_t id = 0, born = 0;

	/* (a racy look: a block sampled before it was handed out is in) */
	if (!__atomic_load_n(&tab.len, __ATOMIC_RELAXED))
		return;
	pthread_mutex_lock(&sample_lock);
	struct sample_ent *e = ptr_table_find(&tab, (uintptr_t)p);
	if (e) {
		id = e->tag >> 1;
		born = e->born_ns;
		span_count(e, -1);
		ptr_table_del(&tab, e);
	}
	pthread_mutex_unlock(&sample_lock);
	if (id) {
		ev(h, TALLY_EV_SAMPLE_FREE, 0, 0, sample_life_n(born, sample_clock_ns()), id);
		otel_free(p);
	}
}

void sample_forget_fast(void *p)
{
	struct heap *h = tally_tls_heap;

	op_begin(h);
	if (unlikely(atomic_load_explicit(&h->purge, memory_order_acquire)))
		heap_settle(h);
	sample_forget(h, p);
	op_end(h);
}

void sample_lock_prepare(void)
{
	pthread_mutex_lock(&sample_lock);
}

void sample_lock_release(void)
{
	pthread_mutex_unlock(&sample_lock);
}

uint64_t sample_resident(void)
{
	uint64_t bytes = 0;

	pthread_mutex_lock(&sample_lock);
	if (tab.v)
		bytes = os_resident(tab.v, ptr_table_mapped(&tab));
	pthread_mutex_unlock(&sample_lock);
	return bytes;
}
