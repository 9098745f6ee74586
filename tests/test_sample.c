// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Sampling for heap profiles (alloc/sample.c) through the model's sites
 * (user/model/sites.c): the allocator in its test-sink build (recording
 * always on) under the sanitizers, every batch replayed into one process's
 * sites, as tally rebuilds them from the ring.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../alloc/include/tally_alloc_prefixed.h"
#include "../user/model/replay.h"
#include "../user/model/sites.h"
#include "../alloc/common/sample_util.h"

extern uint64_t tally_sample_rate;
void tally_alloc_test_flush_all(void);

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_replay replay;
static struct sites sites;

/* Called inside malloc with each batch: must not allocate with tally_p_. */
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes)
{
	pthread_mutex_lock(&sink_lock);
	replay.on_sample = sites_on_record;
	replay.sample_ctx = &sites;
	tally_replay_batch(&replay, b, bytes);
	pthread_mutex_unlock(&sink_lock);
}
void tally_alloc_test_purge_hold(int hold);

/* The rate for what follows: the calling thread's heap draws its next gap
 * at its next flush. */
static void rate_set(uint64_t rate)
{
	tally_sample_rate = rate;
	tally_alloc_test_flush_all();
}

static double site_inuse_total(void)
{
	pthread_mutex_lock(&sink_lock);
	double v = sites_inuse(&sites);
	pthread_mutex_unlock(&sink_lock);
	return v;
}

/* The site whose first frame (the allocation's caller: the allocator's own
 * frames are left out) is a call within `len` bytes of fn's start. */
static const struct site *site_in(uintptr_t fn, size_t len)
{
	for (size_t i = 0; i < sites.n; i++) {
		uint32_t n;
		const uint64_t *pcs = sites_frames(&sites, &sites.v[i], &n);
		if (n && pcs[0] > fn && pcs[0] < fn + len)
			return &sites.v[i];
	}
	return NULL;
}

#define SMALL_N 64

__attribute__((noinline)) static void alloc_small(void *p[], size_t n)
{
	for (size_t i = 0; i < n; i++)
		p[i] = tally_p_malloc(100 + i);
}

static void sample__rate_one__every_block_sampled_with_its_stack(void **state)
{
	void *p[SMALL_N];
	(void)state;
	rate_set(1);
	uint64_t before = sites.samples, frees = sites.frees;
	alloc_small(p, SMALL_N);
	tally_alloc_test_flush_all();
	assert_int_equal(sites.samples - before, SMALL_N);
	const struct site *st = site_in((uintptr_t)alloc_small, 96);
	assert_non_null(st);
	size_t want = 0;
	for (size_t i = 0; i < SMALL_N; i++)
		want += 100 + i;
	/* rate 1: each block counts once, at its requested size */
	assert_int_equal((uint64_t)st->inuse_bytes, want);
	assert_int_equal((uint64_t)st->inuse_objects, SMALL_N);
	for (size_t i = 0; i < SMALL_N; i++)
		tally_p_free(p[i]);
	tally_alloc_test_flush_all();
	assert_int_equal(sites.frees - frees, SMALL_N);
	assert_true(st->inuse_bytes == 0 && st->inuse_objects == 0);
	assert_int_equal((uint64_t)st->alloc_bytes, want);
	assert_int_equal(sites.unknown_frees, 0);
	/* the test's own program was announced, with the frames in it */
	assert_non_null(sites_module_of(&sites, (uintptr_t)alloc_small + 1));
	rate_set(0);
}

/* (no tail call: its frame is on the stack) */
__attribute__((noinline)) static void *alloc_large(size_t n)
{
	void *p = tally_p_malloc(n);
	__asm__ volatile("" : : "r"(p) : "memory");
	return p;
}

static void sample__large_block__sampled_and_its_free_reported(void **state)
{
	(void)state;
	rate_set(1);
	void *p = alloc_large(300000);
	tally_alloc_test_flush_all();
	const struct site *st = site_in((uintptr_t)alloc_large, 32);
	assert_non_null(st);
	assert_int_equal((uint64_t)st->inuse_bytes, 300000);
	/* moved by mremap: a free and an allocation for the profile */
	p = tally_p_realloc(p, 900000);
	tally_p_free(p);
	tally_alloc_test_flush_all();
	assert_true(st->inuse_bytes == 0);
	rate_set(0);
}

