// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "../alloc/purge.h"
#include "alloc_oracle.h"
#include "alloc_stress.h"

/*
 * cmocka's assertions longjmp into the test runner, which is only valid on
 * the thread that runs the test. Worker threads record their first failure
 * here and stop; the test's thread reports it after the join.
 */
static __thread bool in_worker;
static char worker_failure[256];
static int worker_failed;

#define CHECK(cond, ...)                                                                           \
	do {                                                                                       \
		if (!(cond))                                                                       \
			check_failed(__LINE__, __VA_ARGS__);                                       \
	} while (0)

__attribute__((format(printf, 2, 3))) static void check_failed(int line, const char *fmt, ...)
{
	char msg[200];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (!in_worker)
		fail_msg("line %d: %s", line, msg);
	if (!__atomic_exchange_n(&worker_failed, 1, __ATOMIC_ACQ_REL))
		snprintf(worker_failure, sizeof(worker_failure), "line %d: %s", line, msg);
	pthread_exit(NULL);
}

static void check_workers(void)
{
	if (__atomic_load_n(&worker_failed, __ATOMIC_ACQUIRE))
		fail_msg("worker thread: %s", worker_failure);
}

struct blk {
	unsigned char *p;
	size_t q;
	size_t align;
};

static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Mostly small, some medium, a few large and zero-sized requests. */
static size_t rnd_size(uint64_t *s)
{
	unsigned r = rnd(s) % 100;
	if (r < 2)
		return 0;
	if (r < 72)
		return 1 + rnd(s) % 512;
	if (r < 94)
		return 513 + rnd(s) % 32256;
	return 32769 + rnd(s) % (2u << 20);
}

static unsigned char tag(const struct blk *b)
{
	return (unsigned char)(((uintptr_t)b->p >> 4) ^ b->q);
}

static void fill(struct blk *b)
{
	size_t n = b->q < 64 ? b->q : 64;
	memset(b->p, tag(b), n);
	memset(b->p + b->q - n, tag(b), n);
}

static void check(const struct blk *b)
{
	size_t n = b->q < 64 ? b->q : 64;
	unsigned char t = tag(b);
	for (size_t i = 0; i < n; i++)
		if (b->p[i] != t || b->p[b->q - 1 - i] != t)
			CHECK(0, "block %p of %zu bytes corrupted", (void *)b->p, b->q);
	if (b->align)
		CHECK((uintptr_t)b->p % b->align == 0, "%p not aligned to %zu", (void *)b->p,
		      b->align);
}

static void blk_alloc(struct blk *b, uint64_t *s)
{
	size_t q = rnd_size(s);
	unsigned op = rnd(s) % 8;

	b->align = 0;
	switch (op) {
	case 0:
		b->p = T(calloc)(1, q);
		CHECK(b->p, "calloc(1, %zu) failed", q);
		for (size_t i = 0; i < q; i += 61)
			CHECK(b->p[i] == 0, "calloc(1, %zu) byte %zu not zero", q, i);
		break;
	case 1:
	case 2: {
		size_t align = (size_t)16 << (rnd(s) % 10); /* 16 .. 8192 */
		void *p = NULL;
		if (op == 1)
			CHECK(!T(posix_memalign)(&p, align, q), "posix_memalign(%zu, %zu)", align,
			      q);
		else
			p = T(aligned_alloc)(align, q);
		b->p = p;
		b->align = align;
		break;
	}
	default:
		b->p = T(malloc)(q);
	}
	CHECK(b->p, "allocation of %zu failed", q);
	b->q = q;
	CHECK(T(malloc_usable_size)(b->p) >= q, "usable size of %p below %zu", (void *)b->p, q);
	fill(b);
}

static void blk_free(struct blk *b)
{
	check(b);
	if (b->q && !b->align && (uintptr_t)b->p % 3 == 0)
		T(free_sized)(b->p, b->q);
	else
		T(free)(b->p);
	b->p = NULL;
}

static void blk_realloc(struct blk *b, uint64_t *s)
{
	size_t q = 1 + rnd_size(s);
	size_t keep = b->q < q ? b->q : q;
	unsigned char t = tag(b);
	check(b);
	b->p = T(realloc)(b->p, q);
	CHECK(b->p, "realloc to %zu failed", q);
	for (size_t i = 0; i < keep && i < 64; i++)
		CHECK(b->p[i] == t, "realloc to %zu lost byte %zu", q, i);
	b->q = q;
	b->align = 0;
	fill(b);
}

#define SLOTS 256

struct worker {
	pthread_t th;
	uint64_t seed;
	unsigned iters;
	struct blk blks[SLOTS];
	int64_t outstanding; /* requested bytes live */
};

/* One random operation on one of the worker's slots: allocate an empty
 * one, or realloc (one in four) or free a full one, keeping `outstanding`. */
static void worker_step(struct worker *w)
{
	struct blk *b = &w->blks[rnd(&w->seed) % SLOTS];

	if (!b->p) {
		blk_alloc(b, &w->seed);
		w->outstanding += (int64_t)b->q;
	} else if (rnd(&w->seed) % 4 == 0) {
		w->outstanding -= (int64_t)b->q;
		blk_realloc(b, &w->seed);
		w->outstanding += (int64_t)b->q;
	} else {
		w->outstanding -= (int64_t)b->q;
		blk_free(b);
	}
}

