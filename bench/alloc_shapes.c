// SPDX-License-Identifier: MIT
/*
 * alloc_shapes: the allocation shapes of mimalloc-bench's rptest, xmalloc-test, alloc-test,
 * larson and a large-block ring, for scripts/bench-alloc.sh. Written from the programs'
 * descriptions, no code of theirs: each keeps the structure that makes its original
 * interesting to an allocator, with counts scaled to 0.5-2 s a run on a 2-core VM.
 *
 * Like alloc_bench, it calls only the standard malloc API (the allocator comes from
 * LD_PRELOAD) and writes one line to stdout,
 *
 *	result NAME ops_per_s=... secs=... ops=... peak_rss_mib=... malloc_from=...
 *
 * naming the object that really provides malloc, since a preload that fails only warns.
 * peak_rss_mib is the process's high-water mark (VmHWM), the program's own MiB or so included.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>

#include "bench_util.h"

/*
 * Work per run; -q cuts it to a tenth. Every shape also stops after max_ns, at a point where
 * its threads agree, so that one slow allocator does not stretch the whole benchmark.
 */
struct shapes_params {
	uint32_t rptest_loops;	   /* loops per rptest thread */
	uint64_t xmalloc_batches;  /* batches of XM_BATCH objects, writer to reader */
	uint64_t alloctest_rounds; /* rounds of AT_ROUND_OPS operations */
	uint64_t large_iters;	   /* free+malloc pairs of big blocks */
	uint64_t huge_iters;	   /* malloc+free pairs of huge zero-filled blocks */
	uint32_t larson_epochs;	   /* array swaps in larson */
	uint64_t max_ns;
	/* malloc-large's own: its first 20 blocks are a warm-up (glibc's threshold
	 * rises as they are freed), so its figure is of 400 pairs, not of 2 s */
	uint64_t huge_max_ns;
};

static struct shapes_params params = {
	.rptest_loops = 30000,
	.xmalloc_batches = 40000,
	.alloctest_rounds = 40,
	.large_iters = 60000,
	.huge_iters = 400,
	.larson_epochs = 1000,
	.max_ns = 2 * NSEC_PER_SEC,
	.huge_max_ns = 20 * NSEC_PER_SEC,
};

/* Resident bytes when main started: the program and its libraries, before any workload. */
static uint64_t base_rss;

/* The one result line. extra: more " key=value" pairs, or "". */
static void report(const char *name, uint64_t ops, uint64_t t0, uint64_t t1, const char *extra)
{
	double secs = (double)(t1 - t0) / NSEC_PER_SEC;

	printf("result %s ops_per_s=%.0f secs=%.3f ops=%llu peak_rss_mib=%.1f base_rss_mib=%.1f%s "
	       "malloc_from=%s\n",
	       name, (double)ops / secs, secs, (unsigned long long)ops, peak_rss_bytes() / MIB,
	       base_rss / MIB, extra, malloc_from());
}

/* ---- rptest: scattered frees and allocations, with cross-thread hand-offs ---- */

#define RP_BLOCKS 1000 /* slots per thread */
#define RP_OPS 100     /* frees, then allocations, per loop; also the hand-off batch */
#define RP_XRATE 2     /* a batch goes to the other thread every RP_XRATE loops */
#define RP_MIN 8
#define RP_MAX 16000

struct rp_thread {
	_Alignas(64) void **_Atomic inbox; /* the peer's batch; set by the peer, emptied here */
	struct rp_thread *peer;
	pthread_barrier_t *start;
	_Atomic unsigned int *done; /* threads past their loops */
	uint64_t seed;
	uint64_t ops;	 /* malloc and free calls, the peer's batches freed here included */
	uint64_t end_ns; /* when this thread stopped (its last batch freed) */
	void *blocks[RP_BLOCKS];
	void *handoff[RP_OPS]; /* the batch for the peer: reused once the peer empties its inbox */
};

/* rptest's falloff distribution: the density falls linearly from RP_MIN to RP_MAX. */
static size_t rp_size(uint64_t *rng)
{
	uint32_t a = rng_range(rng, 0, RP_MAX - RP_MIN), b = rng_range(rng, 0, RP_MAX - RP_MIN);

	return RP_MIN + (a < b ? a : b);
}

