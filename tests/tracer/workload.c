// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tracer tests' target. It counts for itself what each group should
 * hold, writes that to a file as JSON, and the tests compare tally's figures
 * with it. Modes:
 *   run FILE    threads in nested groups; malloc, calloc, realloc, aligned
 *               allocations, frees from other threads, threads that exit
 *               with blocks still live; exits with some blocks live
 *   wait FILE   the same, then writes the allocator's own figures too and
 *               waits for SIGTERM (a target for a late attach)
 *   spin FILE   one thread spins ~300 ms in group A, ~100 ms of it nested in
 *               group B; reports its CPU times
 *   burst N     N allocations and frees as fast as it can, on two threads
 *   steady S | churn T [FILE]  2 threads allocating for S s | T threads
 *               flat out; with FILE, in group "busy", parked on SIGUSR1 (busy)
 *   glibc FILE  (without libtally_alloc) on SIGUSR1, known blocks through
 *               glibc's malloc; FILE gets their counts, bytes and rounding
 * Nothing that allocates behind our back (stdio, thread creation) runs while
 * a thread is in a group, so that every group's bytes are the workload's.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"
#include "../../alloc/include/tally_alloc.h"

#define NGROUPS 4
static const char *const names[NGROUPS] = { "parse", "index", "index.hot", "export" };
static struct tally_group groups[NGROUPS];
static int64_t expect_live[NGROUPS];
static pthread_mutex_t expect_lock = PTHREAD_MUTEX_INITIALIZER;

struct block {
	void *p;
	size_t n;
	int group; /* index into groups[] */
};

static void count(int g, int64_t n)
{
	pthread_mutex_lock(&expect_lock);
	expect_live[g] += n;
	pthread_mutex_unlock(&expect_lock);
}

static void *xalloc(int kind, size_t n)
{
	void *p = NULL;

	switch (kind % 5) {
	case 0:
		p = malloc(n);
		break;
	case 1:
		p = calloc(1, n);
		break;
	case 2:
		if (posix_memalign(&p, 64, n))
			p = NULL;
		break;
	case 3:
		p = aligned_alloc(256, (n + 255) & ~(size_t)255);
		break;
	case 4:
		p = memalign(4096, n);
		break;
	}
	if (!p)
		abort();
	return p;
}

static size_t req_size(int kind, size_t n)
{
	return kind % 5 == 3 ? (n + 255) & ~(size_t)255 : n;
}

static uint64_t rng(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* Hand-over between threads: blocks allocated by one, freed by another. */
#define MAILBOX 256
static struct block mailbox[MAILBOX];
static int mail_n;
static pthread_mutex_t mail_lock = PTHREAD_MUTEX_INITIALIZER;

/* Allocate and free in group g (nested inside group `outer` when >= 0);
 * leave `keep` blocks live; post some to the mailbox. */
static void work(int outer, int g, uint64_t seed, int keep, struct block *kept)
{
	struct tally_group_guard go, gi;
	struct block ring[64] = { 0 };
	uint64_t s = seed;
	int posted = 0;

	if (outer >= 0)
		go = tally_group_enter(groups[outer]);
	gi = tally_group_enter(groups[g]);
	for (int i = 0; i < 20000; i++) {
		struct block *b = &ring[i % 64];
		if (b->p) {
			free(b->p);
			count(b->group, -(int64_t)b->n);
		}
		int kind = (int)(rng(&s) % 5);
		size_t n = 1 + rng(&s) % (i % 100 == 0 ? 200000 : 3000);
		b->p = xalloc(kind, n);
		b->n = req_size(kind, n);
		b->group = g;
		count(g, (int64_t)b->n);
		if (i % 7 == 0) {
			/* realloc moves the block to the current group */
			size_t m = 1 + rng(&s) % 5000;
			void *q = realloc(b->p, m);
			if (!q)
				abort();
			count(b->group, -(int64_t)b->n);
			b->p = q;
			b->n = m;
			count(g, (int64_t)m);
		}
	}
	for (int i = 0; i < 64; i++) {
		struct block *b = &ring[i];
		if (i < keep) {
			kept[i] = *b;
		} else if (posted < 16) {
			pthread_mutex_lock(&mail_lock);
			if (mail_n < MAILBOX) {
				mailbox[mail_n++] = *b;
				posted++;
				b->p = NULL;
			}
			pthread_mutex_unlock(&mail_lock);
			if (b->p) {
				free(b->p);
				count(b->group, -(int64_t)b->n);
			}
		} else {
			free(b->p);
			count(b->group, -(int64_t)b->n);
		}
	}
	tally_group_exit(gi);
	if (outer >= 0)
		tally_group_exit(go);
}

struct worker {
	int outer, g, keep;
	uint64_t seed;
	struct block kept[8];
};

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	work(w->outer, w->g, w->seed, w->keep, w->kept);
	return NULL;
}