static void *random_worker(void *arg)
{
	in_worker = true;
	struct worker *w = arg;

	tally_alloc__set_group(STRESS_GROUP);
	for (unsigned i = 0; i < w->iters; i++) {
		worker_step(w);
	}
	/* exit with about half of the blocks live */
	for (unsigned i = 0; i < SLOTS; i += 2) {
		if (w->blks[i].p) {
			w->outstanding -= (int64_t)w->blks[i].q;
			blk_free(&w->blks[i]);
		}
	}
	tally_alloc__set_group(0);
	return NULL;
}

void stress_random(unsigned nthreads, unsigned iters, uint64_t seed)
{
	struct worker *w = calloc(nthreads, sizeof(*w));
	int64_t base = oracle_group_live(STRESS_GROUP), expect = 0;

	assert_non_null(w);
	oracle_check("stress_random: before");
	for (unsigned i = 0; i < nthreads; i++) {
		w[i].seed = seed * 7919 + i + 1;
		w[i].iters = iters;
		assert_int_equal(pthread_create(&w[i].th, NULL, random_worker, &w[i]), 0);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		assert_int_equal(pthread_join(w[i].th, NULL), 0);
		expect += w[i].outstanding;
	}
	check_workers();
	oracle_check("stress_random: threads exited with live blocks");
	assert_int_equal(oracle_group_live(STRESS_GROUP) - base, expect);
	/* free what the exited threads left, from this thread */
	for (unsigned i = 0; i < nthreads; i++)
		for (unsigned j = 0; j < SLOTS; j++)
			if (w[i].blks[j].p)
				blk_free(&w[i].blks[j]);
	oracle_check("stress_random: leftovers freed by another thread");
	assert_int_equal(oracle_group_live(STRESS_GROUP), base);
	tally_alloc_collect(1);
	oracle_check("stress_random: after collect(1)");
	assert_int_equal(oracle_stats().cache, 0);
	free(w);
}

/* A bounded queue under a mutex: the point is the cross-thread free, not the queue. */
struct queue {
	pthread_mutex_t lock;
	pthread_cond_t cv;
	struct blk items[1024];
	unsigned head, tail, producers_left;
	uint64_t seed;
	unsigned objects;
};

static void *producer(void *arg)
{
	in_worker = true;
	struct queue *qu = arg;
	uint64_t s;

	pthread_mutex_lock(&qu->lock);
	s = qu->seed++;
	pthread_mutex_unlock(&qu->lock);
	tally_alloc__set_group(STRESS_GROUP);
	for (unsigned i = 0; i < qu->objects; i++) {
		struct blk b;
		blk_alloc(&b, &s);
		pthread_mutex_lock(&qu->lock);
		while (qu->tail - qu->head == 1024)
			pthread_cond_wait(&qu->cv, &qu->lock);
		qu->items[qu->tail++ % 1024] = b;
		pthread_cond_broadcast(&qu->cv);
		pthread_mutex_unlock(&qu->lock);
	}
	pthread_mutex_lock(&qu->lock);
	qu->producers_left--;
	pthread_cond_broadcast(&qu->cv);
	pthread_mutex_unlock(&qu->lock);
	tally_alloc__set_group(0);
	return NULL;
}

static void *consumer(void *arg)
{
	in_worker = true;
	struct queue *qu = arg;
	for (;;) {
		pthread_mutex_lock(&qu->lock);
		while (qu->head == qu->tail && qu->producers_left)
			pthread_cond_wait(&qu->cv, &qu->lock);
		if (qu->head == qu->tail) {
			pthread_mutex_unlock(&qu->lock);
			return NULL;
		}
		struct blk b = qu->items[qu->head++ % 1024];
		pthread_cond_broadcast(&qu->cv);
		pthread_mutex_unlock(&qu->lock);
		blk_free(&b);
	}
}