/* Frees the batch the peer handed over, if any, then tells the peer its buffer is free. */
static void rp_drain(struct rp_thread *t)
{
	void **batch = atomic_load_explicit(&t->inbox, memory_order_acquire);
	unsigned int i;

	if (!batch)
		return;
	for (i = 0; i < RP_OPS; i++)
		free(batch[i]);
	t->ops += RP_OPS;
	atomic_store_explicit(&t->inbox, NULL, memory_order_release);
}

/*
 * Hands a fresh batch to the peer. Its inbox holds one batch: wait for the last one to be
 * taken, draining our own meanwhile so that two threads handing over at once cannot deadlock.
 */
static void rp_handoff(struct rp_thread *t, uint64_t *rng)
{
	unsigned int i, spins = 0;

	while (atomic_load_explicit(&t->peer->inbox, memory_order_acquire)) {
		rp_drain(t);
		backoff(&spins);
	}
	for (i = 0; i < RP_OPS; i++)
		t->handoff[i] = block_new(rp_size(rng));
	t->ops += RP_OPS;
	atomic_store_explicit(&t->peer->inbox, t->handoff, memory_order_release);
}

/* One loop: RP_OPS scattered frees, then RP_OPS scattered allocations (replacing any block). */
static void rp_loop(struct rp_thread *t, uint64_t *rng)
{
	unsigned int i, slot;

	for (i = 0; i < RP_OPS; i++) {
		slot = rng_range(rng, 0, RP_BLOCKS - 1);
		if (t->blocks[slot]) {
			free(t->blocks[slot]);
			t->blocks[slot] = NULL;
			t->ops++;
		}
	}
	for (i = 0; i < RP_OPS; i++) {
		slot = rng_range(rng, 0, RP_BLOCKS - 1);
		if (t->blocks[slot]) {
			free(t->blocks[slot]);
			t->ops++;
		}
		t->blocks[slot] = block_new(rp_size(rng));
		t->ops++;
	}
}

static void *rp_thread_main(void *data)
{
	struct rp_thread *t = data;
	uint64_t rng = t->seed, deadline;
	unsigned int i, spins = 0;
	uint32_t loop;

	pthread_barrier_wait(t->start);
	deadline = now_ns() + params.max_ns;
	for (loop = 0; loop < params.rptest_loops; loop++) {
		if (loop % 256 == 0 && loop && now_ns() > deadline)
			break;
		rp_drain(t);
		rp_loop(t, &rng);
		if (loop % RP_XRATE == 0)
			rp_handoff(t, &rng);
	}
	/* The peer may still hand over a batch: keep taking them until it is past its loops. */
	atomic_fetch_add(t->done, 1);
	while (atomic_load(t->done) < 2) {
		rp_drain(t);
		backoff(&spins);
	}
	rp_drain(t);
	t->end_ns = now_ns();
	for (i = 0; i < RP_BLOCKS; i++)
		free(t->blocks[i]);
	return NULL;
}

static int run_rptest(void)
{
	static struct rp_thread th[2];
	_Atomic unsigned int done = 0;
	pthread_barrier_t start;
	pthread_t tids[2];
	uint64_t t0, end;
	unsigned int i;

	pthread_barrier_init(&start, NULL, 3);
	for (i = 0; i < 2; i++) {
		th[i].peer = &th[1 - i];
		th[i].start = &start;
		th[i].done = &done;
		th[i].seed = 0x9e3779b97f4a7c15ull * (i + 1);
		errno = pthread_create(&tids[i], NULL, rp_thread_main, &th[i]);
		if (errno)
			die("pthread_create");
	}
	pthread_barrier_wait(&start);
	t0 = now_ns();
	for (i = 0; i < 2; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&start);
	end = th[0].end_ns > th[1].end_ns ? th[0].end_ns : th[1].end_ns;
	report("rptest", th[0].ops + th[1].ops, t0, end, "");
	return 0;
}

/* ---- xmalloc: 64 B objects allocated by one thread, freed by the other ---- */

#define XM_SIZE 64
#define XM_BATCH 256 /* objects per hand-over */
#define XM_QUEUE 64  /* batches in flight: 1 MiB of objects at most */

/*
 * Single-producer single-consumer ring of batches. The indexes move once per XM_BATCH objects,
 * so the queue costs next to nothing beside the allocator's cross-thread frees.
 */