/* Frees what other threads posted, from group "export": the bytes stay
 * charged to the groups that allocated them. */
static void drain_mailbox(void)
{
	struct tally_group_guard gg = tally_group_enter(groups[3]);
	pthread_mutex_lock(&mail_lock);
	for (int i = 0; i < mail_n; i++) {
		free(mailbox[i].p);
		count(mailbox[i].group, -(int64_t)mailbox[i].n);
	}
	mail_n = 0;
	pthread_mutex_unlock(&mail_lock);
	tally_group_exit(gg);
}

static struct worker workers[6];
static struct block main_kept[8];

static void run_threads(void)
{
	pthread_t t[6];

	for (int i = 0; i < NGROUPS; i++)
		groups[i] = tally_group_register(names[i]);
	for (int i = 0; i < 6; i++) {
		/* index.hot nested in index, the others flat; some keep blocks */
		workers[i] = (struct worker){ .outer = i % 3 == 2 ? 1 : -1,
					      .g = i % 3 == 2 ? 2 : i % 2,
					      .keep = i % 2 ? 5 : 0,
					      .seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(i + 1) };
		if (pthread_create(&t[i], NULL, worker_main, &workers[i]))
			abort();
	}
	/* threads exit while others run: their heaps live on, with blocks */
	for (int i = 0; i < 6; i++)
		pthread_join(t[i], NULL);
	drain_mailbox();
	work(-1, 3, 42, 3, main_kept);
}

/* A file written with system calls only (no allocation while threads park). */
static int write_text(const char *path, const char *text)
{
	char tmp[4096];
	size_t n = strlen(text);

	snprintf(tmp, sizeof(tmp), "%s.tmp", path);
	int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	if (write(fd, text, n) != (ssize_t)n || close(fd))
		return -1;
	return rename(tmp, path);
}

/* The figures, written with system calls from a static buffer: stdio would
 * allocate, and the allocator's state must stay as it was when read. */
static char fig[4096];
static int write_figures(const char *path, bool with_stats)
{
	int (*stats)(struct tally_stats *) =
		(int (*)(struct tally_stats *))dlsym(RTLD_DEFAULT, "tally_alloc_stats");
	struct tally_stats s;
	int n;

	n = snprintf(fig, sizeof(fig), "{\"pid\": %d, \"groups\": {", getpid());
	for (int i = 0; i < NGROUPS; i++)
		n += snprintf(fig + n, sizeof(fig) - (size_t)n, "%s\"%s\": %lld", i ? ", " : "",
			      names[i], (long long)expect_live[i]);
	n += snprintf(fig + n, sizeof(fig) - (size_t)n, "}");
	if (with_stats && stats && !stats(&s))
		n += snprintf(fig + n, sizeof(fig) - (size_t)n,
			      ", \"stats\": {\"mapped\": %llu, \"live\": %llu, \"rounding\": %llu, "
			      "\"cache\": %llu, \"span_free\": %llu, \"returned\": %llu, "
			      "\"virgin\": %llu, \"hysteresis\": %llu, \"segment_overhead\": %llu, "
			      "\"large_count\": %llu, \"spans_assigned\": %llu}",
			      (unsigned long long)s.mapped, (unsigned long long)s.live,
			      (unsigned long long)s.rounding, (unsigned long long)s.cache,
			      (unsigned long long)s.span_free, (unsigned long long)s.returned,
			      (unsigned long long)s.virgin, (unsigned long long)s.hysteresis,
			      (unsigned long long)s.segment_overhead,
			      (unsigned long long)s.large_count,
			      (unsigned long long)s.spans_assigned);
	snprintf(fig + n, sizeof(fig) - (size_t)n, "}\n");
	return write_text(path, fig);
}

