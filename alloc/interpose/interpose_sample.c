// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap profiles for an injected process (internal.h), as libtally_alloc
 * samples (alloc/sample.c, docs/DESIGN.md §7): each thread counts down the bytes
 * it allocates, with exponential gaps of mean `rate`; a block that ends a
 * gap is sampled, its stack unwound here, and handed over in a
 * TALLY_EV_SAMPLE record, the objects of its frames announced once per
 * tracer; the shadow or the table marks it, so that its free sends
 * TALLY_EV_SAMPLE_FREE with the sample's id.
 *
 * An id of its own for each sample, as libtally_alloc's (alloc/sample.c),
 * not the block's address: a block is allocated by one thread and freed by
 * another, whose batches reach tally in any order, and glibc gives the same
 * address again at once; with addresses for ids the free of one sample
 * matched the next one at that address (a C pipeline at --rate 1: 2 KB live,
 * sites 0 bytes; python3's http.server: sites 108 KB for 1 KB live).
 */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "internal.h"
#include "../common/sample_util.h"
#include "../common/hash.h"

static uint64_t rate;
static __thread uint64_t rng;
static __thread uint64_t drawn_for; /* the start whose rate its gap was drawn at */
static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sample_mods mods;
/* without sampling, the count is looked at again after this many bytes (a
 * later start may bring a rate) */
#define NO_RATE_GAP (1LL << 30)

/*
 * The sampled blocks' ids by address: open addressing under a spin lock
 * (few blocks: one per `rate` bytes; only a sampled block's free looks),
 * grown by mmap (no malloc here), a deletion shifting back the entries
 * after it.
 */
struct sid {
	uintptr_t p; /* 0: empty */
	uint64_t id;
	uint64_t born_ns; /* its sample's moment (its lifetime at its free) */
};
static struct {
	_Atomic uint8_t lock;
	struct sid *v;
	size_t cap, used;
	uint64_t next; /* ids from 1, never given twice in the process */
} ids;

static void ids_enter(void)
{
	while (atomic_exchange_explicit(&ids.lock, 1, memory_order_acquire))
		;
}

static void ids_leave(void)
{
	atomic_store_explicit(&ids.lock, 0, memory_order_release);
}

static size_t ids_home(uintptr_t p, size_t cap)
{
	return (size_t)(hash_fib64(p >> 4) >> 32) & (cap - 1);
}

static int ids_grow(void)
{
	size_t ncap = ids.cap ? ids.cap * 2 : 256;
	struct sid *n = ip_map(ncap * sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (size_t i = 0; i < ids.cap; i++) {
		size_t j = ids.v[i].p ? ids_home(ids.v[i].p, ncap) : 0;
		while (ids.v[i].p && n[j].p)
			j = (j + 1) & (ncap - 1);
		if (ids.v[i].p)
			n[j] = ids.v[i];
	}
	if (ids.v)
		munmap(ids.v, ids.cap * sizeof(*ids.v));
	ids.v = n;
	ids.cap = ncap;
	return 0;
}

/* p's new id (0: none, the table cannot grow), and its birth */
static uint64_t ids_put(uintptr_t p, uint64_t *born_ns)
{
	uint64_t id = 0;

	*born_ns = sample_clock_ns();
	ids_enter();
	if ((ids.used + 1) * 4 < ids.cap * 3 || !ids_grow()) {
		size_t j = ids_home(p, ids.cap);
		while (ids.v[j].p && ids.v[j].p != p)
			j = (j + 1) & (ids.cap - 1);
		ids.used += !ids.v[j].p;
		id = ++ids.next;
		ids.v[j] = (struct sid){ p, id, *born_ns };
	}
	ids_leave();
	return id;
}

/* p's id, out of the table (0: none), and when it was sampled */
static uint64_t ids_take(uintptr_t p, uint64_t *born_ns)
{
	uint64_t id = 0;

	ids_enter();
	size_t mask = ids.cap - 1, j = ids.cap ? ids_home(p, ids.cap) : 0;
	while (ids.cap && ids.v[j].p && ids.v[j].p != p)
		j = (j + 1) & mask;
	if (ids.cap && ids.v[j].p) {
		id = ids.v[j].id;
		*born_ns = ids.v[j].born_ns;
		for (size_t k = (j + 1) & mask; ids.v[k].p; k = (k + 1) & mask) {
			size_t h = ids_home(ids.v[k].p, ids.cap);
			/* k's entry may move to j when its home is not in (j, k] */
			if (((k - h) & mask) >= ((k - j) & mask)) {
				ids.v[j] = ids.v[k];
				j = k;
			}
		}
		ids.v[j].p = 0;
		ids.used--;
	}
	ids_leave();
	return id;
}

void ip_sample_start(uint64_t sample_rate)
{
	__atomic_store_n(&rate, sample_rate, __ATOMIC_RELAXED);
	/* the marks are gone with the shadow's and the table's reset */
	ids_enter();
	if (ids.v)
		memset(ids.v, 0, ids.cap * sizeof(*ids.v));
	ids.used = 0;
	ids_leave();
}

void ip_sample_child(void)
{
	atomic_store(&ids.lock, 0);
	pthread_mutex_init(&mods_lock, NULL);
}

bool ip_sample_gap_ended(void)
{
	uint64_t r = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	uint64_t key = __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED);
	bool first = drawn_for != key;

	if (!rng) {
		struct timespec ts;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		rng = hash_fib64((uint64_t)ts.tv_nsec) ^ (uintptr_t)&rng;
		rng |= 1;
	}
	drawn_for = key;
	ip_tls.sample_left = r ? sample_gap(&rng, r) : NO_RATE_GAP;
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
	uint64_t w[TALLY_SAMPLE_WORDS + TALLY_SAMPLE_FRAMES_MAX], born;
	unsigned n = sample_backtrace(&w[TALLY_SAMPLE_WORDS]);
	struct tally_ev e = { TALLY_EV_SAMPLE, 0, group, n, ids_put((uintptr_t)p, &born) };

	if (!e.bytes)
		return; /* no id: not sampled (its free finds none either) */
	pthread_mutex_lock(&mods_lock);
	sample_announce(&mods, __atomic_load_n(&ip_ring_key, __ATOMIC_RELAXED),
			&w[TALLY_SAMPLE_WORDS], n, put_module, NULL);
	pthread_mutex_unlock(&mods_lock);
	w[0] = q;
	w[1] = __atomic_load_n(&rate, __ATOMIC_RELAXED);
	w[2] = born;
	ip_put_ev(&e, w, TALLY_SAMPLE_WORDS + n);
}

void ip_sample_free(void *p)
{
	uint64_t born = 0, id = ids_take((uintptr_t)p, &born);
	struct tally_ev e = { TALLY_EV_SAMPLE_FREE, 0, 0, 0, id };

	e.n = id ? sample_life_n(born, sample_clock_ns()) : 0;
	if (e.bytes)
		ip_put_ev(&e, NULL, 0);
}