struct xm_queue {
	_Alignas(64) _Atomic uint64_t head;	      /* batches published by the writer */
	_Alignas(64) _Atomic uint64_t tail;	      /* batches freed by the reader */
	_Alignas(64) void *batch[XM_QUEUE][XM_BATCH]; /* batch n sits in batch[n % XM_QUEUE] */
	pthread_barrier_t *start;
	_Atomic uint64_t end; /* batches in the whole run, once the writer has stopped */
	uint64_t checksum;    /* the reader reads each object before freeing it */
	uint64_t end_ns;      /* when the reader freed the last batch */
	bool pinned[2];	      /* writer, reader: each got a CPU of its own */
};

static void *xm_writer(void *data)
{
	struct xm_queue *q = data;
	uint64_t b, tail = 0, deadline;
	unsigned int i, spins = 0;

	q->pinned[0] = pin_to_nth_cpu(0);
	pthread_barrier_wait(q->start);
	deadline = now_ns() + params.max_ns;
	for (b = 0; b < params.xmalloc_batches; b++) {
		void **slot = q->batch[b % XM_QUEUE];

		if (b % XM_QUEUE == 0 && b && now_ns() > deadline)
			break;
		while (b - tail >= XM_QUEUE) {
			tail = atomic_load_explicit(&q->tail, memory_order_acquire);
			if (b - tail >= XM_QUEUE)
				backoff(&spins);
		}
		for (i = 0; i < XM_BATCH; i++) {
			uint64_t *p = malloc(XM_SIZE);

			if (!p)
				oom();
			*p = b;
			slot[i] = p;
		}
		atomic_store_explicit(&q->head, b + 1, memory_order_release);
	}
	/* end after head: a reader that sees end also sees every batch before it. */
	atomic_store_explicit(&q->end, b, memory_order_release);
	return NULL;
}

static void *xm_reader(void *data)
{
	struct xm_queue *q = data;
	uint64_t head = 0, tail = 0, sum = 0;
	unsigned int i, spins = 0;

	q->pinned[1] = pin_to_nth_cpu(1);
	pthread_barrier_wait(q->start);
	for (;;) {
		if (tail == head) {
			head = atomic_load_explicit(&q->head, memory_order_acquire);
			if (tail == head) {
				if (atomic_load_explicit(&q->end, memory_order_acquire) == tail)
					break;
				backoff(&spins);
				continue;
			}
		}
		for (i = 0; i < XM_BATCH; i++) {
			uint64_t *p = q->batch[tail % XM_QUEUE][i];

			sum += *p;
			free(p);
		}
		tail++;
		atomic_store_explicit(&q->tail, tail, memory_order_release);
	}
	q->checksum = sum;
	q->end_ns = now_ns();
	return NULL;
}

static int run_xmalloc(void)
{
	static struct xm_queue q = { .end = UINT64_MAX };
	pthread_barrier_t start;
	pthread_t writer, reader;
	char extra[96];
	uint64_t t0;

	pthread_barrier_init(&start, NULL, 3);
	q.start = &start;
	errno = pthread_create(&writer, NULL, xm_writer, &q);
	if (errno)
		die("pthread_create");
	errno = pthread_create(&reader, NULL, xm_reader, &q);
	if (errno)
		die("pthread_create");
	pthread_barrier_wait(&start);
	t0 = now_ns();
	pthread_join(writer, NULL);
	pthread_join(reader, NULL);
	pthread_barrier_destroy(&start);
	snprintf(extra, sizeof(extra), " checksum=%llu pinned=%d", (unsigned long long)q.checksum,
		 q.pinned[0] && q.pinned[1]);
	/* The rate is of frees, the cross-thread side, as xmalloc-test reports it. */
	report("xmalloc", atomic_load(&q.end) * XM_BATCH, t0, q.end_ns, extra);
	return 0;
}

/* ---- alloc-test: one thread, tiny sizes, a few hot slots among many cold ones ---- */

/*
 * OLogN's allocator tester as mimalloc-bench runs it (`alloc-test 1`): 2^18 slots, about half
 * filled at the start; then each operation picks a slot with an 80/20 law applied six times
 * over (a quarter of the picks land on 16 slots, two thirds on about 400) and frees its block
 * or makes one. A size's octave halves in likelihood from [5, 8] B up to [513, 1024] B (half
 * the blocks are 8 B or less); each new block is written whole and each block read whole
 * before its free. The shape an earlier version of this file had (uniform slots, 8 B..16 KiB)
 * put tally at 0.98x mimalloc where the original put it at 0.7x: the hot slots' LIFO churn
 * of tiny blocks is what the original measures.
 */