static double thread_cpu_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static volatile uint64_t sink;
static void spin_for(double secs)
{
	double end = thread_cpu_s() + secs;
	while (thread_cpu_s() < end)
		for (int i = 0; i < 1000; i++)
			sink += (uint64_t)i;
}

static double spin_a, spin_b, spin_total;
static void *spinner(void *arg)
{
	(void)arg;
	struct tally_group a = tally_group_register("A"), b = tally_group_register("B");
	double t0 = thread_cpu_s();
	struct tally_group_guard ga = tally_group_enter(a);
	double t1 = thread_cpu_s();
	spin_for(0.1);
	struct tally_group_guard gb = tally_group_enter(b);
	double t2 = thread_cpu_s();
	spin_for(0.1);
	tally_group_exit(gb);
	double t3 = thread_cpu_s();
	spin_for(0.1);
	tally_group_exit(ga);
	double t4 = thread_cpu_s();
	spin_a = (t2 - t1) + (t4 - t3);
	spin_b = t3 - t2;
	spin_total = t4 - t0;
	return NULL;
}

static void *burster(void *arg)
{
	long n = (long)arg;
	void *keep[64] = { 0 };

	/* a name for --group rules; no SDK call in this mode */
	pthread_setname_np(pthread_self(), "worker");
	for (long i = 0; i < n; i++) {
		free(keep[i & 63]);
		keep[i & 63] = malloc(16 + (size_t)(i & 255));
	}
	for (int i = 0; i < 64; i++)
		free(keep[i]);
	return NULL;
}

static void on_term(int sig)
{
	(void)sig;
	_exit(0);
}

/* A failed dlopen leaves a dlerror string, which glibc frees at thread exit
 * after the allocator's own hand-over (issue 12, item 5). */
static void *dl_fail(void *arg)
{
	(void)arg;
	void *h = dlopen("libtally-does-not-exist.so.9", RTLD_NOW);
	if (h)
		dlclose(h);
	return NULL;
}

/*
 * Parking (steady and churn with FILE): SIGUSR1 asks every thread to stop at
 * a safe point, between two calls, where it counts its live bytes; once all
 * have, main writes FILE ("round" counts the parkings). SIGUSR2 lets them
 * run on, and FILE.running says again when all do. A thread parks after
 * PARK_OPS calls at least since it started or ran on: every round has calls
 * for tally to see. A thread's count is its own (no lock on the hot path);
 * main reads it once every thread has said, parked, that it saw this round
 * asked (one that saw the round before may be about to leave).
 */
#define MAX_BUSY 8
#define PARK_OPS 20000
static volatile sig_atomic_t park_req, park_round;
static int busy_running, busy_parked;
static int64_t busy_live[MAX_BUSY];
static int busy_seen[MAX_BUSY]; /* the round a parked thread has seen asked */
static bool busy_grouped;
static struct tally_group busy_group;

static void on_usr1(int sig)
{
	park_req = sig == SIGUSR1;
	if (park_req)
		park_round++;
}

static void busy_start(void) /* in group "busy" for the thread's life */
{
	if (busy_grouped)
		(void)tally_group_enter(busy_group);
	__atomic_add_fetch(&busy_running, 1, __ATOMIC_RELEASE);
}

static void busy_park(int me, void *const *slots, const size_t *sizes, long *since)
{
	int64_t live = 0;

	if (*since < PARK_OPS)
		return;
	*since = 0;
	for (int i = 0; i < 64; i++)
		live += slots[i] ? (int64_t)sizes[i] : 0;
	busy_live[me] = live;
	__atomic_add_fetch(&busy_parked, 1, __ATOMIC_RELEASE);
	while (park_req) {
		__atomic_store_n(&busy_seen[me], (int)park_round, __ATOMIC_RELEASE);
		usleep(1000);
	}
	__atomic_sub_fetch(&busy_parked, 1, __ATOMIC_RELEASE);
}

