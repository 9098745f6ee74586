// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocator stress tests with the allocator as the process's malloc (no
 * sanitizer: it would bring its own). Everything in the process allocates
 * through it, so exact live figures are asserted per group: the workloads'
 * blocks are charged to STRESS_GROUP. Every batch is replayed (alloc_oracle.c)
 * and must equal the in-process figures at every quiescent point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "../alloc/purge.h"
#include "alloc_oracle.h"
#include "alloc_stress.h"

static uint64_t seed = 1;

static void stress__random_threads_with_exits_and_leftovers(void **state)
{
	(void)state;
	stress_random(6, 60000, seed);
}

static void stress__producer_consumer(void **state)
{
	(void)state;
	stress_producer_consumer(3, 40000, seed + 1);
}

static void stress__fork(void **state)
{
	(void)state;
	stress_fork(seed + 2);
}

/* predicted_resident against smaps: within 1 % plus one page per assigned span.
 * The purger may hand pages back between the two readings: a few tries. */
static void assert_resident_close(const char *where)
{
	uint64_t predicted = 0, measured = 0, slack = 0, diff = 0;

	for (int attempt = 0; attempt < 5; attempt++) {
		oracle_check(where);
		struct tally_stats s = oracle_stats();
		predicted = tally_stats_predicted_resident(&s);
		measured = oracle_smaps_resident();
		slack = measured / 100 + s.spans_assigned * OS_PAGE;
		diff = predicted > measured ? predicted - measured : measured - predicted;
		print_message("%s: predicted_resident %lu measured %lu (slack %lu)\n", where,
			      (unsigned long)predicted, (unsigned long)measured,
			      (unsigned long)slack);
		if (diff <= slack)
			return;
	}
	fail_msg("%s: predicted_resident %lu vs smaps %lu: off by %lu > %lu", where,
		 (unsigned long)predicted, (unsigned long)measured, (unsigned long)diff,
		 (unsigned long)slack);
}

static void resident__predicted_matches_smaps(void **state)
{
	(void)state;
	enum { N = 200000 };
	char **v = malloc(N * sizeof(*v));
	uint64_t s = seed | 1;

	assert_non_null(v);
	tally_alloc__set_group(STRESS_GROUP);
	for (int i = 0; i < N; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		size_t q = 16 + s % 2000;
		v[i] = malloc(q);
		memset(v[i], 1, q);
	}
	tally_alloc__set_group(0);
	assert_resident_close("filled");
	/* scattered frees, pages handed back */
	for (int i = 0; i < N; i++)
		if (i % 16) {
			free(v[i]);
			v[i] = NULL;
		}
	tally_alloc_collect(1);
	assert_resident_close("scattered frees collected");
	for (int i = 0; i < N; i++)
		free(v[i]);
	free(v);
	tally_alloc_collect(1);
	assert_resident_close("all freed and collected");
	assert_int_equal(oracle_group_live(STRESS_GROUP), 0);
}

static uint64_t now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
	struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000 };
	nanosleep(&ts, NULL);
}

/* The purge delay the allocator runs with (heap.c reads the same variable). */
static unsigned purge_ms(void)
{
	const char *e = getenv("TALLY_ALLOC_PURGE_MS");
	return e && *e ? (unsigned)strtoul(e, NULL, 10) : 1000;
}

/* A thread that frees most of what it allocated and then waits, alive, without
 * another call into the allocator: no tick of its own will ever sweep its
 * heap. The purger must, with the owner's fast paths turned off meanwhile, and
 * every byte it moves must be in the records (oracle_check replays them). */
struct quiet_owner {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	int stage;		   /* 1: freed, waiting; 2: go on */
	struct tally_stats before; /* before the frees */
	char *v[40000];
	bool restored; /* its spans its own again after its first call */
	bool intact;   /* every block kept its contents */
};