#define AT_SLOTS (1u << 18)
#define AT_ROUND_OPS (1u << 20) /* operations per round */
#define AT_SIZE_EXP 10		/* sizes up to 2^10 + 2^9 */

/* The share of picks of each band of slots, hottest first, and the band's share of the slots
 * (the same law read backwards): 0.8^k * 0.2^(6-k) * C(6,k). */
static const double at_pick[7] = { 0.262144, 0.393216, 0.245760, 0.081920,
				   0.015360, 0.001536, 0.000064 };

struct at_bands {
	uint32_t below[6]; /* a 32-bit draw below below[i] picks band i (band 6 otherwise) */
	uint32_t start[8]; /* band i is slots [start[i], start[i + 1]) */
};

static void at_bands_init(struct at_bands *b)
{
	double acc = 0;
	uint32_t i;

	for (i = 0; i < 6; i++) {
		acc += at_pick[i];
		b->below[i] = (uint32_t)(acc * UINT32_MAX);
	}
	b->start[0] = 0;
	for (i = 0; i < 6; i++)
		b->start[i + 1] = b->start[i] + (uint32_t)(AT_SLOTS * at_pick[6 - i]);
	b->start[7] = AT_SLOTS;
}

static uint32_t at_slot(const struct at_bands *b, uint64_t *rng)
{
	uint64_t r = rng_next(rng);
	uint32_t d = (uint32_t)r, i = 0;

	while (i < 6 && d >= b->below[i])
		i++;
	return b->start[i] + (uint32_t)(r >> 32) % (b->start[i + 1] - b->start[i]);
}

/* An octave e in [2, AT_SIZE_EXP - 1] with likelihood 2^-(e-1), then a size in (2^e, 2^(e+1)]. */
static size_t at_size(uint64_t *rng)
{
	uint64_t r = rng_next(rng);
	uint32_t low = (uint32_t)(r & ((1u << (AT_SIZE_EXP - 3)) - 1)) + 1;
	uint32_t e = (uint32_t)__builtin_ctz(low) + 2;

	return ((r >> 32) & ((1u << e) - 1)) + 1 + ((size_t)1 << e);
}

struct at_slot_ent {
	char *p;
	uint32_t size;
};

static uint64_t at_read(const char *p, size_t size)
{
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i < size; i++)
		sum += (unsigned char)p[i];
	return sum;
}

static int run_alloc_test(void)
{
	uint64_t rng = 0x243f6a8885a308d3ull, round, i, t0, t1, ops = 0, sum = 0;
	struct at_slot_ent *slots = scratch_map(AT_SLOTS * sizeof(*slots));
	struct at_bands bands;

	at_bands_init(&bands);
	for (i = 0; i < AT_SLOTS; i++) {
		if (rng_next(&rng) & 1)
			continue;
		slots[i].size = (uint32_t)at_size(&rng);
		slots[i].p = malloc(slots[i].size);
		if (!slots[i].p)
			oom();
		memset(slots[i].p, (int)slots[i].size, slots[i].size);
	}
	t0 = now_ns();
	for (round = 0; round < params.alloctest_rounds; round++) {
		if (round && now_ns() - t0 > params.max_ns)
			break;
		for (i = 0; i < AT_ROUND_OPS; i++) {
			struct at_slot_ent *s = &slots[at_slot(&bands, &rng)];
			if (s->p) {
				sum += at_read(s->p, s->size);
				free(s->p);
				s->p = NULL;
				continue;
			}
			s->size = (uint32_t)at_size(&rng);
			s->p = malloc(s->size);
			if (!s->p)
				oom();
			memset(s->p, (int)s->size, s->size);
		}
		ops += AT_ROUND_OPS;
	}
	t1 = now_ns();
	escape(&sum);
	report("alloc-test", ops, t0, t1, "");
	for (i = 0; i < AT_SLOTS; i++)
		free(slots[i].p);
	munmap(slots, AT_SLOTS * sizeof(*slots));
	return 0;
}

/* ---- large: big blocks, only their ends written ---- */

#define LG_RING 20
#define LG_MIN_SHIFT 16 /* 64 KiB */
#define LG_MAX_SHIFT 23 /* 8 MiB, exclusive */
#define LG_HEAD 64	/* bytes written at the start of each block */

/*
 * Log-uniform: an octave [2^e, 2^(e+1)) for e in 16..22, then a size uniform inside it, so
 * blocks near 64 KiB are as common, by count, as blocks near 8 MiB are by octave.
 */
