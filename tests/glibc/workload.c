// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The target of tests/glibc/test_glibc.c: a process on glibc's malloc that
 * runs known sequences of the malloc family when told to, and says what the
 * figures of glibc mode must then be, from glibc itself:
 * malloc_usable_size() for the rounding, mallinfo2().hblks for the mmapped
 * chunks, its own book of requested sizes for live and the group counters.
 *
 * Protocol: one command line on fd 3, one report line on fd 4 for each (and
 * one at start, "ready"). Commands:
 *   A     phase A: the sequence of every entry, charged to slot 0
 *   B     phase B: frees and reallocs of A's blocks, new blocks in slot 1,
 *         and a free of a block allocated before the tracer attached
 *   S     start WL_THREADS threads, which wait (start them before attaching:
 *         creating a thread allocates its TLS with calloc); the report gives
 *         their tids t0..t3
 *   T     the threads run: thread i allocates in slot 2 + i, frees some of its
 *         own blocks and some of its neighbour's, reallocs some; then waits
 *   N n   n times malloc(64) + free, timed: ns=
 *   Q     exit
 * Report keys: live rounding large (mmapped chunks per their header) hblks
 * (mmapped chunks per mallinfo2, since start) mismatch (blocks whose header
 * says another usable size than malloc_usable_size) calls unknown (frees
 * of blocks the tracer cannot know) and per slot s: abS aoS dbS doS
 * (allocated/deallocated bytes/objects, a free charged to the slot the block
 * was allocated in). All cumulative.
 *
 * Between a command and its report nothing but the sequence calls the malloc
 * family: no stdio (it allocates its buffers), numbers formatted by hand,
 * bound with -z now so that no lazy binding runs. Built with -fno-builtin so
 * that the compiler keeps every call.
 */
#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define WL_CMD_FD 3
#define WL_REP_FD 4
#define WL_THREADS 4
#define WL_SLOTS (2 + WL_THREADS)
#define WL_PER_THREAD 64
#define WL_MMAP_THRESHOLD (128 * 1024)

struct wl_block {
	void *p;
	size_t req; /* requested bytes */
	int slot;   /* slot charged at allocation */
	bool live;
};

/* The blocks of one thread: each list is touched by its owner, and by the
 * one neighbour that frees some of its blocks (between two barriers). */
struct wl_list {
	struct wl_block b[256];
	unsigned n;
};

static struct wl_list wl_main;
static struct wl_list wl_thread_lists[WL_THREADS];

/* Expected figures; atomic because threads free each other's blocks. */
static uint64_t wl_calls, wl_unknown;
static uint64_t wl_ab[WL_SLOTS], wl_ao[WL_SLOTS], wl_db[WL_SLOTS], wl_do[WL_SLOTS];
static uint64_t wl_ns;
static size_t wl_base_hblks;
static pid_t wl_tids[WL_THREADS];

static void wl_add(uint64_t *c, uint64_t v)
{
	__atomic_fetch_add(c, v, __ATOMIC_RELAXED);
}

static void wl_call(void)
{
	wl_add(&wl_calls, 1);
}

/* Book a block glibc handed out; returns its index in the list. */
static unsigned wl_track(struct wl_list *l, int slot, void *p, size_t req)
{
	unsigned i = l->n++;

	l->b[i] = (struct wl_block){ .p = p, .req = req, .slot = slot, .live = true };
	wl_add(&wl_ab[slot], req);
	wl_add(&wl_ao[slot], 1);
	return i;
}

static void wl_untrack(struct wl_block *b)
{
	wl_add(&wl_db[b->slot], b->req);
	wl_add(&wl_do[b->slot], 1);
	b->live = false;
}

static void wl_malloc(struct wl_list *l, int slot, size_t n)
{
	void *p;

	wl_call();
	p = malloc(n);
	if (p)
		wl_track(l, slot, p, n);
}

static void wl_calloc(struct wl_list *l, int slot, size_t n, size_t m)
{
	void *p;

	wl_call();
	p = calloc(n, m);
	if (p)
		wl_track(l, slot, p, n * m);
}

static void wl_memalign(struct wl_list *l, int slot, size_t a, size_t n)
{
	void *p;

	wl_call();
	p = memalign(a, n);
	if (p)
		wl_track(l, slot, p, n);
}

