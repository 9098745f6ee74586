// SPDX-License-Identifier: MIT
/*
 * alloc_bench: the workloads behind scripts/bench-alloc.sh.
 *
 * The program calls only the standard malloc/free API, so the allocator under test is chosen
 * from outside with LD_PRELOAD. Each workload prints exactly one line,
 *
 *	result NAME key=value ...
 *
 * which the harness parses; everything else goes to stderr. Every line names the object that
 * actually provides malloc (malloc_from=...), because a preload that fails to load only warns
 * and silently benchmarks glibc instead.
 *
 * Speed workloads do a fixed amount of work (prodcons and mixed stop early if it takes too long)
 * and report a rate from CLOCK_MONOTONIC wall time.
 * Memory workloads report resident bytes over live (requested) bytes, next to the floor an
 * allocator that never moves objects could reach: the 4 KiB pages that hold a live byte.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>

#include "bench_util.h"

/* Ring sizes: each churned object lives for one trip round the ring. */
#define CHURN_RING 4096
#define MIXED_RING 512
#define PC_QUEUE 1024
#define PC_BATCH 32 /* objects per index update; divides PC_QUEUE */

/* The floor is defined on 4 KiB pages whatever the kernel's page size. */
#define FLOOR_PAGE_SHIFT 12

/* Carry-on phase: a light load every millisecond so allocators that purge lazily get to. */
#define CARRY_BATCH 100
#define CARRY_SAMPLES 4

/*
 * Work per run. The defaults take 0.3-1.5 s per speed run on a 2-core VM. prodcons and mixed
 * also have a time cap, because their rates differ twentyfold between allocators (glibc's
 * cross-thread free, a young allocator's large-object path) and one slow allocator should not
 * stretch the whole benchmark. -q cuts everything to a tenth (and the carry-on to 0.5 s).
 */
struct bench_params {
	uint64_t churn_iters;  /* malloc+free pairs per churn thread */
	uint64_t pc_objects;   /* objects passed producer -> consumer */
	uint64_t mixed_iters;  /* malloc+free pairs in mixed */
	uint64_t max_ns;       /* prodcons and mixed stop early after this long */
	uint32_t fill_objects; /* objects allocated by shrink and halffree */
	uint64_t carry_ns;     /* length of the light phase after the mass free */
};

static struct bench_params params = {
	.churn_iters = 50000000,
	.pc_objects = 2000000,
	.mixed_iters = 500000,
	.max_ns = 1500000000,
	.fill_objects = 2000000,
	.carry_ns = 2 * NSEC_PER_SEC,
};

static void *object_new(uint64_t *rng, uint32_t lo, uint32_t hi)
{
	return block_new(rng_range(rng, lo, hi));
}

/* ---- churn: per-thread small-object ring ---- */

struct churn_arg {
	pthread_barrier_t *start;
	bool init; /* write each object whole, as a program initializing it would */
	uint64_t seed;
	uint64_t end_ns; /* when this thread finished its timed loop */
};

/* churn's largest size: 256, or 512 for churn512 (a uniform 16..512 B churn) */
static uint32_t churn_hi = 256;

static void *churn_thread(void *data)
{
	struct churn_arg *arg = data;
	uint64_t rng = arg->seed;
	void **ring;
	uint64_t i;

	ring = malloc(CHURN_RING * sizeof(*ring));
	if (!ring)
		oom();
	/* Fill first, so the timed loop is in steady state: one free and one malloc each turn. */
	for (i = 0; i < CHURN_RING; i++)
		ring[i] = object_new(&rng, 16, churn_hi);

	pthread_barrier_wait(arg->start);
	for (i = 0; i < params.churn_iters; i++) {
		uint32_t slot = i & (CHURN_RING - 1);

		free(ring[slot]);
		if (arg->init) {
			uint32_t size = rng_range(&rng, 16, churn_hi);
			char *p = malloc(size);

			if (!p)
				oom();
			memset(p, (int)size, size);
			ring[slot] = p;
		} else {
			ring[slot] = object_new(&rng, 16, churn_hi);
		}
	}
	arg->end_ns = now_ns();

	for (i = 0; i < CHURN_RING; i++)
		free(ring[i]);
	free(ring);
	return NULL;
}

static bool wait_signal; /* -w */