static size_t lg_size(uint64_t *rng)
{
	uint32_t e = rng_range(rng, LG_MIN_SHIFT, LG_MAX_SHIFT - 1);

	return ((size_t)1 << e) + rng_range(rng, 0, (1u << e) - 1);
}

/* Writes the head and the last byte only: page faults on the whole block would dominate. */
static char *lg_new(uint64_t *rng)
{
	char *p = block_new(lg_size(rng));

	memset(p, 1, LG_HEAD);
	return p;
}

static int run_large(void)
{
	uint64_t rng = 0x13198a2e03707344ull, i, t0, t1;
	char *ring[LG_RING];

	for (i = 0; i < LG_RING; i++)
		ring[i] = lg_new(&rng);
	t0 = now_ns();
	for (i = 0; i < params.large_iters; i++) {
		uint32_t slot = rng_range(&rng, 0, LG_RING - 1);

		if (i % 1024 == 0 && i && now_ns() - t0 > params.max_ns)
			break;
		free(ring[slot]);
		ring[slot] = lg_new(&rng);
	}
	t1 = now_ns();
	report("large", i, t0, t1, "");
	for (i = 0; i < LG_RING; i++)
		free(ring[i]);
	return 0;
}

/* ---- malloc-large: huge blocks, each zero-filled whole ---- */

#define HG_RING 20
#define HG_MIN (5u << 20)
#define HG_MAX (25u << 20)

/*
 * mimalloc-bench's malloc-large: up to 20 blocks of 5..25 MiB, one replaced at random at a
 * time, each new one zero-filled whole (C++'s make_unique<char[]>), made before the one it
 * replaces is freed (a unique_ptr's assignment). glibc's dynamic mmap
 * threshold keeps such blocks in its heap after their first free, faulted in already; an
 * allocator that maps each afresh pays a page fault per page of every block. Measured over
 * 400 pairs (alloc/large.c has the story): glibc 218 k page faults, tally 238 k when its pool
 * served blocks only whole, 109 k since a block takes the pool's pages moved into it.
 */
static int run_huge(void)
{
	uint64_t rng = 0x452821e638d01377ull, i, t0, t1;
	char *ring[HG_RING] = { 0 };

	t0 = now_ns();
	for (i = 0; i < params.huge_iters; i++) {
		uint32_t slot = rng_range(&rng, 0, HG_RING - 1);
		size_t n = rng_range(&rng, HG_MIN, HG_MAX);

		if (i % 16 == 0 && i && now_ns() - t0 > params.huge_max_ns)
			break;
		char *p = block_new(n);
		memset(p, 0, n);
		free(ring[slot]);
		ring[slot] = p;
	}
	t1 = now_ns();
	report("malloc-large", i, t0, t1, "");
	for (i = 0; i < HG_RING; i++)
		free(ring[i]);
	return 0;
}

/* ---- larson: server threads replacing blocks, trading arrays between rounds ---- */

#define LS_SLOTS 4096	/* blocks per array */
#define LS_ROUND 4096	/* replacements per round */
#define LS_SWAP_EVERY 2 /* rounds between swaps of the two threads' arrays */
#define LS_MIN 8
#define LS_MAX 1000

struct ls_shared {
	void *arrays[2][LS_SLOTS];
	pthread_barrier_t swap; /* the threads meet here to trade arrays */
	/*
	 * The last epoch, once thread 0 has seen the time run out; UINT32_MAX until then. An
	 * epoch rather than a flag: thread 0 may set it in the next epoch before thread 1 has
	 * read it after this swap, and both must leave after the same swap.
	 */
	_Atomic uint32_t last_epoch;
	uint64_t t0;
};

struct ls_thread {
	struct ls_shared *sh;
	unsigned int id;
	uint64_t seed;
	uint64_t ops; /* replacements: a free and a malloc each */
	uint64_t end_ns;
};

/*
 * Thread id works on arrays[(id + epoch) % 2]: after each swap it frees blocks the other thread
 * allocated, as larson's successor threads free their predecessors' blocks.
 */