void stress_producer_consumer(unsigned pairs, unsigned objects, uint64_t seed)
{
	struct queue *qu = calloc(1, sizeof(*qu));
	pthread_t *th = calloc(2 * pairs, sizeof(*th));
	int64_t base = oracle_group_live(STRESS_GROUP);

	assert_non_null(qu);
	assert_non_null(th);
	pthread_mutex_init(&qu->lock, NULL);
	pthread_cond_init(&qu->cv, NULL);
	qu->producers_left = pairs;
	qu->seed = seed | 1;
	qu->objects = objects;
	for (unsigned i = 0; i < pairs; i++) {
		assert_int_equal(pthread_create(&th[2 * i], NULL, producer, qu), 0);
		assert_int_equal(pthread_create(&th[2 * i + 1], NULL, consumer, qu), 0);
	}
	for (unsigned i = 0; i < 2 * pairs; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	check_workers();
	oracle_check("producer_consumer: all freed by consumers");
	assert_int_equal(oracle_group_live(STRESS_GROUP), base);
	tally_alloc_collect(1);
	oracle_check("producer_consumer: after collect(1)");
	assert_int_equal(oracle_stats().cache, 0);
	pthread_cond_destroy(&qu->cv);
	pthread_mutex_destroy(&qu->lock);
	free(th);
	free(qu);
}

static void *holder(void *arg)
{
	in_worker = true;
	struct worker *w = arg;
	tally_alloc__set_group(STRESS_GROUP);
	for (unsigned i = 0; i < SLOTS; i++) {
		blk_alloc(&w->blks[i], &w->seed);
		w->outstanding += (int64_t)w->blks[i].q;
	}
	tally_alloc__set_group(0);
	return NULL;
}

void stress_fork(uint64_t seed)
{
	struct worker *w = calloc(1, sizeof(*w));
	int64_t base = oracle_group_live(STRESS_GROUP);
	int status;

	assert_non_null(w);
	w->seed = seed | 1;
	/* blocks of another thread's heap, live across the fork */
	assert_int_equal(pthread_create(&w->th, NULL, holder, w), 0);
	assert_int_equal(pthread_join(w->th, NULL), 0);
	check_workers();
	oracle_check("fork: before");
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		/* the child: free the inherited blocks, churn, check, exit */
		for (unsigned i = 0; i < SLOTS; i++)
			blk_free(&w->blks[i]);
		tally_alloc__set_group(STRESS_GROUP);
		uint64_t s = seed + 99;
		for (unsigned r = 0; r < 20; r++) {
			for (unsigned i = 0; i < SLOTS; i++)
				blk_alloc(&w->blks[i], &s);
			for (unsigned i = 0; i < SLOTS; i++)
				blk_free(&w->blks[i]);
		}
		tally_alloc__set_group(0);
		tally_alloc_collect(1);
		oracle_check("fork: child");
		_exit(oracle_group_live(STRESS_GROUP) == base && oracle_stats().cache == 0 ? 0 : 3);
	}
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
	/* the parent still has its blocks, intact */
	assert_int_equal(oracle_group_live(STRESS_GROUP) - base, w->outstanding);
	for (unsigned i = 0; i < SLOTS; i++)
		blk_free(&w->blks[i]);
	oracle_check("fork: parent after");
	assert_int_equal(oracle_group_live(STRESS_GROUP), base);
	free(w);
}

struct pauser {
	struct worker w;
	unsigned rounds, pause_ms;
	unsigned flipped; /* pauses after which the purger had the fast paths off */
};

static void *pausing_worker(void *arg)
{
	in_worker = true;
	struct pauser *pw = arg;
	struct worker *w = &pw->w;
	/* a small block of this thread's heap: its span says whether the purger
	 * turned the fast paths off (owner_tp PURGE_TP) */
	unsigned char *probe = T(malloc)(64);

	CHECK(probe, "malloc(64) failed");
	tally_alloc__set_group(STRESS_GROUP);
	for (unsigned r = 0; r < pw->rounds; r++) {
		for (unsigned i = 0; i < 400; i++) {
			worker_step(w);
		}
		uint64_t ms = rnd(&w->seed) % (3 * pw->pause_ms + 1);
		struct timespec ts = { (time_t)(ms / 1000), (long)(ms % 1000) * 1000000 };
		nanosleep(&ts, NULL);
		if (__atomic_load_n(&span_of(probe)->owner_tp, __ATOMIC_RELAXED) == PURGE_TP)
			pw->flipped++;
		/* every block intact after the pause, whatever the purger did */
		for (unsigned i = 0; i < SLOTS; i++)
			if (w->blks[i].p)
				check(&w->blks[i]);
	}
	for (unsigned i = 0; i < SLOTS; i++) {
		if (w->blks[i].p) {
			w->outstanding -= (int64_t)w->blks[i].q;
			blk_free(&w->blks[i]);
		}
	}
	tally_alloc__set_group(0);
	T(free)(probe);
	return NULL;
}

unsigned stress_pausing(unsigned nthreads, unsigned rounds, unsigned pause_ms, uint64_t seed)
{
	struct pauser *pw = calloc(nthreads, sizeof(*pw));
	int64_t base = oracle_group_live(STRESS_GROUP);
	unsigned flipped = 0;

	assert_non_null(pw);
	for (unsigned i = 0; i < nthreads; i++) {
		pw[i].w.seed = seed * 104729 + i + 1;
		pw[i].rounds = rounds;
		pw[i].pause_ms = pause_ms;
		assert_int_equal(pthread_create(&pw[i].w.th, NULL, pausing_worker, &pw[i]), 0);
	}
	for (unsigned i = 0; i < nthreads; i++) {
		assert_int_equal(pthread_join(pw[i].w.th, NULL), 0);
		flipped += pw[i].flipped;
	}
	check_workers();
	for (unsigned i = 0; i < nthreads; i++)
		assert_int_equal(pw[i].w.outstanding, 0);
	oracle_check("pausing: all freed");
	assert_int_equal(oracle_group_live(STRESS_GROUP), base);
	tally_alloc_collect(1);
	oracle_check("pausing: after collect(1)");
	free(pw);
	return flipped;
}
