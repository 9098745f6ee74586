// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A busy target for the cut's tests (tests/busy/run.sh, docs/DESIGN.md §8):
 * threads that allocate and free as fast as they can, with blocks passed
 * between them, so that a torn read or a cut that is not one moment shows.
 *
 *   busy mix THREADS SECS [FILE]   each thread mallocs and frees at random
 *                                  (16 B to 64 KiB, now and then a large
 *                                  block), and swaps every 8th block with a
 *                                  shared table: the others free it
 *   busy pipe SECS [FILE]          one thread allocates, another frees
 *                                  everything the first made (a pipeline)
 *   busy forks N SECS [FILE]       N children, forked first, each in bursts
 *                                  as a server's workers are (a burst of
 *                                  blocks of 16 B to 32 KiB, most freed,
 *                                  then a pause of up to 2 ms): the tree
 *                                  of -p PID -f
 *
 * After SECS seconds (or SIGTERM) the threads stop, are joined, free what
 * they hold, and main returns: the process ends with no other thread inside
 * the allocator. FILE.running is written once every thread runs.
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_THREADS 8
#define SHARED 64
#define QUEUE 4096

static atomic_bool stop;
static bool no_large;	/* BUSY_NO_LARGE set: small blocks only */
static bool small_only; /* BUSY_SMALL: 16 to 515 bytes only */
static bool no_share;	/* BUSY_NO_SHARE set: no block changes threads */
static atomic_int running;
static _Atomic(void *) shared[SHARED];
/* the pipeline: one producer, one consumer, a ring of blocks */
static _Atomic(void *) queue[QUEUE];
static atomic_ulong q_head, q_tail;

static void on_term(int sig)
{
	(void)sig;
	atomic_store(&stop, true);
}

static size_t pick_size(unsigned long *seed)
{
	*seed = *seed * 6364136223846793005UL + 1442695040888963407UL;
	unsigned r = (unsigned)(*seed >> 33);
	if ((r & 1023) == 0 && !no_large)
		return 40000 + (r >> 10) % 300000; /* large: direct mappings and the pool */
	if ((r & 15) == 0 && !small_only)
		return 512 + (r >> 4) % (no_large ? 32000 : 65000);
	return 16 + (r >> 4) % 500;
}

static void *mix(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg * 7919;
	void *slots[64] = { 0 };

	atomic_fetch_add(&running, 1);
	for (unsigned long n = 0; !atomic_load_explicit(&stop, memory_order_relaxed); n++) {
		size_t size = pick_size(&seed);
		unsigned j = (unsigned)(seed >> 20) & 63;
		free(slots[j]);
		slots[j] = malloc(size);
		if (slots[j])
			memset(slots[j], 1, 16);
		if ((n & 7) == 0 && slots[j] && !no_share) {
			/* the block goes to whoever takes this slot next: freed by
			 * another thread, most of the time */
			void *old = atomic_exchange(&shared[(seed >> 40) & (SHARED - 1)], slots[j]);
			slots[j] = NULL;
			free(old);
		}
	}
	for (int i = 0; i < 64; i++)
		free(slots[i]);
	return NULL;
}

static void *producer(void *arg)
{
	unsigned long seed = 12345;

	(void)arg;
	atomic_fetch_add(&running, 1);
	while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
		unsigned long h = atomic_load_explicit(&q_head, memory_order_relaxed);
		if (h - atomic_load_explicit(&q_tail, memory_order_acquire) == QUEUE)
			continue; /* full: the consumer is behind */
		void *p = malloc(pick_size(&seed));
		if (p)
			memset(p, 2, 16);
		atomic_store_explicit(&queue[h % QUEUE], p, memory_order_relaxed);
		atomic_store_explicit(&q_head, h + 1, memory_order_release);
	}
	return NULL;
}

static void *consumer(void *arg)
{
	(void)arg;
	atomic_fetch_add(&running, 1);
	for (;;) {
		unsigned long t = atomic_load_explicit(&q_tail, memory_order_relaxed);
		if (t == atomic_load_explicit(&q_head, memory_order_acquire)) {
			if (atomic_load(&stop) && t == atomic_load(&q_head))
				break;
			continue;
		}
		free(atomic_load_explicit(&queue[t % QUEUE], memory_order_relaxed));
		atomic_store_explicit(&q_tail, t + 1, memory_order_release);
	}
	return NULL;
}

