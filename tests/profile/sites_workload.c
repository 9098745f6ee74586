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
 * meets a process that samples while the probes go in). The truth goes to
 * stderr as one JSON line.
 */
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../alloc/tally.h"

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

int main(int argc, char **argv)
{
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