static void *quiet_owner(void *arg)
{
	struct quiet_owner *q = arg;
	const unsigned n = sizeof(q->v) / sizeof(q->v[0]);

	tally_alloc__set_group(STRESS_GROUP);
	for (unsigned i = 0; i < n; i++) {
		q->v[i] = malloc(300);
		if (q->v[i])
			memset(q->v[i], 0x5a, 300);
	}
	tally_alloc_stats(&q->before);
	for (unsigned i = 0; i < n; i++) {
		if (i % 32) {
			free(q->v[i]);
			q->v[i] = NULL;
		}
	}
	pthread_mutex_lock(&q->lock);
	q->stage = 1;
	pthread_cond_broadcast(&q->cv);
	while (q->stage < 2)
		pthread_cond_wait(&q->cv, &q->lock);
	pthread_mutex_unlock(&q->lock);
	/* the first call takes the slow path, which gives the spans back */
	free(q->v[32]);
	q->v[32] = NULL;
	q->restored = q->v[0] && span_of(q->v[0])->owner_tp == thread_pointer();
	q->intact = true;
	for (unsigned i = 0; i < n; i++) {
		if (q->v[i] && (q->v[i][0] != 0x5a || q->v[i][299] != 0x5a))
			q->intact = false; /* reported as a failure below */
		free(q->v[i]);
	}
	tally_alloc__set_group(0);
	return NULL;
}

static void purge__quiet_owner_is_swept_by_the_purger(void **state)
{
	(void)state;
	struct quiet_owner *q = calloc(1, sizeof(*q));
	int64_t base = oracle_group_live(STRESS_GROUP);
	struct tally_stats after;
	pthread_t t;

	assert_non_null(q);
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->cv, NULL);
	assert_int_equal(pthread_create(&t, NULL, quiet_owner, q), 0);
	pthread_mutex_lock(&q->lock);
	while (q->stage < 1)
		pthread_cond_wait(&q->cv, &q->lock);
	pthread_mutex_unlock(&q->lock);
	assert_non_null(q->v[0]);

	/* the owner's own sweeps have stopped; the purger's come after the delay */
	struct heap *h = span_of(q->v[0])->heap;
	uint64_t t0 = now_ms(), deadline = t0 + 4 * purge_ms() + 4000;
	do {
		sleep_ms(10);
		assert_int_equal(tally_alloc_stats(&after), 0);
		/* 31/32 of 12 MB freed, a block kept every 9.6 KB: half its pages go back */
	} while (after.returned < q->before.returned + 40000 * 300 / 3 && now_ms() < deadline);
	print_message("purge: %lu bytes returned after %lu ms\n",
		      (unsigned long)(after.returned - q->before.returned),
		      (unsigned long)(now_ms() - t0));
	assert_true(after.returned >= q->before.returned + 40000 * 300 / 3);
	/* by the purger, unless the delay is so short that the owner's own
	 * sweeps (when the purger pokes it) did it while it was freeing */
	if (purge_ms() >= 200) {
		assert_int_equal(__atomic_load_n(&h->purge, __ATOMIC_ACQUIRE), PURGE_FLIPPED);
		assert_int_equal(span_of(q->v[0])->owner_tp, PURGE_TP);
	}
	oracle_check("purge: a quiet owner's heap swept by the purger");
	assert_int_equal(oracle_group_live(STRESS_GROUP) - base, 1250 * 300);

	pthread_mutex_lock(&q->lock);
	q->stage = 2;
	pthread_cond_broadcast(&q->cv);
	pthread_mutex_unlock(&q->lock);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(q->intact);
	/* (with a short delay, the purger may have turned them off again) */
	if (purge_ms() >= 200)
		assert_true(q->restored);
	oracle_check("purge: the owner back, everything freed");
	assert_int_equal(oracle_group_live(STRESS_GROUP), base);
	pthread_cond_destroy(&q->cv);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

/* Owners that pause between bursts, with a short purge delay (run-tests.sh
 * runs this suite with TALLY_ALLOC_PURGE_MS=30 too): the purger meets them
 * quiet and busy at every point of their operations. */
static void purge__owners_pausing_while_the_purger_runs(void **state)
{
	(void)state;
	unsigned ms = purge_ms();
	unsigned flipped = stress_pausing(4, 40, ms, seed + 3);
	print_message("purge: %u pauses ended with the fast paths off\n", flipped);
	assert_true(flipped > 0);
}

#ifdef TALLY_ORACLE_NO_REPLAY
/* Untraced (this build alone: the other records every call, and a recorded
 * foreign free is pushed at once), foreign frees wait in the freeing heap's
 * chain, one span's at a time, and reach the span's list in chains of 64,
 * the rest at the heap's tick (or the thread's exit). */
