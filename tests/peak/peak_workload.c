// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The peak's workload (tests/peak/run.sh), built -O2 -fomit-frame-pointer
 * as Debian's code is: in group "build" (the SDK) it allocates about 200 MB
 * in blocks of 1000..4999 bytes (build_up), frees all but every tenth
 * block, then keeps 1 MiB more in root (settle): its peak is not its end.
 * Then, in group "churn", it allocates and at once frees 200000 blocks of
 * 256 bytes (churn_short: temporaries, each freed within microseconds),
 * and in root keeps 40 blocks of 1 MiB it never frees (leak_some: its
 * leak, as it exits holding them).
 * With "grow FILE", it only grows: 100 blocks of 10000 bytes every 100 ms
 * (grow_step), kept, and after each step a line "NS BYTES" to FILE (its
 * CLOCK_MONOTONIC and the bytes it has grown by), until it is killed.
 * It prints its truth to stderr as one JSON line: the group's highest live
 * bytes (exact: only this code allocates in the group), what the group
 * holds at the end, and the variance of the sampled estimate of build_up's
 * bytes at the peak at rate R (TALLY_SAMPLE_RATE, default 512 KiB): a
 * block of s bytes is sampled with p = 1 - exp(-s/R) and counted s/p, so
 * the variance is the sum of s^2 (1 - p) / p; the churn's count and the
 * variance of its estimate (1/p per sampled block: n (1 - p) / p), the
 * leak's bytes and their variance.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

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

#define CHURN_N 200000
#define CHURN_SIZE 256
#define LEAK_N 40
#define LEAK_SIZE (1 << 20)

__attribute__((noinline)) static void churn_short(void)
{
	for (unsigned i = 0; i < CHURN_N; i++) {
		char *p = malloc(CHURN_SIZE);
		p[0] = 1;
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
}

static void *leaked[LEAK_N];

__attribute__((noinline)) static void leak_some(void)
{
	for (unsigned i = 0; i < LEAK_N; i++) {
		leaked[i] = malloc(LEAK_SIZE);
		memset(leaked[i], 4, LEAK_SIZE);
	}
}

__attribute__((noinline)) static void *settle(void)
{
	void *p = malloc(1 << 20);
	memset(p, 3, 1 << 20);
	return p;
}

__attribute__((noinline)) static void grow_step(void)
{
	for (int i = 0; i < 100; i++)
		memset(malloc(10000), 5, 10000);
}

static int grow(const char *path)
{
	FILE *f = fopen(path, "w");
	long long grown = 0;

	if (!f)
		return 1;
	for (;;) {
		struct timespec ts;
		grow_step();
		grown += 100 * 10000;
		clock_gettime(CLOCK_MONOTONIC, &ts);
		fprintf(f, "%lld %lld\n", (long long)ts.tv_sec * 1000000000 + ts.tv_nsec, grown);
		fflush(f);
		usleep(100000);
	}
}

int main(int argc, char **argv)
{
	if (argc == 3 && !strcmp(argv[1], "grow"))
		return grow(argv[2]);
	const char *r = getenv("TALLY_SAMPLE_RATE");
	double rate = r && atof(r) > 0 ? atof(r) : 524288;
	struct tally_group g = tally_group_register("build");
	struct tally_group_guard in = tally_group_enter(g);

	build_up(rate);
	tear_down();
	tally_group_exit(in);
	void *kept = settle();
	struct tally_group_guard in2 = tally_group_enter(tally_group_register("churn"));
	churn_short();
	tally_group_exit(in2);
	leak_some();
	double pc = -expm1(-(double)CHURN_SIZE / rate), pl = -expm1(-(double)LEAK_SIZE / rate);
	fprintf(stderr,
		"{\"peak\": %lld, \"end\": %lld, \"var\": %.0f, \"churn\": %d, \"churn_var\": %.0f, "
		"\"leak\": %lld, \"leak_var\": %.0f}\n",
		high, live, var, CHURN_N, CHURN_N * (1 - pc) / pc, (long long)LEAK_N * LEAK_SIZE,
		LEAK_N * (double)LEAK_SIZE * LEAK_SIZE * (1 - pl) / pl);
	__asm__ volatile("" : : "r"(kept) : "memory");
	return 0;
}
