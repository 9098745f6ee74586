// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tests/report's target: two SDK groups whose live bytes peak in the middle
 * of the run, not at its end, and a child process. It counts what each
 * group holds and writes its own truth to FILE (JSON): each group's bytes
 * at the peak and at the end.
 *
 *   report_workload FILE [NAME]
 *
 * NAME: a third group's name (the test's is hostile HTML), which holds
 * ODD_BLOCKS blocks of ODD_SIZE bytes from its start to its end.
 *
 * ingest_records (group "ingest") and render_frames (group "render") each
 * allocate a known amount; both are held 1.5 s (the peak: 15 ticks of
 * tally's 100 ms), then all but a few blocks are freed, and 0.5 s later the
 * process exits with those still live. The function names are the flame
 * graph's frames the test looks for.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"

#define NBLOCKS 64
#define KEEP 4
#define ODD_BLOCKS 3
#define ODD_SIZE 1000

static void *held[2][NBLOCKS];

static void nap(long ms)
{
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

/* n blocks of size bytes, each touched, into slot */
static __attribute__((noinline)) void fill(void **slot, size_t size)
{
	for (int i = 0; i < NBLOCKS; i++) {
		slot[i] = malloc(size);
		if (!slot[i])
			abort();
		memset(slot[i], i, size);
	}
}

static __attribute__((noinline)) void ingest_records(void)
{
	fill(held[0], 96 * 1024);
}

static __attribute__((noinline)) void render_frames(void)
{
	fill(held[1], 40 * 1024);
}

static __attribute__((noinline)) void odd_name(const char *name)
{
	struct tally_group_guard gd = tally_group_enter(tally_group_register(name));

	for (int i = 0; i < ODD_BLOCKS; i++)
		memset(malloc(ODD_SIZE), 0, ODD_SIZE);
	tally_group_exit(gd);
}

static void release(int g)
{
	for (int i = KEEP; i < NBLOCKS; i++)
		free(held[g][i]);
}

int main(int argc, char **argv)
{
	struct tally_group ingest = tally_group_register("ingest");
	struct tally_group render = tally_group_register("render");
	struct tally_group_guard gd;
	FILE *f;
	pid_t child;

	if (argc != 2 && argc != 3) {
		fprintf(stderr, "usage: report_workload FILE [NAME]\n");
		return 2;
	}
	/* a child of the tree, which allocates and ends before the peak */
	child = fork();
	if (child == 0) {
		void *p = malloc(1 << 20);
		memset(p, 1, 1 << 20);
		nap(200);
		free(p);
		exit(0);
	}
	waitpid(child, NULL, 0);
	if (argc == 3)
		odd_name(argv[2]);
	gd = tally_group_enter(ingest);
	ingest_records();
	tally_group_exit(gd);
	gd = tally_group_enter(render);
	render_frames();
	tally_group_exit(gd);
	nap(1500);
	gd = tally_group_enter(ingest);
	release(0);
	tally_group_exit(gd);
	gd = tally_group_enter(render);
	release(1);
	tally_group_exit(gd);
	nap(500);
	f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f,
		"{\"peak\": {\"ingest\": %d, \"render\": %d}, \"end\": {\"ingest\": %d, \"render\": "
		"%d}, \"odd\": %d, \"child\": %d}\n",
		NBLOCKS * 96 * 1024, NBLOCKS * 40 * 1024, KEEP * 96 * 1024, KEEP * 40 * 1024,
		argc == 3 ? ODD_BLOCKS * ODD_SIZE : 0, (int)child);
	return fclose(f) ? 1 : 0;
}