static void *ls_thread_main(void *data)
{
	struct ls_thread *t = data;
	struct ls_shared *sh = t->sh;
	uint64_t rng = t->seed;
	uint32_t epoch, i, slot;

	for (i = 0; i < LS_SLOTS; i++)
		sh->arrays[t->id][i] = block_new(rng_range(&rng, LS_MIN, LS_MAX));
	pthread_barrier_wait(&sh->swap);
	if (t->id == 0)
		sh->t0 = now_ns();
	for (epoch = 0; epoch < params.larson_epochs; epoch++) {
		void **blocks = sh->arrays[(t->id + epoch) % 2];

		for (i = 0; i < LS_SWAP_EVERY * LS_ROUND; i++) {
			slot = rng_range(&rng, 0, LS_SLOTS - 1);
			free(blocks[slot]);
			blocks[slot] = block_new(rng_range(&rng, LS_MIN, LS_MAX));
		}
		t->ops += LS_SWAP_EVERY * LS_ROUND;
		if (t->id == 0 && now_ns() - sh->t0 > params.max_ns)
			atomic_store(&sh->last_epoch, epoch);
		pthread_barrier_wait(&sh->swap);
		if (epoch >= atomic_load(&sh->last_epoch))
			break;
	}
	t->end_ns = now_ns();
	return NULL;
}

static int run_larson(void)
{
	static struct ls_shared sh = { .last_epoch = UINT32_MAX };
	struct ls_thread th[2];
	pthread_t tids[2];
	unsigned int i, k;

	pthread_barrier_init(&sh.swap, NULL, 2);
	for (i = 0; i < 2; i++) {
		th[i] = (struct ls_thread){ .sh = &sh,
					    .id = i,
					    .seed = 0xa4093822299f31d0ull * (i + 1) };
		errno = pthread_create(&tids[i], NULL, ls_thread_main, &th[i]);
		if (errno)
			die("pthread_create");
	}
	for (i = 0; i < 2; i++)
		pthread_join(tids[i], NULL);
	pthread_barrier_destroy(&sh.swap);
	report("larson", th[0].ops + th[1].ops, sh.t0,
	       th[0].end_ns > th[1].end_ns ? th[0].end_ns : th[1].end_ns, "");
	for (i = 0; i < 2; i++)
		for (k = 0; k < LS_SLOTS; k++)
			free(sh.arrays[i][k]);
	return 0;
}

/* ---- main ---- */

static const struct shape {
	const char *name;
	int (*run)(void);
	const char *what, *unit;
} shapes[] = {
	{ "rptest", run_rptest, "2 threads, 8..16000 B, batches handed across", "calls/s" },
	{ "xmalloc", run_xmalloc, "64 B malloc in one thread, free in the other", "frees/s" },
	{ "alloc-test", run_alloc_test, "1 thread, 5 B..1.5 KiB, 80/20 slots, written whole",
	  "calls/s" },
	{ "large", run_large, "1 thread, 64 KiB..8 MiB, a ring of 20 blocks", "pairs/s" },
	{ "malloc-large", run_huge, "1 thread, 5..25 MiB zero-filled, a ring of 20", "pairs/s" },
	{ "larson", run_larson, "2 threads, 8..1000 B, arrays traded", "pairs/s" },
};

static void usage(FILE *f)
{
	size_t i;

	fprintf(f,
		"usage: alloc_shapes [-q] WORKLOAD\n\nWorkloads (each prints one 'result NAME "
		"ops_per_s=... peak_rss_mib=...' line;\ncalls: of malloc, free, realloc, calloc; "
		"pairs: a free and a malloc):\n");
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		fprintf(f, "  %-12s %-46s %s\n", shapes[i].name, shapes[i].what, shapes[i].unit);
	fprintf(f,
		"\n  -q  quick: a tenth of the work (smoke test)\n\nEXAMPLES:\n"
		"  alloc_shapes larson\n"
		"  LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libmimalloc.so.2 alloc_shapes -q rptest\n");
}

int main(int argc, char **argv)
{
	size_t i;
	int opt;

	base_rss = rss_bytes();
	while ((opt = getopt(argc, argv, "qh")) != -1) {
		switch (opt) {
		case 'q':
			params.rptest_loops /= 10;
			params.xmalloc_batches /= 10;
			params.alloctest_rounds /= 10;
			params.large_iters /= 10;
			params.huge_iters /= 10;
			params.huge_max_ns /= 10;
			params.larson_epochs /= 10;
			params.max_ns /= 10;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind + 1 != argc) {
		usage(stderr);
		return 2;
	}
	for (i = 0; i < sizeof(shapes) / sizeof(shapes[0]); i++)
		if (!strcmp(argv[optind], shapes[i].name))
			return shapes[i].run();
	fprintf(stderr, "alloc_shapes: unknown workload '%s'\n", argv[optind]);
	usage(stderr);
	return 2;
}
