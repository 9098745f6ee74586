// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The heap profile's workload (tests/profile/run.sh): three sites in
 * functions of their own, built with -O2 -fomit-frame-pointer as Debian's
 * code is, whose truth it prints itself:
 *   keep_small   small objects kept, in group "cache" (the SDK)
 *   keep_large   large objects kept
 *   churn        objects allocated and freed
 * and then, with an argument, waits on stdin before it exits (a late attach
 * sees it running); with "busy", it churns meanwhile (a late attach then
 * meets a process that samples while the probes go in); with "pipeline",
 * it only hands blocks from one thread to another that frees them, for
 * 3 s; with "churn", it only churns (nothing in use at its end). The truth goes to stderr as one JSON line.
 */
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"

#define SMALL_N 400000
#define LARGE_N 48
#define CHURN_N 100000

static void *kept_small[SMALL_N];
static void *kept_large[LARGE_N];
static unsigned long long small_bytes, large_bytes, churn_bytes;

/* sizes that vary, so that no one size class tells the whole story */
static size_t small_size(unsigned i)
{
	return 24 + (i * 37) % 200;
}

__attribute__((noinline)) static void keep_small(void)
{
	for (unsigned i = 0; i < SMALL_N; i++) {
		size_t n = small_size(i);
		kept_small[i] = malloc(n);
		memset(kept_small[i], 1, n);
		small_bytes += n;
	}
}

__attribute__((noinline)) static void keep_large(void)
{
	for (unsigned i = 0; i < LARGE_N; i++) {
		size_t n = (size_t)(64 + (i % 7) * 48) << 10; /* 64..352 KiB */
		kept_large[i] = malloc(n);
		memset(kept_large[i], 2, n);
		large_bytes += n;
	}
}

__attribute__((noinline)) static void churn(void)
{
	for (unsigned i = 0; i < CHURN_N; i++) {
		size_t n = 64 + (i * 131) % 2000;
		char *p = malloc(n);
		p[0] = 3;
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
		churn_bytes += n;
	}
}

/* A producer-consumer pipeline: blocks allocated here, freed by the
 * consumer thread, through a ring of one slot per block in flight. */
#define PIPE_SLOTS 1024
static void *_Atomic pipe_ring[PIPE_SLOTS];
static atomic_bool pipe_done;

static void *consume(void *arg)
{
	(void)arg;
	for (unsigned i = 0;; i = (i + 1) % PIPE_SLOTS) {
		void *p;
		while (!(p = atomic_exchange(&pipe_ring[i], NULL)))
			if (atomic_load(&pipe_done))
				return NULL;
		free(p);
	}
}

__attribute__((noinline)) static void produce(double secs)
{
	struct timespec t0, t;
	pthread_t th;

	if (pthread_create(&th, NULL, consume, NULL))
		return;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (unsigned i = 0, k = 0;; i = (i + 1) % PIPE_SLOTS, k++) {
		char *p = malloc(32 + (k * 53) % 1500);
		p[0] = 4;
		while (atomic_load(&pipe_ring[i]))
			;
		atomic_store(&pipe_ring[i], p);
		clock_gettime(CLOCK_MONOTONIC, &t);
		if (t.tv_sec - t0.tv_sec + (t.tv_nsec - t0.tv_nsec) / 1e9 > secs)
			break;
	}
	atomic_store(&pipe_done, true);
	pthread_join(th, NULL);
}

int main(int argc, char **argv)
{
	if (argc > 1 && !strcmp(argv[1], "pipeline")) {
		produce(3);
		return 0;
	}
	if (argc > 1 && !strcmp(argv[1], "churn")) {
		churn();
		return 0;
	}
	struct tally_group cache = tally_group_register("cache");
	struct tally_group_guard g = tally_group_enter(cache);
	keep_small();
	tally_group_exit(g);
	keep_large();
	churn();
	fprintf(stderr,
		"{\"keep_small\": {\"bytes\": %llu, \"objects\": %d}, "
		"\"keep_large\": {\"bytes\": %llu, \"objects\": %d}, "
		"\"churn\": {\"bytes\": %llu, \"objects\": %d}}\n",
		small_bytes, SMALL_N, large_bytes, LARGE_N, churn_bytes, CHURN_N);
	if (argc > 1) {
		char c;
		struct pollfd in = { .fd = 0, .events = POLLIN };
		int busy = !strcmp(argv[1], "busy");
		puts("ready");
		fflush(stdout);
		while (busy && !poll(&in, 1, 0))
			churn();
		while (read(0, &c, 1) > 0)
			;
	}
	return 0;
}