static int run_churn(unsigned int nthreads, bool init)
{
	struct churn_arg args[nthreads];
	pthread_t tids[nthreads];
	pthread_barrier_t start;
	uint64_t t0, end = 0;
	unsigned int i;
	double secs;

	sigset_t usr1;
	int sig;
	sigemptyset(&usr1);
	sigaddset(&usr1, SIGUSR1);
	if (wait_signal) /* before the threads: they inherit the mask */
		pthread_sigmask(SIG_BLOCK, &usr1, NULL);
	pthread_barrier_init(&start, NULL, nthreads + 1);
	for (i = 0; i < nthreads; i++) {
		args[i] = (struct churn_arg){
			.start = &start,
			.init = init,
			.seed = 0x9e3779b97f4a7c15ull * (i + 1), /* distinct, nonzero */
		};
		errno = pthread_create(&tids[i], NULL, churn_thread, &args[i]);
		if (errno)
			die("pthread_create");
	}
	if (wait_signal) {
		/* the threads fill their rings, then wait at the barrier */
		printf("waiting\n");
		fflush(stdout);
		sigwait(&usr1, &sig);
	}
	pthread_barrier_wait(&start);
	t0 = now_ns();
	for (i = 0; i < nthreads; i++) {
		pthread_join(tids[i], NULL);
		if (args[i].end_ns > end)
			end = args[i].end_ns;
	}
	pthread_barrier_destroy(&start);

	secs = (double)(end - t0) / NSEC_PER_SEC;
	printf("result churn%s%s-%ut ops_per_s=%.0f secs=%.3f malloc_from=%s\n",
	       churn_hi == 512 ? "512" : "", init ? "-init" : "", nthreads,
	       (double)params.churn_iters * nthreads / secs, secs, malloc_from());
	return 0;
}

/* ---- forks: the churn split between processes forked one after another ---- */

/*
 * The parent fills a ring, then forks nproc children in turn, each of which
 * goes on churning its copy of the ring for a share of the iterations and
 * exits (exit(), so that an allocator's exit handlers run, as they would in
 * a real program); the parent waits for each. A tracer that follows the tree
 * pays here for what a fork costs it: its children's probes, their copies of
 * the heap, one model per process.
 */
static int run_forks(unsigned int nproc)
{
	uint64_t rng = 0x9e3779b97f4a7c15ull, share = params.churn_iters / nproc, t0;
	void **ring = malloc(CHURN_RING * sizeof(*ring));
	unsigned int failed = 0;
	double secs;

	if (!ring)
		oom();
	for (uint64_t i = 0; i < CHURN_RING; i++)
		ring[i] = object_new(&rng, 16, 256);
	fflush(stdout);
	t0 = now_ns();
	for (unsigned int k = 0; k < nproc; k++) {
		int st;
		pid_t pid = fork();

		if (pid < 0)
			die("fork");
		if (pid == 0) {
			rng += k + 1;
			for (uint64_t i = 0; i < share; i++) {
				uint32_t slot = i & (CHURN_RING - 1);
				free(ring[slot]);
				ring[slot] = object_new(&rng, 16, 256);
			}
			exit(0);
		}
		if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st))
			failed++;
	}
	secs = (double)(now_ns() - t0) / NSEC_PER_SEC;
	for (uint64_t i = 0; i < CHURN_RING; i++)
		free(ring[i]);
	free(ring);
	if (failed) {
		fprintf(stderr, "alloc_bench: %u of %u children failed\n", failed, nproc);
		return 1;
	}
	printf("result churn-fork ops_per_s=%.0f secs=%.3f processes=%u malloc_from=%s\n",
	       (double)share * nproc / secs, secs, nproc, malloc_from());
	return 0;
}

/* ---- prodcons: every object is freed by a thread other than the one that allocated it ---- */

/*
 * Single-producer single-consumer ring. Each index is written by one side only and lives on
 * its own cache line, and each side publishes its index once per PC_BATCH objects and rereads
 * the other's only when the ring looks full (or empty). Publishing per object made runs
 * bimodal on a 2-CPU VM: once the ring sat full, every pop cost a cache-line transfer to the
 * spinning producer, which kept it full, and throughput fell threefold for the whole run.
 */