static int usage(void)
{
	fprintf(stderr, "usage: busy mix THREADS SECS [FILE] | busy pipe SECS [FILE] | "
			"busy forks N SECS [FILE]\n");
	return 2;
}

/* FILE.running, once everything runs (no FILE: nothing); 0 or 1. */
static int say_running(const char *file)
{
	char path[4096];

	if (!file)
		return 0;
	snprintf(path, sizeof(path), "%s.running", file);
	FILE *f = fopen(path, "w");
	return !f || fputs("running\n", f) < 0 || fclose(f) ? 1 : 0;
}

/* A child of `forks`: bursts until SIGTERM, then frees what it keeps. */
static void bursts(unsigned long seed)
{
	void *keep[256] = { 0 };

	while (!atomic_load(&stop)) {
		void *burst[64];
		int n = 8 + (int)(seed % 56);
		for (int i = 0; i < n; i++) {
			seed = seed * 6364136223846793005UL + 1442695040888963407UL;
			burst[i] = malloc(16 + (seed >> 33) % 32768);
			if (burst[i])
				memset(burst[i], 3, 16);
		}
		for (int i = 0; i < n; i++) {
			unsigned k = (unsigned)(seed >> 20) % 256;
			if (i == 0) { /* one block a burst stays, in place of an older one */
				free(keep[k]);
				keep[k] = burst[i];
			} else {
				free(burst[i]);
			}
		}
		usleep((useconds_t)(seed % 2000));
	}
	for (int i = 0; i < 256; i++)
		free(keep[i]);
}

static int forks(int n, int secs, const char *file)
{
	pid_t kids[MAX_THREADS];

	for (int i = 0; i < n; i++) {
		kids[i] = fork();
		if (kids[i] < 0)
			return 1;
		if (kids[i] == 0) {
			bursts((unsigned long)(i + 1) * 104729);
			exit(0);
		}
	}
	if (say_running(file))
		return 1;
	for (int ms = 0; ms < secs * 1000 && !atomic_load(&stop); ms += 10)
		usleep(10000);
	int bad = 0;
	for (int i = 0; i < n; i++) {
		int st;
		kill(kids[i], SIGTERM);
		if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st))
			bad = 1;
	}
	return bad;
}

int main(int argc, char **argv)
{
	pthread_t t[MAX_THREADS];
	int n, secs;
	const char *file;

	if (argc >= 4 && !strcmp(argv[1], "mix")) {
		n = atoi(argv[2]);
		secs = atoi(argv[3]);
		file = argc > 4 ? argv[4] : NULL;
	} else if (argc >= 4 && !strcmp(argv[1], "forks")) {
		n = atoi(argv[2]);
		secs = atoi(argv[3]);
		if (n < 1 || n > MAX_THREADS || secs < 1)
			return usage();
		signal(SIGTERM, on_term);
		return forks(n, secs, argc > 4 ? argv[4] : NULL);
	} else if (argc >= 3 && !strcmp(argv[1], "pipe")) {
		n = 2;
		secs = atoi(argv[2]);
		file = argc > 3 ? argv[3] : NULL;
	} else {
		return usage();
	}
	if (n < 1 || n > MAX_THREADS || secs < 1)
		return usage();
	no_large = getenv("BUSY_NO_LARGE") != NULL;
	no_share = getenv("BUSY_NO_SHARE") != NULL;
	small_only = getenv("BUSY_SMALL") != NULL;
	signal(SIGTERM, on_term);
	for (int i = 0; i < n; i++) {
		void *(*fn)(void *) = argv[1][0] == 'm' ? mix : i ? consumer : producer;
		if (pthread_create(&t[i], NULL, fn, (void *)(uintptr_t)(i + 1)))
			return 1;
	}
	while (atomic_load(&running) < n)
		usleep(1000);
	if (say_running(file))
		return 1;
	struct timespec end;
	clock_gettime(CLOCK_MONOTONIC, &end);
	end.tv_sec += secs;
	while (!atomic_load(&stop)) {
		struct timespec now;
		clock_gettime(CLOCK_MONOTONIC, &now);
		if (now.tv_sec > end.tv_sec ||
		    (now.tv_sec == end.tv_sec && now.tv_nsec >= end.tv_nsec))
			break;
		usleep(10000);
	}
	atomic_store(&stop, true);
	for (int i = 0; i < n; i++)
		pthread_join(t[i], NULL);
	for (int i = 0; i < SHARED; i++)
		free(atomic_load(&shared[i]));
	return 0;
}
