// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap profiles for an injected process (interpose.h), as libtally_alloc
 * samples (alloc/sample.c, DESIGN.md §7): each thread counts down the bytes
 * it allocates, with exponential gaps of mean `rate`; a block that ends a
 * gap is sampled, its stack unwound here, and handed over in a
 * TALLY_EV_SAMPLE record (its id: its address, unique among live blocks),
 * the objects of its frames announced once per tracer; the table marks it,
 * so that its free sends TALLY_EV_SAMPLE_FREE.
 */
#include <pthread.h>
#include <time.h>

#include "interpose.h"
#include "sample_util.h"

static uint64_t rate;
__thread int64_t ip_sample_left;
static __thread uint64_t rng;
static __thread uint64_t drawn_for; /* the start whose rate its gap was drawn at */
static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample_mods mods;
/* without sampling, the count is looked at again after this many bytes (a
 * later start may bring a rate) */
#define NO_RATE_GAP (1LL << 30)

void ip_sample_start(uint64_t sample_rate)
{
	__atomic_store_n(&rate, sample_rate, __ATOMIC_RELAXED);
}

bool ip_sample_gap_ended(void)
{
	uint64_t r = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	uint64_t key = __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED);
	bool first = drawn_for != key;

	if (!rng) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		rng = ((uint64_t)ts.tv_nsec * 0x9e3779b97f4a7c15ULL) ^ (uintptr_t)&rng;
		rng |= 1;
	}
	drawn_for = key;
	ip_sample_left = r ? sample_gap(&rng, r) : NO_RATE_GAP;
	/* a thread's first count under this start has no gap behind it */
	return r && !first;
}

static void put_module(void *ctx, const struct tally_ev *e, const uint64_t *extra, uint32_t nextra)
{
	(void)ctx;
	ip_put_ev(e, extra, nextra);
}

void ip_sample_take(void *p, size_t q, uint16_t group)
{
	uint64_t w[2 + TALLY_SAMPLE_FRAMES_MAX];
	unsigned n = sample_backtrace(&w[2]);
	struct tally_ev e = { TALLY_EV_SAMPLE, 0, group, n, (uintptr_t)p };

	pthread_mutex_lock(&mods_lock);
	sample_announce(&mods, __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED), &w[2], n,
			put_module, NULL);
	pthread_mutex_unlock(&mods_lock);
	w[0] = q;
	w[1] = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	ip_put_ev(&e, w, 2 + n);
}

void ip_sample_free(void *p)
{
	struct tally_ev e = { TALLY_EV_SAMPLE_FREE, 0, 0, 0, (uintptr_t)p };

	ip_put_ev(&e, NULL, 0);
}