struct pc_queue {
	_Alignas(64) _Atomic uint64_t head; /* objects published by the producer */
	_Alignas(64) _Atomic uint64_t tail; /* objects released by the consumer */
	_Alignas(64) void *slot[PC_QUEUE];  /* object n sits in slot[n % PC_QUEUE] */
	pthread_barrier_t *start;
	_Atomic uint64_t end; /* objects in the whole run, once the producer has stopped */
	uint64_t checksum;    /* sum of first bytes: the consumer really reads each object */
	bool pinned[2];	      /* producer, consumer: each got a CPU of its own */
};

static void *producer_thread(void *data)
{
	struct pc_queue *q = data;
	uint64_t rng = 0x243f6a8885a308d3ull;
	uint64_t head, tail = 0, n = params.pc_objects, deadline;
	unsigned int spins = 0;

	q->pinned[0] = pin_to_nth_cpu(0);
	pthread_barrier_wait(q->start);
	deadline = now_ns() + params.max_ns;
	for (head = 0; head < n; head++) {
		void *p;

		/* A slow allocator stops early, on a batch boundary, not holding up the run. */
		if (head % PC_QUEUE == 0 && head && now_ns() > deadline)
			break;
		p = object_new(&rng, 16, 256);

		/*
		 * When full, head is a multiple of PC_BATCH and so already published: the
		 * consumer can always drain, and this wait always ends.
		 */
		while (head - tail >= PC_QUEUE) {
			tail = atomic_load_explicit(&q->tail, memory_order_acquire);
			if (head - tail >= PC_QUEUE)
				backoff(&spins);
		}
		q->slot[head % PC_QUEUE] = p;
		if ((head + 1) % PC_BATCH == 0)
			atomic_store_explicit(&q->head, head + 1, memory_order_release);
	}
	/* end after head: a consumer that sees end can also see every object before it. */
	atomic_store_explicit(&q->head, head, memory_order_release);
	atomic_store_explicit(&q->end, head, memory_order_release);
	return NULL;
}

static void *consumer_thread(void *data)
{
	struct pc_queue *q = data;
	uint64_t head = 0, tail;
	unsigned int spins = 0;

	q->pinned[1] = pin_to_nth_cpu(1);
	pthread_barrier_wait(q->start);
	for (tail = 0;; tail++) {
		unsigned char *p;

		while (tail == head) {
			head = atomic_load_explicit(&q->head, memory_order_acquire);
			if (tail != head)
				break;
			if (atomic_load_explicit(&q->end, memory_order_acquire) == tail)
				return NULL;
			backoff(&spins);
		}
		p = q->slot[tail % PC_QUEUE];
		q->checksum += p[0];
		free(p);
		if ((tail + 1) % PC_BATCH == 0)
			atomic_store_explicit(&q->tail, tail + 1, memory_order_release);
	}
	return NULL;
}

static int run_prodcons(void)
{
	static struct pc_queue q = { .end = UINT64_MAX };
	pthread_barrier_t start;
	pthread_t prod, cons;
	uint64_t t0, t1, n;
	double secs;

	pthread_barrier_init(&start, NULL, 3);
	q.start = &start;
	errno = pthread_create(&prod, NULL, producer_thread, &q);
	if (errno)
		die("pthread_create");
	errno = pthread_create(&cons, NULL, consumer_thread, &q);
	if (errno)
		die("pthread_create");
	pthread_barrier_wait(&start);
	t0 = now_ns();
	pthread_join(prod, NULL);
	pthread_join(cons, NULL);
	t1 = now_ns();
	pthread_barrier_destroy(&start);

	secs = (double)(t1 - t0) / NSEC_PER_SEC;
	n = atomic_load(&q.end);
	printf("result prodcons ops_per_s=%.0f secs=%.3f objects=%llu checksum=%llu pinned=%d "
	       "malloc_from=%s\n",
	       (double)n / secs, secs, (unsigned long long)n, (unsigned long long)q.checksum,
	       q.pinned[0] && q.pinned[1], malloc_from());
	return 0;
}

/* ---- mixed: one thread, sizes from 16 B to 1 MiB ---- */

/*
 * Log-uniform without libm: an octave [2^e, 2^(e+1)) chosen uniformly for e in 4..19, then a
 * uniform size inside it. Every size class and the large-object path get the same share of
 * operations, which a plain uniform size would not give the small classes.
 */