static void wl_aligned_alloc(struct wl_list *l, int slot, size_t a, size_t n)
{
	void *p;

	wl_call();
	p = aligned_alloc(a, n);
	if (p)
		wl_track(l, slot, p, n);
}

static void wl_valloc(struct wl_list *l, int slot, size_t n)
{
	void *p;

	wl_call();
	p = valloc(n);
	if (p)
		wl_track(l, slot, p, n);
}

static void wl_pvalloc(struct wl_list *l, int slot, size_t n)
{
	void *p;

	wl_call();
	p = pvalloc(n);
	if (p)
		wl_track(l, slot, p, n);
}

static void wl_posix_memalign(struct wl_list *l, int slot, size_t a, size_t n)
{
	void *p = NULL;

	wl_call();
	if (posix_memalign(&p, a, n) == 0)
		wl_track(l, slot, p, n);
}

static void wl_free(struct wl_block *b)
{
	wl_call();
	free(b->p);
	wl_untrack(b);
}

/* realloc of block i (or of NULL when i is past the end), charged to slot:
 * glibc's realloc frees the old block unless it fails (NULL, size not 0). */
static void wl_realloc_at(struct wl_list *l, unsigned i, int slot, size_t n, bool array, size_t m)
{
	void *old = i < l->n ? l->b[i].p : NULL;
	size_t req = array ? n * m : n;
	void *p;

	wl_call();
	p = array ? reallocarray(old, n, m) : realloc(old, n);
	if (!p && (req || (array && m && n > SIZE_MAX / m)))
		return; /* failed: the old block stays */
	if (old)
		wl_untrack(&l->b[i]);
	if (p)
		wl_track(l, slot, p, req);
}

static void wl_realloc(struct wl_list *l, unsigned i, int slot, size_t n)
{
	wl_realloc_at(l, i, slot, n, false, 0);
}

static void wl_reallocarray(struct wl_list *l, unsigned i, int slot, size_t n, size_t m)
{
	wl_realloc_at(l, i, slot, n, true, m);
}

/* The live block allocated with request `req` most recently (the sequences
 * below pick their victims by size). */
static unsigned wl_find(struct wl_list *l, size_t req)
{
	for (unsigned i = l->n; i-- > 0;)
		if (l->b[i].live && l->b[i].req == req)
			return i;
	abort(); /* the sequence is wrong: a test bug */
}

static void wl_phase_a(void)
{
	struct wl_list *l = &wl_main;
	static const size_t sizes[] = { 0, 1, 8, 24, 25, 100, 1000, 4096, 10000, 200000, 1 << 20 };

	for (unsigned k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++)
		wl_malloc(l, 0, sizes[k]);
	wl_calloc(l, 0, 10, 100);
	wl_calloc(l, 0, 1, 300000);	  /* mmapped */
	wl_calloc(l, 0, SIZE_MAX / 2, 4); /* overflows: NULL */
	wl_realloc(l, l->n, 0, 50);	  /* realloc(NULL): glibc jumps to malloc */
	wl_malloc(l, 0, 101);
	wl_realloc(l, wl_find(l, 101), 0, 5000); /* grows */
	wl_realloc(l, wl_find(l, 5000), 0, 30);	 /* shrinks in place */
	wl_malloc(l, 0, 400000);
	wl_realloc(l, wl_find(l, 400000), 0, 64); /* an mmapped chunk shrunk by mremap */
	wl_malloc(l, 0, 300000);
	wl_realloc(l, wl_find(l, 300000), 0, 600000); /* grown by mremap */
	wl_malloc(l, 0, 70);
	wl_realloc(l, wl_find(l, 70), 0, 500000); /* from the heap to an mmapped chunk */
	wl_malloc(l, 0, 77);
	wl_realloc(l, wl_find(l, 77), 0, 0);		     /* frees, returns NULL */
	wl_realloc(l, wl_find(l, 1000), 0, SIZE_MAX - 4096); /* fails: the block stays */
	wl_reallocarray(l, l->n, 0, 10, 20);		     /* reallocarray -> realloc -> malloc */
	wl_reallocarray(l, wl_find(l, 200), 0, 10, 40);
	wl_reallocarray(l, wl_find(l, 400), 0, SIZE_MAX, 2); /* overflows: the block stays */
	wl_posix_memalign(l, 0, 64, 1000);
	wl_posix_memalign(l, 0, 16, 200); /* goes on to malloc */
	wl_posix_memalign(l, 0, 4096, 300000);
	wl_posix_memalign(l, 0, 3, 10); /* EINVAL */
	wl_aligned_alloc(l, 0, 256, 512);
	wl_memalign(l, 0, 16, 40); /* goes on to malloc */
	wl_memalign(l, 0, 32, 100);
	wl_memalign(l, 0, 65536, 200000);
	wl_valloc(l, 0, 1000);
	wl_pvalloc(l, 0, 5000);
	wl_free(&l->b[wl_find(l, 1000)]);
	wl_free(&l->b[wl_find(l, 1 << 20)]);
	wl_call();
	free(NULL);
}

