// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The cut's hand-over (alloc/cut.c, docs/DESIGN.md §8) against the real
 * allocator and the real reader: threads allocate and free flat out, blocks
 * pass between them, short-lived threads leave orphans, the purger runs;
 * this test's main thread is the tracer. It writes requests into its own
 * process as tally does (remote_cut_request: process_vm_writev, then the
 * global membarrier) and reads the heaps back through process_vm_readv
 * (user/os/remote.c). Every batch the allocator hands over is kept (the test
 * sink). At the end each cut is checked against the records themselves:
 * the prefixes it names, one per heap, replayed from nothing, must be of one
 * moment (every term and every group at least 0, the identity balanced),
 * and a cut with figures must equal that replay field for field.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "../alloc/include/tally_alloc_prefixed.h"
#include "../user/model/replay.h"
#include "../user/os/remote.h"

/* ---- every batch, kept: (tid, heap, seq_first, count, words) ---- */

#define LOG_BYTES (768UL << 20) /* reserved; only what is written is touched */
static char *log_buf;
static size_t log_len;
static bool log_full;
static pthread_mutex_t log_lock = PTHREAD_MUTEX_INITIALIZER;

struct log_ent {
	uint64_t heap_id, seq_first;
	uint32_t tid, count;
	uint64_t words[];
};

void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes)
{
	size_t need = sizeof(struct log_ent) + (size_t)b->count * sizeof(uint64_t);

	(void)bytes;
	pthread_mutex_lock(&log_lock);
	if (log_buf && log_len + need <= LOG_BYTES) {
		struct log_ent *e = (struct log_ent *)(log_buf + log_len);
		e->heap_id = b->heap_id;
		e->seq_first = b->seq_first;
		e->tid = b->tid;
		e->count = b->count;
		memcpy(e->words, b->words, (size_t)b->count * sizeof(uint64_t));
		log_len += need;
	} else if (log_buf) {
		log_full = true;
	}
	pthread_mutex_unlock(&log_lock);
}
void tally_alloc_test_purge_hold(int hold);
void tally_alloc_test_flush_all(void);

/* ---- the workload ---- */

#define WORKERS 3
#define SHARED 64
static atomic_bool stop;
static _Atomic(void *) shared[SHARED];
static uint32_t worker_tid[WORKERS];

static size_t pick(unsigned long *seed)
{
	*seed = *seed * 6364136223846793005UL + 1442695040888963407UL;
	unsigned r = (unsigned)(*seed >> 33);
	if ((r & 511) == 0)
		return 40000 + (r >> 9) % 200000; /* large blocks and their pool */
	if ((r & 15) == 0)
		return 512 + (r >> 4) % 20000;
	return 16 + (r >> 4) % 500;
}

/* n operations: each frees one of 64 slots and refills it; every 8th block
 * goes to the shared table, whose previous block this thread frees. */
static void churn(unsigned long seed, void **slots, unsigned long n)
{
	for (unsigned long i = 0; i < n; i++) {
		size_t size = pick(&seed);
		unsigned j = (unsigned)(seed >> 20) & 63;
		tally_p_free(slots[j]);
		slots[j] = tally_p_malloc(size);
		if ((i & 7) == 0 && slots[j]) {
			void *old = atomic_exchange(&shared[(seed >> 40) & (SHARED - 1)], slots[j]);
			slots[j] = NULL;
			tally_p_free(old);
		}
	}
}