static size_t mixed_size(uint64_t *rng)
{
	uint32_t e = rng_range(rng, 4, 19);

	return ((size_t)1 << e) + rng_range(rng, 0, (1u << e) - 1);
}

static void *mixed_new(uint64_t *rng)
{
	size_t size = mixed_size(rng);
	char *p = malloc(size);

	if (!p)
		oom();
	p[0] = 1;
	p[size - 1] = 1;
	return p;
}

static int run_mixed(void)
{
	uint64_t rng = 0x13198a2e03707344ull;
	uint64_t i, n = params.mixed_iters, t0, t1;
	void *ring[MIXED_RING];
	double secs;

	for (i = 0; i < MIXED_RING; i++)
		ring[i] = mixed_new(&rng);

	t0 = now_ns();
	for (i = 0; i < n; i++) {
		uint32_t slot = i % MIXED_RING;

		if (slot == 0 && i && now_ns() - t0 > params.max_ns)
			break;

		free(ring[slot]);
		ring[slot] = mixed_new(&rng);
	}
	t1 = now_ns();
	n = i;

	for (i = 0; i < MIXED_RING; i++)
		free(ring[i]);
	secs = (double)(t1 - t0) / NSEC_PER_SEC;
	printf("result mixed ops_per_s=%.0f secs=%.3f ops=%llu malloc_from=%s\n", (double)n / secs,
	       secs, (unsigned long long)n, malloc_from());
	return 0;
}

/* ---- shrink and halffree: what a mass free gives back ---- */

/*
 * The program after the free: light small-object traffic every millisecond and nothing
 * allocator-specific, since many allocators purge only from inside malloc/free or after a
 * delay. Samples RSS at the end of each quarter of the phase.
 */
static void carry_on(uint64_t *rng, uint64_t samples[CARRY_SAMPLES])
{
	const struct timespec tick = { .tv_nsec = 1000000 };
	uint64_t t0 = now_ns(), now;
	void *batch[CARRY_BATCH];
	unsigned int k = 0, j;

	while (k < CARRY_SAMPLES) {
		for (j = 0; j < CARRY_BATCH; j++)
			batch[j] = object_new(rng, 32, 128);
		for (j = 0; j < CARRY_BATCH; j++) {
			escape(batch[j]);
			free(batch[j]);
		}
		nanosleep(&tick, NULL);

		/* Go by the clock, not by ticks: a VM oversleeps 1 ms sleeps. */
		now = now_ns();
		while (k < CARRY_SAMPLES && now - t0 >= params.carry_ns * (k + 1) / CARRY_SAMPLES)
			samples[k++] = rss_bytes();
	}
}

/* Resident bytes this workload added, per live byte; signed, as reclaim can shrink the base. */
static double rss_per_live(uint64_t rss, uint64_t base, uint64_t live)
{
	return ((double)rss - (double)base) / (double)live;
}

static int u64_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return (x > y) - (x < y);
}

static void add_range_pages(uint64_t *pages, size_t *n, uintptr_t p, size_t len)
{
	uintptr_t pg;

	for (pg = p >> FLOOR_PAGE_SHIFT; pg <= (p + len - 1) >> FLOOR_PAGE_SHIFT; pg++)
		pages[(*n)++] = pg;
}

/*
 * Bytes of the distinct 4 KiB pages holding at least one live byte: what is left resident if
 * the allocator returned every other page, which is the best it can do without moving objects.
 */
static uint64_t floor_bytes(char **ptrs, uint32_t n, uint32_t survivors)
{
	size_t array_len = (size_t)n * sizeof(*ptrs);
	size_t cap = (size_t)survivors * 2 + (array_len >> FLOOR_PAGE_SHIFT) + 2;
	size_t len = 0, distinct = 0, i;
	uint64_t *pages;

	pages = scratch_map(cap * sizeof(*pages));
	add_range_pages(pages, &len, (uintptr_t)ptrs, array_len);
	for (i = 0; i < n; i++) {
		uint32_t size;

		if (!ptrs[i])
			continue;
		memcpy(&size, ptrs[i], sizeof(size));
		/* An object under 4 KiB spans at most two pages, which is what cap assumes. */
		add_range_pages(pages, &len, (uintptr_t)ptrs[i], size);
	}
	/* qsort may malloc; harmless here because every RSS sample has been taken. */
	qsort(pages, len, sizeof(*pages), u64_cmp);
	for (i = 0; i < len; i++)
		if (i == 0 || pages[i] != pages[i - 1])
			distinct++;
	munmap(pages, cap * sizeof(*pages));
	return (uint64_t)distinct << FLOOR_PAGE_SHIFT;
}