/* Allocates for ever, keeping some blocks live (exit() while it runs). */
static void *keep_allocating(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg;
	void *slots[64] = { 0 };
	size_t sizes[64] = { 0 };
	long since = 0;

	busy_start();
	for (;;) {
		since += 100;
		for (int i = 0; i < 100; i++) {
			seed = seed * 6364136223846793005UL + 1;
			unsigned j = (seed >> 33) & 63;
			free(slots[j]);
			sizes[j] = 16 + ((seed >> 40) & 1023);
			slots[j] = malloc(sizes[j]);
			if (slots[j])
				memset(slots[j], 1, 16);
		}
		if (park_req)
			busy_park((int)(uintptr_t)arg - 1, slots, sizes, &since);
		usleep(100);
	}
	return NULL;
}

/* As fast as it can: malloc and free, nothing else (a busy allocator). */
static void *churn(void *arg)
{
	unsigned long seed = (unsigned long)(uintptr_t)arg;
	void *slots[64] = { 0 };
	size_t sizes[64] = { 0 };
	long since = 0;

	busy_start();
	for (;;) {
		since++;
		seed = seed * 6364136223846793005UL + 1;
		unsigned j = (seed >> 33) & 63;
		free(slots[j]);
		sizes[j] = 16 + ((seed >> 40) & 255);
		slots[j] = malloc(sizes[j]);
		if (park_req)
			busy_park((int)(uintptr_t)arg - 1, slots, sizes, &since);
	}
	return NULL;
}

/* THREADS of FN for SECS seconds, then _exit(0); with FILE, parking as above. */
static int busy(void *(*fn)(void *), int threads, int secs, const char *file)
{
	char path[4096];
	pthread_t t;
	int said_round = 0, said_running = -1;

	if (threads < 1 || threads > MAX_BUSY)
		return 2;
	if (file) {
		busy_group = tally_group_register("busy");
		busy_grouped = true;
		signal(SIGUSR1, on_usr1);
		signal(SIGUSR2, on_usr1);
	}
	for (uintptr_t i = 1; i <= (uintptr_t)threads; i++)
		if (pthread_create(&t, NULL, fn, (void *)i))
			return 1;
	for (long ms = 0; ms < secs * 1000L; ms += 5) {
		usleep(5000);
		if (!file)
			continue;
		int round = park_round, seen = 0;
		if (!park_req && said_running != round &&
		    __atomic_load_n(&busy_running, __ATOMIC_ACQUIRE) == threads &&
		    __atomic_load_n(&busy_parked, __ATOMIC_ACQUIRE) == 0) {
			snprintf(path, sizeof(path), "%s.running", file);
			snprintf(fig, sizeof(fig), "running after round %d\n", round);
			if (write_text(path, fig))
				_exit(1);
			said_running = round;
		}
		for (int i = 0; i < threads; i++)
			seen += __atomic_load_n(&busy_seen[i], __ATOMIC_ACQUIRE) == round;
		if (park_req && round != said_round && seen == threads &&
		    __atomic_load_n(&busy_parked, __ATOMIC_ACQUIRE) == threads) {
			int64_t live = 0;
			for (int i = 0; i < threads; i++)
				live += busy_live[i];
			snprintf(fig, sizeof(fig),
				 "{\"pid\": %d, \"round\": %d, \"groups\": {\"busy\": %lld}}\n",
				 getpid(), round, (long long)live);
			if (write_text(file, fig))
				_exit(1);
			said_round = round;
		}
	}
	_exit(0);
}

/* glibc mode's truth: after SIGUSR1 (tally attached), 1000 blocks of known
 * sizes through glibc's malloc, the odd ones freed; FILE gets the bytes
 * asked, those live and their rounding (glibc's usable size less the size
 * asked); then it waits for SIGTERM. FILE.ready: the handlers are in place. */
