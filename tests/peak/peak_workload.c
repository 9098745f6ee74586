// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The peak's workload (tests/peak/run.sh), built -O2 -fomit-frame-pointer
 * as Debian's code is: in group "build" (the SDK) it allocates about 200 MB
 * in blocks of 1000..4999 bytes (build_up), frees all but every tenth
 * block, then keeps 1 MiB more in root (settle): its peak is not its end.
 * It prints its truth to stderr as one JSON line: the group's highest live
 * bytes (exact: only this code allocates in the group), what the group
 * holds at the end, and the variance of the sampled estimate of build_up's
 * bytes at the peak at rate R (TALLY_SAMPLE_RATE, default 512 KiB): a
 * block of s bytes is sampled with p = 1 - exp(-s/R) and counted s/p, so
 * the variance is the sum of s^2 (1 - p) / p.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../alloc/include/tally.h"

#define N 66000

static void *blocks[N];
static long long live, high;
static double var;

static size_t size_of(unsigned i)
{
	return 1000 + (i * 7919u) % 4000;
}

__attribute__((noinline)) static void build_up(double rate)
{
	for (unsigned i = 0; i < N; i++) {
		size_t s = size_of(i);
		blocks[i] = malloc(s);
		memset(blocks[i], 1, s);
		live += (long long)s;
		double p = -expm1(-(double)s / rate);
		var += (double)s * (double)s * (1 - p) / p;
	}
	high = live;
}

__attribute__((noinline)) static void tear_down(void)
{
	for (unsigned i = 0; i < N; i++) {
		if (i % 10 == 0)
			continue;
		free(blocks[i]);
		live -= (long long)size_of(i);
	}
}

__attribute__((noinline)) static void *settle(void)
{
	void *p = malloc(1 << 20);
	memset(p, 3, 1 << 20);
	return p;
}

int main(void)
{
	const char *r = getenv("TALLY_SAMPLE_RATE");
	double rate = r && atof(r) > 0 ? atof(r) : 524288;
	struct tally_group g = tally_group_register("build");
	struct tally_group_guard in = tally_group_enter(g);

	build_up(rate);
	tear_down();
	tally_group_exit(in);
	void *kept = settle();
	fprintf(stderr, "{\"peak\": %lld, \"end\": %lld, \"var\": %.0f}\n", high, live, var);
	__asm__ volatile("" : : "r"(kept) : "memory");
	return 0;
}