/* n blocks of lo..hi bytes, written whole; each records its own size in its
 * first bytes (a side array would add uncounted RSS). */
static void fill_sized(char **ptrs, uint32_t n, uint32_t lo, uint32_t hi, uint64_t *rng)
{
	for (uint32_t i = 0; i < n; i++) {
		uint32_t size = rng_range(rng, lo, hi);

		ptrs[i] = malloc(size);
		if (!ptrs[i])
			oom();
		memset(ptrs[i], 0xa5, size);
		memcpy(ptrs[i], &size, sizeof(size));
	}
}

/*
 * Fill with about 800 MB of ~400 B objects, then free all but keep_permille of them, chosen by
 * a shuffle so that the survivors are scattered over the whole heap, and freed in that shuffled
 * order so that no allocator gets a tidy LIFO or address-ordered pattern.
 */
static int run_fill_free(const char *name, unsigned int keep_permille)
{
	uint32_t n = params.fill_objects, survivors, n_free, i;
	uint64_t rng = 0xa4093822299f31d0ull;
	uint64_t base, peak, after_free, live, floor;
	uint64_t samples[CARRY_SAMPLES];
	double ratio, floor_ratio;
	uint32_t *order;
	char **ptrs;

	/* Before anything is allocated, so rss - base is what this workload made resident. */
	base = rss_bytes();

	ptrs = malloc((size_t)n * sizeof(*ptrs));
	if (!ptrs)
		oom();
	fill_sized(ptrs, n, 352, 448, &rng);
	peak = rss_bytes();

	/* The shuffle lives outside the allocator and is unmapped before any RSS sample. */
	order = scratch_map((size_t)n * sizeof(*order));
	for (i = 0; i < n; i++)
		order[i] = i;
	for (i = n - 1; i > 0; i--) {
		uint32_t j = rng_range(&rng, 0, i), t = order[i];

		order[i] = order[j];
		order[j] = t;
	}
	survivors = (uint32_t)((uint64_t)n * keep_permille / 1000);
	n_free = n - survivors;
	for (i = 0; i < n_free; i++) {
		free(ptrs[order[i]]);
		ptrs[order[i]] = NULL;
	}
	munmap(order, (size_t)n * sizeof(*order));

	live = (uint64_t)n * sizeof(*ptrs);
	for (i = 0; i < n; i++) {
		uint32_t size;

		if (!ptrs[i])
			continue;
		memcpy(&size, ptrs[i], sizeof(size));
		live += size;
	}

	after_free = rss_bytes();
	carry_on(&rng, samples);

	floor = floor_bytes(ptrs, n, survivors);
	ratio = rss_per_live(samples[CARRY_SAMPLES - 1], base, live);
	floor_ratio = (double)floor / (double)live;
	/* samples: seconds after the free, then RSS/live at that moment. */
	printf("result %s rss_over_live=%.3f floor=%.3f within_floor=%.3f live_mib=%.1f "
	       "peak_mib=%.1f samples=0:%.3f",
	       name, ratio, floor_ratio, ratio / floor_ratio, live / MIB,
	       ((double)peak - (double)base) / MIB, rss_per_live(after_free, base, live));
	for (i = 0; i < CARRY_SAMPLES; i++)
		printf(",%g:%.3f", (double)params.carry_ns * (i + 1) / CARRY_SAMPLES / NSEC_PER_SEC,
		       rss_per_live(samples[i], base, live));
	printf(" malloc_from=%s\n", malloc_from());

	for (i = 0; i < n; i++)
		free(ptrs[i]);
	free(ptrs);
	return 0;
}

/* ---- idle-active and idle-quiet: does memory go back while the program idles ---- */

#define IDLE_KEEP 64		/* every 64th block survives the mass free */
#define IDLE_SAMPLE_NS 10000000 /* RSS every 10 ms while idling */
#define IDLE_WITHIN 1.2		/* "settled": RSS within 20 % of the floor */
#define IDLE_PAIRS 8