static int glibc_blocks(const char *file)
{
	char ready[4096];
	int64_t live = 0, bytes = 0, rounding = 0;

	signal(SIGUSR1, on_usr1);
	signal(SIGTERM, on_term);
	snprintf(ready, sizeof(ready), "%s.ready", file);
	if (write_text(ready, "ready\n"))
		return 1;
	while (!park_req)
		pause();
	for (int i = 0; i < 1000; i++) {
		size_t n = 24 + (size_t)i * 37 % 5000;
		char *p = malloc(n);
		if (!p)
			return 1;
		memset(p, 1, n);
		bytes += (int64_t)n;
		if (i % 2) {
			free(p);
			continue;
		}
		live += (int64_t)n;
		rounding += (int64_t)(malloc_usable_size(p) - n);
	}
	snprintf(fig, sizeof(fig),
		 "{\"allocs\": 1000, \"frees\": 500, \"bytes\": %lld, \"live\": %lld, "
		 "\"rounding\": %lld}\n",
		 (long long)bytes, (long long)live, (long long)rounding);
	if (write_text(file, fig))
		return 1;
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr,
			"usage: workload run|wait|spin|glibc FILE | burst N | churn|steady N [FILE]\n");
		return 2;
	}
	if (!strcmp(argv[1], "run") || !strcmp(argv[1], "wait")) {
		run_threads();
		bool wait = argv[1][0] == 'w';
		if (write_figures(argv[2], wait))
			return 1;
		if (wait) {
			signal(SIGTERM, on_term);
			for (;;)
				pause();
		}
		return 0;
	}
	if (!strcmp(argv[1], "dlerror")) {
		for (int i = 0; i < atoi(argv[2]); i++) {
			pthread_t t;
			if (pthread_create(&t, NULL, dl_fail, NULL) || pthread_join(t, NULL))
				return 1;
		}
		return 0;
	}
	if (!strcmp(argv[1], "crash")) { /* N blocks live, fewer than a batch, then SIGSEGV */
		for (int i = 0; i < atoi(argv[2]); i++) {
			char *p = malloc(1000);
			if (p)
				memset(p, 1, 1000);
		}
		raise(SIGSEGV);
		return 0;
	}
	if (!strcmp(argv[1], "steady")) /* two threads allocating for N s, then exit 0 */
		return busy(keep_allocating, 2, atoi(argv[2]), argc > 3 ? argv[3] : NULL);
	if (!strcmp(argv[1], "churn")) /* THREADS allocating flat out for 60 s */
		return busy(churn, atoi(argv[2]), 60, argc > 3 ? argv[3] : NULL);
	if (!strcmp(argv[1], "glibc"))
		return glibc_blocks(argv[2]);
	if (!strcmp(argv[1], "exitrun")) { /* exit() after N ms, two threads allocating */
		pthread_t t;
		for (uintptr_t i = 1; i <= 2; i++)
			if (pthread_create(&t, NULL, keep_allocating, (void *)i))
				return 1;
		usleep((useconds_t)atoi(argv[2]) * 1000);
		exit(0);
	}
	if (!strcmp(argv[1], "spin")) {
		pthread_t t;
		if (pthread_create(&t, NULL, spinner, NULL))
			return 1;
		pthread_join(t, NULL);
		FILE *f = fopen(argv[2], "w");
		if (!f)
			return 1;
		fprintf(f, "{\"a_s\": %.6f, \"b_s\": %.6f, \"thread_s\": %.6f}\n", spin_a, spin_b,
			spin_total);
		return fclose(f) ? 1 : 0;
	}
	if (!strcmp(argv[1], "burst")) {
		long n = atol(argv[2]);
		pthread_t t[2];
		for (int i = 0; i < 2; i++)
			pthread_create(&t[i], NULL, burster, (void *)n);
		for (int i = 0; i < 2; i++)
			pthread_join(t[i], NULL);
		return 0;
	}
	fprintf(stderr, "workload: unknown mode %s\n", argv[1]);
	return 2;
}