#define XB_BLOCKS 100
struct xb_probe {
	char **blocks;			    /* XB_BLOCKS + 1 */
	void *listed_at_64, *listed_at_100; /* the span's xfree then */
	uint32_t chained_at_100;
	void *listed_at_tick; /* ... after one more free that ticks */
	uint32_t chained_at_tick;
};

static void *free_in_chains(void *arg)
{
	struct xb_probe *pr = arg;
	char *mine = malloc(16); /* a heap of its own: the fast path's foreign frees */
	struct heap *h = span_of(mine)->heap;
	struct span *sp = span_of(pr->blocks[0]);
	h->tick = TICK_OPS; /* no tick (which pushes the chain) meanwhile */
	for (int i = 0; i < XB_BLOCKS; i++) {
		free(pr->blocks[i]);
		if (i == 63)
			pr->listed_at_64 = atomic_load(&sp->xfree);
	}
	pr->listed_at_100 = atomic_load(&sp->xfree);
	pr->chained_at_100 = h->xb_n;
	h->tick = 1; /* the next free ticks */
	free(pr->blocks[XB_BLOCKS]);
	pr->listed_at_tick = atomic_load(&sp->xfree);
	pr->chained_at_tick = h->xb_n;
	free(mine);
	return NULL;
}

static void foreign__frees_reach_the_span_in_chains_and_at_the_tick(void **state)
{
	(void)state;
	char *blocks[XB_BLOCKS + 1];
	/* a fresh group: a span of its own, which the earlier tests left empty */
	tally_alloc__set_group(STRESS_GROUP + 1);
	for (int i = 0; i <= XB_BLOCKS; i++)
		blocks[i] = malloc(48);
	tally_alloc__set_group(0);
	struct span *sp = span_of(blocks[0]);
	for (int i = 0; i <= XB_BLOCKS; i++)
		assert_ptr_equal(span_of(blocks[i]), sp);
	struct xb_probe pr = { .blocks = blocks };
	pthread_t t;
	assert_int_equal(pthread_create(&t, NULL, free_in_chains, &pr), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	/* the 64th free pushed the first chain, its newest block first */
	assert_ptr_equal(pr.listed_at_64, blocks[63]);
	/* the next 36 waited in the heap's chain, not on the list */
	assert_ptr_equal(pr.listed_at_100, blocks[63]);
	assert_int_equal(pr.chained_at_100, XB_BLOCKS - 64);
	/* the tick pushed them with the 101st, the newest first */
	assert_ptr_equal(pr.listed_at_tick, blocks[XB_BLOCKS]);
	assert_int_equal(pr.chained_at_tick, 0);
	/* every block is on the list once */
	int n = 0;
	for (void *p = atomic_load(&sp->xfree); p && n <= XB_BLOCKS + 1; p = *(void **)p)
		n++;
	assert_int_equal(n, XB_BLOCKS + 1);
	oracle_check("foreign frees in chains");
}
#endif

int main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 0);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
#ifdef TALLY_ORACLE_NO_REPLAY
		cmocka_unit_test(foreign__frees_reach_the_span_in_chains_and_at_the_tick),
#endif
		cmocka_unit_test(stress__random_threads_with_exits_and_leftovers),
		cmocka_unit_test(stress__producer_consumer),
		cmocka_unit_test(stress__fork),
		cmocka_unit_test(resident__predicted_matches_smaps),
		cmocka_unit_test(purge__quiet_owner_is_swept_by_the_purger),
		cmocka_unit_test(purge__owners_pausing_while_the_purger_runs),
	};
	size_t n = sizeof(tests) / sizeof(tests[0]);
	/* the last means something with a short purge delay only: run-tests.sh
	 * runs this suite with TALLY_ALLOC_PURGE_MS=30 too, and there it runs */
	if (purge_ms() > 100) {
		printf("alloc_stress: purge__owners_pausing_while_the_purger_runs runs with "
		       "TALLY_ALLOC_PURGE_MS <= 100 only\n");
		n--;
	}
	return _cmocka_run_group_tests("alloc_stress", tests, n, NULL, NULL);
}