/* The light traffic of idle-active: one malloc/free pair of each size every millisecond. */
static const uint32_t idle_sizes[IDLE_PAIRS] = { 24, 100, 300, 700, 1500, 3000, 9000, 20000 };

/* The floor: distinct 4 KiB pages of the survivors and of the array holding them. Every
 * allocator's own metadata has to fit in the 20 % above it. */
static uint64_t idle_floor(char **surv, uint32_t n)
{
	size_t cap = (size_t)n * 2 + (((size_t)n * sizeof(*surv)) >> FLOOR_PAGE_SHIFT) + 2;
	size_t len = 0, distinct = 0, i;
	uint64_t *pages = scratch_map(cap * sizeof(*pages));

	add_range_pages(pages, &len, (uintptr_t)surv, (size_t)n * sizeof(*surv));
	for (i = 0; i < n; i++) {
		uint32_t size;

		memcpy(&size, surv[i], sizeof(size));
		add_range_pages(pages, &len, (uintptr_t)surv[i], size);
	}
	qsort(pages, len, sizeof(*pages), u64_cmp);
	for (i = 0; i < len; i++)
		if (i == 0 || pages[i] != pages[i - 1])
			distinct++;
	munmap(pages, cap * sizeof(*pages));
	return (uint64_t)distinct << FLOOR_PAGE_SHIFT;
}

/*
 * Fill with about 800 MB of 380..420 B blocks, keep every 64th, free the rest from the last
 * to the first, then idle for the carry-on time: idle-active does one malloc/free pair of
 * each of IDLE_PAIRS sizes every millisecond (all of it served without a system call by
 * any allocator), idle-quiet only sleeps. Reports RSS/live at the end, the floor, and the
 * first moment RSS was within 20 % of the floor (settle_s, -1 if never): an allocator that
 * returns memory only from inside malloc after a delay, or only when told, stays high.
 */
static int run_idle(const char *name, bool active)
{
	uint32_t n = params.fill_objects, nsurv = (n + IDLE_KEEP - 1) / IDLE_KEEP, i, k = 0;
	uint64_t rng = 0x452821e638d01377ull, base, peak, live, floor, rss = 0;
	uint64_t t0, now, next_sample;
	const struct timespec tick = { .tv_nsec = 1000000 };
	double settle_s = -1;
	char **ptrs, **surv;

	base = rss_bytes();
	/* Bookkeeping outside the allocator; only the survivors' array stays, and counts as live. */
	ptrs = scratch_map((size_t)n * sizeof(*ptrs));
	fill_sized(ptrs, n, 380, 420, &rng);
	peak = rss_bytes();
	for (i = n; i-- > 0;)
		if (i % IDLE_KEEP)
			free(ptrs[i]);
	surv = scratch_map((size_t)nsurv * sizeof(*surv));
	live = (uint64_t)nsurv * sizeof(*surv);
	for (i = 0; i < n; i += IDLE_KEEP) {
		uint32_t size;

		surv[k++] = ptrs[i];
		memcpy(&size, ptrs[i], sizeof(size));
		live += size;
	}
	munmap(ptrs, (size_t)n * sizeof(*ptrs));
	floor = idle_floor(surv, nsurv);

	t0 = now = now_ns();
	next_sample = t0;
	while (now - t0 < params.carry_ns) {
		if (active) {
			void *p[IDLE_PAIRS];

			for (i = 0; i < IDLE_PAIRS; i++) {
				p[i] = malloc(idle_sizes[i]);
				if (!p[i])
					oom();
				((char *)p[i])[0] = 1;
			}
			for (i = 0; i < IDLE_PAIRS; i++) {
				escape(p[i]);
				free(p[i]);
			}
			nanosleep(&tick, NULL);
		} else {
			struct timespec ts = { .tv_nsec = IDLE_SAMPLE_NS };

			nanosleep(&ts, NULL);
		}
		now = now_ns();
		if (now >= next_sample) {
			next_sample = now + IDLE_SAMPLE_NS;
			rss = rss_bytes();
			if (settle_s < 0 && (double)(rss - base) <= IDLE_WITHIN * (double)floor)
				settle_s = (double)(now - t0) / NSEC_PER_SEC;
		}
	}
	rss = rss_bytes();
	printf("result %s rss_over_live=%.3f floor=%.3f within_floor=%.3f settle_s=%.2f "
	       "live_mib=%.1f peak_mib=%.1f",
	       name, rss_per_live(rss, base, live), (double)floor / live,
	       ((double)rss - (double)base) / (double)floor, settle_s, live / MIB,
	       ((double)peak - (double)base) / MIB);
	printf(" malloc_from=%s\n", malloc_from());
	for (i = 0; i < nsurv; i++)
		free(surv[i]);
	munmap(surv, (size_t)nsurv * sizeof(*surv));
	return 0;
}