static void *wl_pre; /* allocated before the tracer attached */

static void wl_phase_b(void)
{
	struct wl_list *l = &wl_main;

	wl_free(&l->b[wl_find(l, 24)]);
	wl_free(&l->b[wl_find(l, 300000)]); /* A's mmapped calloc, charged to slot 0 */
	wl_realloc(l, wl_find(l, 4096), 1, 8000);
	wl_realloc(l, wl_find(l, 600000), 1, 100);
	wl_malloc(l, 1, 333);
	wl_malloc(l, 1, 250000);
	wl_calloc(l, 1, 3, 7);
	wl_free(&l->b[wl_find(l, 333)]);
	wl_call();
	free(wl_pre);
	wl_add(&wl_unknown, 1);
}

static pthread_barrier_t wl_start, wl_middle, wl_done, wl_never;

static void *wl_thread(void *arg)
{
	unsigned me = (unsigned)(uintptr_t)arg;
	struct wl_list *mine = &wl_thread_lists[me];
	struct wl_list *next = &wl_thread_lists[(me + 1) % WL_THREADS];
	int slot = 2 + (int)me;

	wl_tids[me] = gettid();
	pthread_barrier_wait(&wl_start);
	for (unsigned j = 0; j < WL_PER_THREAD; j++)
		wl_malloc(mine, slot, j == 7 ? 200000 : 16 + (j * 37 + me * 11) % 3000);
	pthread_barrier_wait(&wl_middle);
	/* the neighbour's blocks 0, 4, 8 ...: charged to the neighbour */
	for (unsigned j = 0; j < WL_PER_THREAD; j += 4)
		wl_free(&next->b[j]);
	for (unsigned j = 1; j < WL_PER_THREAD; j += 4)
		wl_free(&mine->b[j]);
	for (unsigned j = 2; j < WL_PER_THREAD; j += 4)
		wl_realloc(mine, j, slot, mine->b[j].req + 100);
	pthread_barrier_wait(&wl_done);
	pthread_barrier_wait(&wl_never); /* until the process exits */
	return NULL;
}

static int wl_start_threads(void)
{
	pthread_t t;

	pthread_barrier_init(&wl_start, NULL, WL_THREADS + 1);
	pthread_barrier_init(&wl_middle, NULL, WL_THREADS);
	pthread_barrier_init(&wl_done, NULL, WL_THREADS + 1);
	pthread_barrier_init(&wl_never, NULL, WL_THREADS + 1);
	for (unsigned i = 0; i < WL_THREADS; i++)
		if (pthread_create(&t, NULL, wl_thread, (void *)(uintptr_t)i))
			return -1;
	/* each thread has written its tid once it waits at the first barrier;
	 * spin here without allocating */
	for (unsigned i = 0; i < WL_THREADS; i++)
		while (!__atomic_load_n(&wl_tids[i], __ATOMIC_ACQUIRE))
			usleep(1000);
	return 0;
}

static void wl_bench(unsigned long n)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (unsigned long i = 0; i < n; i++) {
		void *p = malloc(64);
		__asm__ volatile("" : : "r"(p) : "memory");
		free(p);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	wl_add(&wl_calls, 2 * n);
	wl_ns = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec -
		(uint64_t)a.tv_nsec;
}

