// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tests/oom's workload: joins the memory cgroup CGDIR (writes its pid to
 * CGDIR/cgroup.procs), then allocates BLOCK bytes at a time with malloc,
 * touching every page, until the cgroup's OOM killer ends it; with THREADS
 * (default 1), that many threads do so at once. Its truth: line 0 of TRUTH,
 * the bytes live before the first block (what glibc allocated for the
 * threads, as libtally_alloc's own figures say: tally_alloc_stats, looked
 * up where the process runs on it, else 0); then after each block the
 * bytes thread i holds, written to line i + 1 with one pwrite of a fixed
 * width. TRUTH's one page is written whole before the process joins the
 * cgroup: writing it again allocates nothing, so a write cannot be the
 * charge that kills, and a reader finds whole numbers. With STOP (one
 * thread), it stops at STOP bytes, makes TRUTH.stopped and waits to be
 * killed: another process's charge then runs the OOM killer, which takes
 * this one, the larger.
 *
 *   grow CGDIR BLOCK TRUTH [THREADS [STOP]]
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../alloc/include/tally_alloc.h"

#define LINE 21 /* "%20llu\n" */
#define MAX_THREADS 64

static size_t block;
static unsigned long long stop; /* 0: none */
static const char *truth_path;
static int truth_fd;
static pthread_barrier_t start;

static int put_total(unsigned i, unsigned long long total)
{
	char line[LINE + 1];

	snprintf(line, sizeof(line), "%20llu\n", total);
	return pwrite(truth_fd, line, LINE, (off_t)i * LINE) == LINE ? 0 : -1;
}

/* At STOP: say so beside the truth, then wait for the OOM killer. */
static void stopped(void)
{
	char path[4096];

	snprintf(path, sizeof(path), "%s.stopped", truth_path);
	int fd = open(path, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (fd < 0)
		exit(1);
	close(fd);
	for (;;)
		pause();
}

static void *grow(void *arg)
{
	unsigned i = (unsigned)(uintptr_t)arg;
	unsigned long long total = 0;
	long page = sysconf(_SC_PAGESIZE);

	pthread_barrier_wait(&start);
	for (;;) {
		char *p = malloc(block);
		if (!p) {
			fprintf(stderr, "grow: malloc failed at %llu bytes\n", total);
			exit(1);
		}
		/* every page charged to the cgroup, the last byte too */
		for (size_t at = 0; at < block; at += (size_t)page)
			p[at] = (char)at;
		p[block - 1] = 1;
		total += block;
		if (put_total(i, total))
			exit(1);
		if (stop && total >= stop)
			stopped();
	}
	return NULL;
}

int main(int argc, char **argv)
{
	char procs[4096], pid[32];
	unsigned threads = argc > 4 ? (unsigned)atoi(argv[4]) : 1;
	pthread_t t[MAX_THREADS];
	int cg;

	stop = argc > 5 ? strtoull(argv[5], NULL, 0) : 0;
	if (argc < 4 || argc > 6 || threads < 1 || threads > MAX_THREADS || (stop && threads > 1)) {
		fprintf(stderr,
			"usage: grow CGDIR BLOCK TRUTH [THREADS, 1 to %d [STOP, one thread]]\n",
			MAX_THREADS);
		return 2;
	}
	truth_path = argv[3];
	block = strtoull(argv[2], NULL, 0);
	truth_fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	for (unsigned i = 0; truth_fd >= 0 && i <= threads; i++)
		if (put_total(i, 0))
			break;
	if (!block || truth_fd < 0) {
		fprintf(stderr, "grow: cannot write %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", argv[1]);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	cg = open(procs, O_WRONLY | O_CLOEXEC);
	if (cg < 0 || write(cg, pid, strlen(pid)) < 0) {
		fprintf(stderr, "grow: cannot join %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	close(cg);
	pthread_barrier_init(&start, NULL, threads);
	for (unsigned i = 1; i < threads; i++)
		if (pthread_create(&t[i], NULL, grow, (void *)(uintptr_t)(i + 1))) {
			fprintf(stderr, "grow: cannot start thread %u\n", i);
			return 1;
		}
	/* every thread made, none has allocated a block yet (they wait on the
	 * barrier, which this thread passes last) */
	int (*stats)(struct tally_stats *) =
		(int (*)(struct tally_stats *))dlsym(RTLD_DEFAULT, "tally_alloc_stats");
	struct tally_stats st = { 0 };
	if (stats && stats(&st))
		return 1;
	if (put_total(0, st.live))
		return 1;
	grow((void *)1);
	return 0;
}