static void usage(FILE *f)
{
	fprintf(f, "usage: alloc_bench [-q] [-w] WORKLOAD\n"
		   "\n"
		   "Workloads (each prints one 'result NAME key=value...' line):\n"
		   "  churn THREADS  ring of 4096 objects per thread, 16..256 B  ops_per_s\n"
		   "  churn-init THREADS  the same, each object written whole   ops_per_s\n"
		   "  churn512 THREADS  the churn with sizes 16..512 B           ops_per_s\n"
		   "  forks N        churn 1 in N processes forked in turn      ops_per_s\n"
		   "  prodcons       malloc in one thread, free in another       ops_per_s\n"
		   "  mixed          one thread, sizes 16 B..1 MiB log-uniform   ops_per_s\n"
		   "  shrink         fill ~800 MB, free 95%%, idle 2 s            rss_over_live\n"
		   "  halffree       fill ~800 MB, free 50%%, idle 2 s            rss_over_live\n"
		   "  idle-active    fill ~800 MB, keep 1/64, 8 pairs a ms 2 s    rss_over_live\n"
		   "  idle-quiet     fill ~800 MB, keep 1/64, sleep 2 s           rss_over_live\n"
		   "\n"
		   "  -q  quick: a tenth of the work and a 0.5 s idle phase (smoke test)\n"
		   "  -w  churn: once the rings are full, print 'waiting' and wait for SIGUSR1\n"
		   "      before the timed loop (a tracer attaches to the running process)\n"
		   "\n"
		   "EXAMPLES:\n"
		   "  alloc_bench churn 2\n"
		   "  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libjemalloc.so.2 alloc_bench shrink\n");
}

int main(int argc, char **argv)
{
	const char *workload;
	int opt;

	while ((opt = getopt(argc, argv, "qwh")) != -1) {
		switch (opt) {
		case 'w':
			wait_signal = true;
			break;
		case 'q':
			params.churn_iters /= 10;
			params.pc_objects /= 10;
			params.mixed_iters /= 10;
			params.max_ns /= 10;
			params.fill_objects /= 10;
			params.carry_ns /= 4;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind >= argc) {
		usage(stderr);
		return 2;
	}
	workload = argv[optind];

	if (!strcmp(workload, "churn512"))
		churn_hi = 512;
	if (!strcmp(workload, "churn") || !strcmp(workload, "churn-init") ||
	    !strcmp(workload, "churn512")) {
		long nthreads = optind + 1 < argc ? strtol(argv[optind + 1], NULL, 10) : 0;

		if (nthreads < 1 || nthreads > 256) {
			fprintf(stderr, "alloc_bench: %s needs THREADS in 1..256\n", workload);
			return 2;
		}
		return run_churn((unsigned int)nthreads, !strcmp(workload, "churn-init"));
	}
	if (!strcmp(workload, "forks")) {
		long n = optind + 1 < argc ? strtol(argv[optind + 1], NULL, 10) : 0;

		if (n < 1 || n > 4096) {
			fprintf(stderr, "alloc_bench: forks needs N in 1..4096\n");
			return 2;
		}
		return run_forks((unsigned int)n);
	}
	if (!strcmp(workload, "prodcons"))
		return run_prodcons();
	if (!strcmp(workload, "mixed"))
		return run_mixed();
	if (!strcmp(workload, "shrink"))
		return run_fill_free("shrink", 50);
	if (!strcmp(workload, "halffree"))
		return run_fill_free("halffree", 500);
	if (!strcmp(workload, "idle-active"))
		return run_idle("idle-active", true);
	if (!strcmp(workload, "idle-quiet"))
		return run_idle("idle-quiet", false);

	fprintf(stderr, "alloc_bench: unknown workload '%s'\n", workload);
	usage(stderr);
	return 2;
}