/* The report line, formatted by hand (no stdio: it would allocate). */
struct wl_line {
	char s[4000];
	size_t len;
};

static void wl_put(struct wl_line *w, const char *key, int idx, uint64_t v)
{
	char num[24];
	int n = 0;

	if (w->len + 64 > sizeof(w->s))
		return;
	w->s[w->len++] = ' ';
	while (*key)
		w->s[w->len++] = *key++;
	if (idx >= 0)
		w->s[w->len++] = (char)('0' + idx);
	w->s[w->len++] = '=';
	do {
		num[n++] = (char)('0' + v % 10);
		v /= 10;
	} while (v);
	while (n)
		w->s[w->len++] = num[--n];
}

static void wl_sum_list(const struct wl_list *l, uint64_t f[4])
{
	for (unsigned i = 0; i < l->n; i++) {
		const struct wl_block *b = &l->b[i];
		size_t word, usable;

		if (!b->live)
			continue;
		/* glibc's chunk header, read the way bpf/glibc.bpf.c does */
		word = ((const size_t *)b->p)[-1];
		usable = (word & ~(size_t)7) - ((word & 2) ? 16 : 8);
		f[0] += b->req;
		f[1] += malloc_usable_size(b->p) - b->req;
		f[2] += (word & 2) != 0;
		f[3] += usable != malloc_usable_size(b->p);
	}
}

static void wl_report(const char *what)
{
	struct wl_line w = { .len = 0 };
	uint64_t f[4] = { 0, 0, 0, 0 };

	while (*what)
		w.s[w.len++] = *what++;
	wl_sum_list(&wl_main, f);
	for (unsigned i = 0; i < WL_THREADS; i++)
		wl_sum_list(&wl_thread_lists[i], f);
	wl_put(&w, "live", -1, f[0]);
	wl_put(&w, "rounding", -1, f[1]);
	wl_put(&w, "large", -1, f[2]);
	wl_put(&w, "mismatch", -1, f[3]);
	wl_put(&w, "hblks", -1, mallinfo2().hblks - wl_base_hblks);
	wl_put(&w, "calls", -1, wl_calls);
	wl_put(&w, "unknown", -1, wl_unknown);
	wl_put(&w, "ns", -1, wl_ns);
	for (int s = 0; s < WL_SLOTS; s++) {
		wl_put(&w, "ab", s, wl_ab[s]);
		wl_put(&w, "ao", s, wl_ao[s]);
		wl_put(&w, "db", s, wl_db[s]);
		wl_put(&w, "do", s, wl_do[s]);
	}
	for (int i = 0; i < WL_THREADS; i++)
		wl_put(&w, "t", i, (uint64_t)wl_tids[i]);
	w.s[w.len++] = '\n';
	if (write(WL_REP_FD, w.s, w.len) != (ssize_t)w.len)
		_exit(2);
}

/* One command line from fd 3; false at EOF. */
static bool wl_read_cmd(char *cmd, size_t size)
{
	size_t n = 0;
	char c;

	for (;;) {
		if (read(WL_CMD_FD, &c, 1) != 1)
			return false;
		if (c == '\n')
			break;
		if (n + 1 < size)
			cmd[n++] = c;
	}
	cmd[n] = 0;
	return true;
}

int main(void)
{
	char cmd[64];

	/* a fixed threshold: glibc otherwise raises it on the first free of an
	 * mmapped chunk, and which blocks are mmapped would depend on order */
	mallopt(M_MMAP_THRESHOLD, WL_MMAP_THRESHOLD);
	wl_pre = malloc(100);
	wl_base_hblks = mallinfo2().hblks;
	wl_report("ready");
	while (wl_read_cmd(cmd, sizeof(cmd))) {
		switch (cmd[0]) {
		case 'A':
			wl_phase_a();
			break;
		case 'B':
			wl_phase_b();
			break;
		case 'S':
			if (wl_start_threads())
				return 1;
			break;
		case 'T':
			pthread_barrier_wait(&wl_start);
			pthread_barrier_wait(&wl_done);
			break;
		case 'N':
			wl_bench(strtoul(cmd + 1, NULL, 10));
			break;
		case 'Q':
			_exit(0);
		default:
			return 1;
		}
		wl_report(cmd);
	}
	return 0;
}
