// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tests/otel's workload, under LD_PRELOAD of libtally_alloc.so: a known mix
 * of blocks in the group "ingest", for a reader of OpenTelemetry's memory
 * probes and thread context (tests/otel/run.sh).
 *
 *   otel_workload DIR RATE [fork]
 *
 * Writes DIR/pid, waits for DIR/go (the readers attached), then, in
 * "ingest": 200000 small blocks kept (24..223 B), 40 large ones kept
 * (64..352 KiB), 100000 blocks freed at once (64..2063 B); writes
 * DIR/ingroup and waits for DIR/checked (the thread context read from
 * outside); frees what it kept, leaves the group. Before DIR/go it
 * allocates nothing of its own (no stdio), so that no sample precedes the
 * readers. Nothing it allocates outlives it: every sampled block's free
 * is in the run. Last, on stdout: the bytes and blocks allocated, the standard
 * error of a sampled estimate of the bytes at RATE (a block of s bytes is
 * sampled with p = 1 - exp(-s/RATE) and counted s/p: variance
 * s^2 (1 - p) / p), and the samples expected (sum of p) with theirs.
 */
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"

#define SMALL 200000
#define LARGE 40
#define CHURN 100000

static double bytes, blocks, var, rate, expect, expect_var;

static void count(size_t s)
{
	double p = -expm1(-(double)s / rate);
	bytes += (double)s;
	blocks++;
	var += (double)s * (double)s * (1 - p) / p;
	expect += p;
	expect_var += p * (1 - p);
}

static void *take(size_t s)
{
	char *p = malloc(s);
	if (!p)
		abort();
	p[0] = 1; /* (used: the compiler keeps the call) */
	count(s);
	return p;
}

/* until DIR/NAME exists, 30 s at most */
static int wait_for(const char *dir, const char *name)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	for (int i = 0; i < 3000; i++) {
		if (access(path, F_OK) == 0)
			return 0;
		nanosleep(&(struct timespec){ 0, 10000000 }, NULL);
	}
	return -1;
}

static void put(const char *dir, const char *name, const char *text)
{
	char path[512];
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || write(fd, text, strlen(text)) < 0)
		abort();
	close(fd);
}

/* otel_workload DIR RATE fork: two children forked once DIR/go is there
 * churn as above, each its own blocks; their pids and exit statuses on
 * stdout. */
static int forked(const char *dir)
{
	static char line[128];
	pid_t kid[2];
	int st[2];

	if (wait_for(dir, "go"))
		return 3;
	for (int k = 0; k < 2; k++) {
		kid[k] = fork();
		if (kid[k] < 0)
			return 6;
		if (!kid[k]) {
			for (int i = 0; i < CHURN; i++)
				free(take(64 + (size_t)(i * 131) % 2000));
			_exit(0);
		}
	}
	for (int k = 0; k < 2; k++)
		if (waitpid(kid[k], &st[k], 0) != kid[k])
			return 7;
	int n = snprintf(line, sizeof(line), "kids %d %d statuses %d %d\n", (int)kid[0],
			 (int)kid[1], st[0], st[1]);
	return write(1, line, (size_t)n) == n ? 0 : 5;
}

int main(int argc, char **argv)
{
	static void *small[SMALL], *large[LARGE];
	char pid[32];

	if (argc < 3 || (rate = strtod(argv[2], NULL)) <= 0)
		return 2;
	if (argc == 4 && !strcmp(argv[3], "fork")) {
		snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
		put(argv[1], "pid", pid);
		return forked(argv[1]);
	}
	if (argc != 3)
		return 2;
	struct tally_group ingest = tally_group_register("ingest");
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	put(argv[1], "pid", pid);
	if (wait_for(argv[1], "go"))
		return 3;
	struct tally_group_guard g = tally_group_enter(ingest);
	for (int i = 0; i < SMALL; i++)
		small[i] = take(24 + (size_t)(i * 37) % 200);
	for (int i = 0; i < LARGE; i++)
		large[i] = take((64 + (size_t)(i % 7) * 48) * 1024);
	for (int i = 0; i < CHURN; i++)
		free(take(64 + (size_t)(i * 131) % 2000));
	put(argv[1], "ingroup", "ingest\n");
	if (wait_for(argv[1], "checked"))
		return 4;
	for (int i = 0; i < SMALL; i++)
		free(small[i]);
	for (int i = 0; i < LARGE; i++)
		free(large[i]);
	tally_group_exit(g);
	/* not stdio's printf: its buffer would be a block of the allocator's,
	 * sampled now and then (4 KiB at 64 KiB: 6 % of runs) and never freed,
	 * whose free the test would miss */
	static char line[256];
	int n = snprintf(line, sizeof(line),
			 "{\"bytes\":%.0f,\"blocks\":%.0f,\"sd\":%.0f,\"samples\":%.1f,"
			 "\"samples_sd\":%.1f}\n",
			 bytes, blocks, sqrt(var), expect, sqrt(expect_var));
	return write(1, line, (size_t)n) == n ? 0 : 5;
}