static void sample__realloc_in_place__old_sample_freed(void **state)
{
	(void)state;
	rate_set(1);
	double before = site_inuse_total();
	char *p = alloc_large(100);
	char *q = tally_p_realloc(p, 104); /* the same 112-byte slot */
	assert_ptr_equal(p, q);
	tally_alloc_test_flush_all();
	assert_int_equal((int64_t)(site_inuse_total() - before), 104);
	tally_p_free(q);
	tally_alloc_test_flush_all();
	assert_int_equal((int64_t)(site_inuse_total() - before), 0);
	rate_set(0);
}

/* At a rate far above the block size, the scaled samples still sum to the
 * bytes allocated: 128 MiB in 64-byte blocks at 32 KiB is about 4096
 * samples, whose relative error is about 1.6 %: 8 % is five of them. */
static void sample__estimates_are_unbiased(void **state)
{
	(void)state;
	rate_set(32768);
	double before = 0;
	for (size_t i = 0; i < sites.n; i++)
		before += sites.v[i].alloc_bytes;
	const size_t total = 128u << 20, size = 64;
	for (size_t i = 0; i < total / size; i++)
		tally_p_free(tally_p_malloc(size));
	tally_alloc_test_flush_all();
	double after = 0;
	for (size_t i = 0; i < sites.n; i++)
		after += sites.v[i].alloc_bytes;
	double est = after - before;
	assert_true(est > 0.92 * total && est < 1.08 * total);
	/* all of it freed again: what is left is the estimate's noise on
	 * the last few blocks (a sample stands for about 512 of them) */
	assert_true(site_inuse_total() < 1e5);
	rate_set(0);
}

/* otel_memory:alloc's weighted_bytes (alloc/common/sample_util.c, without
 * libm) against the model's scaling with libm's expm1 (sites_weight): the
 * same to the byte, from 1 byte to 16 GiB, the rate from 1 byte to 1 GiB
 * (the small-x series, the range-reduced one, and exp(-x) under 2^-57). */
static void sample__weight_is_the_models_to_the_byte(void **state)
{
	(void)state;
	static const uint64_t rates[] = { 1, 4096, 65536, 524288, 1u << 30 };
	for (size_t r = 0; r < sizeof(rates) / sizeof(rates[0]); r++) {
		for (uint64_t q = 1; q <= (16ull << 30); q = q * 3 / 2 + 1) {
			double want = (double)q * sites_weight(q, rates[r]);
			double got = (double)sample_weight(q, rates[r]);
			double d = got - want;
			if (d < 0)
				d = -d;
			if (d > 0.5 + want * 1e-12)
				fail_msg("q %llu rate %llu: %.1f, want %.3f", (unsigned long long)q,
					 (unsigned long long)rates[r], got, want);
		}
	}
	assert_int_equal(sample_weight(0, 65536), 0);
	assert_int_equal(sample_weight(100, 0), 100);
}

static void sample__rate_zero__nothing_sampled(void **state)
{
	(void)state;
	rate_set(0);
	uint64_t before = sites.samples;
	for (int i = 0; i < 10000; i++)
		tally_p_free(tally_p_malloc(1000));
	tally_alloc_test_flush_all();
	assert_int_equal(sites.samples, before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sample__rate_one__every_block_sampled_with_its_stack),
		cmocka_unit_test(sample__large_block__sampled_and_its_free_reported),
		cmocka_unit_test(sample__realloc_in_place__old_sample_freed),
		cmocka_unit_test(sample__estimates_are_unbiased),
		cmocka_unit_test(sample__rate_zero__nothing_sampled),
		cmocka_unit_test(sample__weight_is_the_models_to_the_byte),
	};
	tally_replay_init(&replay);
	sites_init(&sites);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