static void *worker(void *arg)
{
	unsigned idx = (unsigned)(uintptr_t)arg;
	void *slots[64] = { 0 };

	__atomic_store_n(&worker_tid[idx], (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
	for (unsigned long k = 1; !atomic_load_explicit(&stop, memory_order_relaxed); k++)
		churn(idx * 7919 + k, slots, 256);
	for (int i = 0; i < 64; i++)
		tally_p_free(slots[i]);
	return NULL;
}

/* Short-lived threads: each leaves its heap an orphan, some of its blocks in
 * the shared table (freed into the orphan later), for others to sweep or
 * adopt. */
static void *brief(void *arg)
{
	void *slots[64] = { 0 };

	churn((unsigned long)(uintptr_t)arg, slots, 200);
	for (int i = 0; i < 64; i += 2)
		tally_p_free(slots[i]);
	return NULL;
}

static void *spawner(void *arg)
{
	(void)arg;
	for (uintptr_t k = 1; !atomic_load_explicit(&stop, memory_order_relaxed); k++) {
		pthread_t t;
		if (pthread_create(&t, NULL, brief, (void *)k) == 0)
			pthread_join(t, NULL);
		usleep(2000);
	}
	return NULL;
}

/* ---- the tracer's side ---- */

#define CUTS 40
#define MAX_HEAPS 512

struct cut {
	bool figures;
	uint32_t nheaps;
	uint64_t id[MAX_HEAPS], pos[MAX_HEAPS];
	struct tally_stats stats;
	struct tally_group_stats groups[TALLY_MAX_GROUPS];
};
static struct cut cuts[CUTS];

static bool worker_answered(const struct remote_alloc *ra, unsigned w)
{
	uint32_t tid = __atomic_load_n(&worker_tid[w], __ATOMIC_ACQUIRE);

	for (uint32_t i = 0; i < ra->nheaps; i++)
		if (ra->heaps[i].tid == tid && ra->heaps[i].answered)
			return true;
	return false;
}

/* One cut: with figures, tried until the read is whole and every worker
 * (running: its heap may not be read from outside) has answered. */
static void take(struct cut *c, bool figures)
{
	uint64_t heaps = (uint64_t)(uintptr_t)&tally_heaps;
	uint64_t req_at = (uint64_t)(uintptr_t)&tally_cut;
	struct remote_alloc ra;
	uint64_t req;

	assert_int_equal(remote_cut_request(getpid(), req_at, figures, &req), 0);
	assert_int_not_equal(req, 0);
	/* as user/session/cut_read.c: first until no heap is in the middle of
	 * an operation it began before the request (the purger's pass too) */
	for (int tries = 0; figures; tries++) {
		assert_true(tries < 20000);
		assert_int_equal(remote_pending_read(getpid(), heaps, req, &ra), 0);
		uint32_t busy = ra.nbusy;
		remote_alloc_free(&ra);
		if (!busy)
			break;
		usleep(50);
	}
	for (int tries = 0;; tries++) {
		assert_true(tries < 20000);
		if (figures)
			assert_int_equal(remote_alloc_read(getpid(), heaps, req, &ra), 0);
		else
			assert_int_equal(remote_pending_read(getpid(), heaps, req, &ra), 0);
		bool ok = !ra.nbusy && (!figures || ra.consistent);
		for (unsigned w = 0; ok && figures && w < WORKERS; w++)
			ok = worker_answered(&ra, w);
		if (ok)
			break;
		remote_alloc_free(&ra);
		usleep(50);
	}
	assert_true(ra.nheaps <= MAX_HEAPS);
	c->figures = figures;
	c->nheaps = ra.nheaps;
	for (uint32_t i = 0; i < ra.nheaps; i++) {
		c->id[i] = ra.heaps[i].id;
		c->pos[i] = ra.heaps[i].pos;
	}
	c->stats = ra.stats;
	memcpy(c->groups, ra.groups, sizeof(c->groups));
	remote_alloc_free(&ra);
	/* read: the purger may sweep the heaps that did not answer */
	assert_int_equal(remote_cut_done(getpid(), req_at, req), 0);
}

/* The records below each of the cut's positions, replayed from nothing. */
static void replay_cut(const struct cut *c, struct tally_replay *r)
{
	static struct tally_batch b;

	tally_replay_init(r);
	for (size_t off = 0; off < log_len;) {
		const struct log_ent *e = (const struct log_ent *)(log_buf + off);
		off += sizeof(*e) + (size_t)e->count * sizeof(uint64_t);
		uint64_t pos = 0; /* a heap the cut did not list: made after it */
		for (uint32_t i = 0; i < c->nheaps; i++)
			if (c->id[i] == e->heap_id)
				pos = c->pos[i];
		if (e->seq_first >= pos)
			continue;
		uint64_t n = pos - e->seq_first < e->count ? pos - e->seq_first : e->count;
		memcpy(b.words, e->words, n * sizeof(uint64_t));
		b.count = (uint32_t)n;
		size_t bytes =
			tally_batch_seal(&b, TALLY_SRC_ALLOC, e->tid, e->heap_id, e->seq_first);
		assert_int_equal(tally_replay_batch(r, &b, bytes), 0);
	}
}

static void assert_one_moment(const struct cut *c, unsigned k)
{
	struct tally_replay r;
	struct tally_stats st;

	replay_cut(c, &r);
	assert_int_equal(r.rejected, 0);
	tally_replay_stats(&r, &st);
	const int64_t terms[] = { r.mapped,	      r.live,	     r.rounding,      r.cache,
				  r.span_free,	      r.returned,    r.virgin,	      r.hysteresis,
				  r.segment_overhead, r.large_count, r.spans_assigned };
	for (unsigned i = 0; i < sizeof(terms) / sizeof(terms[0]); i++)
		if (terms[i] < 0)
			fail_msg("cut %u: term %u is %lld", k, i, (long long)terms[i]);
	if (!tally_stats_balanced(&st))
		fail_msg("cut %u: identity not balanced", k);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		assert_true(r.groups[g].alloc_bytes >= r.groups[g].dealloc_bytes);
	if (!c->figures)
		return;
	if (memcmp(&st, &c->stats, sizeof(st)))
		fail_msg("cut %u: figures differ from the records below it: live %llu vs %llu, "
			 "span_free %llu vs %llu",
			 k, (unsigned long long)c->stats.live, (unsigned long long)st.live,
			 (unsigned long long)c->stats.span_free, (unsigned long long)st.span_free);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++) {
		assert_int_equal(c->groups[g].allocated_bytes, (uint64_t)r.groups[g].alloc_bytes);
		assert_int_equal(c->groups[g].deallocated_objects,
				 (uint64_t)r.groups[g].dealloc_objs);
	}
}

/* Cuts taken while the threads run, each checked against the records. */
static void cut__prefixes_of_one_moment_while_threads_run(void **state)
{
	pthread_t w[WORKERS], sp;

	(void)state;
	log_buf = mmap(NULL, LOG_BYTES, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	assert_true(log_buf != MAP_FAILED);
	for (unsigned i = 0; i < WORKERS; i++)
		assert_int_equal(pthread_create(&w[i], NULL, worker, (void *)(uintptr_t)i), 0);
	assert_int_equal(pthread_create(&sp, NULL, spawner, NULL), 0);
	for (unsigned i = 0; i < WORKERS; i++)
		while (!__atomic_load_n(&worker_tid[i], __ATOMIC_ACQUIRE))
			usleep(100);
	for (unsigned k = 0; k < CUTS; k++) {
		usleep(3000);
		take(&cuts[k], k % 2 == 0);
	}
	atomic_store(&stop, true);
	for (unsigned i = 0; i < WORKERS; i++)
		pthread_join(w[i], NULL);
	pthread_join(sp, NULL);
	tally_alloc_test_purge_hold(1);
	tally_alloc_test_flush_all();
	assert_false(log_full);
	for (unsigned k = 0; k < CUTS; k++)
		assert_one_moment(&cuts[k], k);
	tally_alloc_test_purge_hold(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(cut__prefixes_of_one_moment_while_threads_run),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
