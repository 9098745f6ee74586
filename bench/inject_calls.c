// SPDX-License-Identifier: MIT
/*
 * inject_calls: libtally_interpose.so's cost per call, counted in
 * instructions (scripts/bench-inject-calls.sh runs it under callgrind), with
 * no tracer: alloc_bench's churn (blocks of 16..256 B in a ring of 4096, one
 * free and one malloc a turn, both ends of each block written) after the
 * library was loaded and started in this very process, as `--inject` does.
 *
 * No tally runs, so the start is given what tally would have set: the
 * probe's semaphore raised by hand (the library's symbol is local: its
 * offset comes from nm), then tally_interpose_begin at the default sampling
 * rate (512 KiB). The records go into the batches and are handed over as
 * usual (to no one: the probe's site is a nop without a uprobe).
 *
 * Usage: inject_calls LIB SEM_OFFSET BEGIN_OFFSET PAIRS   (injected)
 *        inject_calls - 0 0 PAIRS                         (glibc alone)
 * Prints "pairs N ns_per_pair T" (T in thread CPU time) on stdout.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"

#define RING 4096
#define SAMPLE_RATE 524288 /* tally's default */

static void *object_new(uint64_t *rng)
{
	return block_new(rng_range(rng, 16, 256));
}

static uint64_t cpu_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000 + (uint64_t)ts.tv_nsec;
}

/* Load LIB and start it as tally would: 0, or 1 with a message. */
static int start(const char *lib, unsigned long sem_off, unsigned long begin_off)
{
	void *h = dlopen(lib, RTLD_NOW);
	void (*begin)(uint64_t, uint64_t, uint32_t);
	uint64_t *outcome;

	if (!h) {
		fprintf(stderr, "inject_calls: %s\n", dlerror());
		return 1;
	}
	*(void **)&begin = dlsym(h, "tally_interpose_begin");
	outcome = dlsym(h, "tally_interpose_outcome");
	if (!begin || !outcome) {
		fprintf(stderr, "inject_calls: %s is not the interposer\n", lib);
		return 1;
	}
	*(volatile unsigned short *)((char *)begin - begin_off + sem_off) = 1;
	begin(SAMPLE_RATE, 0, 1);
	if ((int32_t)(uint32_t)*outcome) {
		fprintf(stderr, "inject_calls: the start failed: %d\n",
			(int32_t)(uint32_t)*outcome);
		return 1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	static void *ring[RING];
	uint64_t rng = 0x9e3779b97f4a7c15ULL, t0, pairs;

	if (argc != 5) {
		fprintf(stderr, "usage: inject_calls LIB|- SEM_OFFSET BEGIN_OFFSET PAIRS\n");
		return 2;
	}
	pairs = strtoull(argv[4], NULL, 0);
	if (strcmp(argv[1], "-") &&
	    start(argv[1], strtoul(argv[2], NULL, 0), strtoul(argv[3], NULL, 0)))
		return 1;
	for (int i = 0; i < RING; i++)
		ring[i] = object_new(&rng);
	t0 = cpu_ns();
	for (uint64_t i = 0; i < pairs; i++) {
		free(ring[i % RING]);
		ring[i % RING] = object_new(&rng);
	}
	printf("pairs %llu ns_per_pair %.2f\n", (unsigned long long)pairs,
	       pairs ? (double)(cpu_ns() - t0) / (double)pairs : 0.0);
	for (int i = 0; i < RING; i++)
		free(ring[i]);
	return 0;
}
