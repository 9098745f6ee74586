// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The remote state reader (user/os/remote.c) against a memory that is not a
 * process: the bounds on a hostile target's state. The fuzz targets
 * (tests/fuzz) look for crashes; these pin down what it answers. And against
 * a real one, this test's own: the allocator runs here under tally_p_ names
 * (the sanitizer build), and what the reader derives from its memory through
 * process_vm_readv must be what the allocator says of itself.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "../alloc/include/tally_alloc_prefixed.h"
#include "../user/os/remote.h"

#define HEAPS_AT 0x1000ULL
#define TOP 0x7f0000000000ULL /* the first heap; each next one 64 KiB below */

struct fake {
	unsigned delay_us; /* per read: a target whose reads are slow */
	bool loop;	   /* the last heap points back to the first */
	unsigned nheaps;
	unsigned reads;
};

/* Heaps every 64 KiB below TOP, ids falling, no segments, empty batches. */
static int fake_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct fake *f = ctx;
	static struct heap h;

	f->reads++;
	if (f->delay_us)
		usleep(f->delay_us);
	if (addr == HEAPS_AT && len == sizeof(uint64_t)) {
		uint64_t first = TOP;
		memcpy(buf, &first, sizeof(first));
		return 0;
	}
	uint64_t base = addr & ~0xffffULL, i = (TOP - base) >> 16;
	if (addr < base || addr + len > base + sizeof(h) || i >= f->nheaps)
		return -EFAULT;
	memset(&h, 0, sizeof(h));
	h.id = 1000000 - i;
	h.tid = 1;
	if (i + 1 < f->nheaps)
		h.all_next = (struct heap *)(uintptr_t)(base - 0x10000);
	else if (f->loop)
		h.all_next = (struct heap *)(uintptr_t)TOP;
	memcpy(buf, (char *)&h + (addr - base), len);
	return 0;
}

static void reads_a_heap_list(void **state)
{
	struct fake f = { .nheaps = 100 };
	struct remote_mem mem = { fake_read, &f };
	struct remote_alloc ra;

	(void)state;
	assert_int_equal(remote_alloc_read_mem(&mem, HEAPS_AT, true, 0, &ra), 0);
	assert_int_equal(ra.nheaps, 100);
	assert_true(ra.consistent);
	remote_alloc_free(&ra);
}

static void a_looping_heap_list_is_refused(void **state)
{
	struct fake f = { .nheaps = 10, .loop = true };
	struct remote_mem mem = { fake_read, &f };
	struct remote_alloc ra;

	(void)state;
	assert_int_equal(remote_alloc_read_mem(&mem, HEAPS_AT, true, 0, &ra), -ELOOP);
	assert_int_equal(ra.nheaps, 0);
}

static uint64_t mono_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
}

/* 65536 heaps, each read slowly: within the bounds, but minutes long. The
 * read gives up at its time limit (the fuzzer found reads of 15 s). */
static void a_read_past_its_time_fails(void **state)
{
	struct fake f = { .nheaps = 65536, .delay_us = 1000 };
	struct remote_mem mem = { fake_read, &f };
	struct remote_alloc ra;
	uint64_t saved = remote_read_max_ns, t0 = mono_ns();

	(void)state;
	remote_read_max_ns = 200000000ULL; /* 0.2 s */
	int err = remote_alloc_read_mem(&mem, HEAPS_AT, false, 0, &ra);
	uint64_t took = mono_ns() - t0;
	remote_read_max_ns = saved;
	assert_int_equal(err, -ETIME);
	assert_true(took < 2000000000ULL);
	assert_non_null(strstr(remote_strerror(err), "to read"));
}

/* The allocator's test hooks (the TALLY_ALLOC_TEST_SINK build): every batch
 * comes here, and is dropped (no replay in these tests; it must not
 * allocate); the purger can be held so that nothing moves while it is read. */
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes)
{
	(void)b;
	(void)bytes;
}
void tally_alloc_test_purge_hold(int hold);
void tally_alloc_test_flush_all(void);

#define OWN_GROUP 7 /* the group some of the blocks below are charged to */
#define NBLOCKS 96

/* Blocks of every kind: small classes, the largest class, direct mappings
 * (above CLASS_MAX), some charged to OWN_GROUP, some freed again, some
 * reallocated. What stays allocated is in blocks[]; *live and *group_live
 * are their requested bytes, all and OWN_GROUP's. */
static void own_blocks_make(void *blocks[], uint64_t *live, uint64_t *group_live)
{
	/* up to CLASS_MAX in a class; above, mapped directly */
	static const size_t sizes[] = { 1,    8,    16,	   24,	      100,	     500,   1000,
					4000, 8192, 20000, CLASS_MAX, CLASS_MAX + 1, 300000 };
	const size_t nsizes = sizeof(sizes) / sizeof(sizes[0]);

	*live = *group_live = 0;
	for (unsigned i = 0; i < NBLOCKS; i++) {
		size_t n = sizes[i % nsizes];
		bool grouped = i % 4 == 1;
		if (grouped)
			tally_alloc__set_group(OWN_GROUP);
		blocks[i] = tally_p_malloc(n);
		assert_non_null(blocks[i]);
		memset(blocks[i], 0xa5, n);
		if (i % 5 == 2) { /* the new size is the one counted */
			n = n / 2 + 3;
			blocks[i] = tally_p_realloc(blocks[i], n);
			assert_non_null(blocks[i]);
		}
		if (i % 3 == 0) {
			tally_p_free(blocks[i]);
			blocks[i] = NULL;
			n = 0;
		}
		if (grouped)
			tally_alloc__set_group(0);
		*live += n;
		if (grouped)
			*group_live += n;
	}
}

static void own_blocks_free(void *blocks[])
{
	for (unsigned i = 0; i < NBLOCKS; i++)
		tally_p_free(blocks[i]);
}

static uint64_t own_heaps_addr(void)
{
	return (uint64_t)(uintptr_t)&tally_heaps;
}

/* Field for field, with the field's name when one differs. */
static void stats_assert_equal(const struct tally_stats *remote, const struct tally_stats *own)
{
#define STATS_CMP(field, ...)                                                                      \
	if (remote->field != own->field)                                                           \
		fail_msg("%s: read %lu, the allocator's own %lu", #field,                          \
			 (unsigned long)remote->field, (unsigned long)own->field);
	TALLY_STATS_X(STATS_CMP)
#undef STATS_CMP
}

static void groups_assert_equal(const struct remote_alloc *ra)
{
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		struct tally_group_stats own;
		assert_int_equal(tally_alloc_group_stats(g, &own), 0);
		if (memcmp(&ra->groups[g], &own, sizeof(own)))
			fail_msg("group %u: read %lu/%lu bytes, the allocator's own %lu/%lu", g,
				 (unsigned long)ra->groups[g].allocated_bytes,
				 (unsigned long)ra->groups[g].deallocated_bytes,
				 (unsigned long)own.allocated_bytes,
				 (unsigned long)own.deallocated_bytes);
	}
}

static const struct remote_heap *heap_of_tid(const struct remote_alloc *ra, uint32_t tid)
{
	for (uint32_t i = 0; i < ra->nheaps; i++)
		if (ra->heaps[i].tid == tid)
			return &ra->heaps[i];
	return NULL;
}

static void own_process__figures_equal_the_allocators_own(void **state)
{
	void *blocks[NBLOCKS];
	struct tally_stats before, own;
	struct tally_group_stats group_before;
	struct remote_alloc ra;
	uint64_t live, group_live;

	(void)state;
	tally_alloc_test_purge_hold(1);
	assert_int_equal(tally_alloc_stats(&before), 0);
	assert_int_equal(tally_alloc_group_stats(OWN_GROUP, &group_before), 0);
	own_blocks_make(blocks, &live, &group_live);
	assert_int_equal(tally_alloc_stats(&own), 0);
	assert_int_equal(remote_alloc_read(getpid(), own_heaps_addr(), 0, &ra), 0);

	stats_assert_equal(&ra.stats, &own);
	groups_assert_equal(&ra);
	/* and the figures are the blocks above */
	assert_int_equal(ra.stats.live - before.live, live);
	assert_int_equal(ra.groups[OWN_GROUP].allocated_bytes -
				 ra.groups[OWN_GROUP].deallocated_bytes -
				 (group_before.allocated_bytes - group_before.deallocated_bytes),
			 group_live);
	assert_true(ra.stats.large_count > before.large_count);
	assert_true(tally_stats_balanced(&ra.stats));
	assert_true(ra.consistent);
	assert_non_null(heap_of_tid(&ra, (uint32_t)syscall(SYS_gettid)));
	remote_alloc_free(&ra);

	own_blocks_free(blocks);
	assert_int_equal(tally_alloc_stats(&own), 0);
	assert_int_equal(remote_alloc_read(getpid(), own_heaps_addr(), 0, &ra), 0);
	stats_assert_equal(&ra.stats, &own);
	assert_int_equal(ra.stats.live, before.live);
	remote_alloc_free(&ra);
	tally_alloc_test_purge_hold(0);
}

struct other_thread {
	void *blocks[NBLOCKS];
	uint64_t live, group_live;
	uint32_t tid;
};

static void *other_thread_run(void *arg)
{
	struct other_thread *t = arg;

	t->tid = (uint32_t)syscall(SYS_gettid);
	own_blocks_make(t->blocks, &t->live, &t->group_live);
	return NULL;
}

/* A second heap, left behind by a thread that exited, whose blocks this
 * thread frees (foreign frees: the allocator's cache until drained). */
static void own_process__a_second_heap_and_foreign_frees(void **state)
{
	struct other_thread t = { 0 };
	struct tally_stats own;
	struct remote_alloc ra;
	pthread_t th;

	(void)state;
	tally_alloc_test_purge_hold(1);
	assert_int_equal(pthread_create(&th, NULL, other_thread_run, &t), 0);
	assert_int_equal(pthread_join(th, NULL), 0);
	for (unsigned i = 0; i < NBLOCKS; i += 2) {
		tally_p_free(t.blocks[i]);
		t.blocks[i] = NULL;
	}
	assert_int_equal(tally_alloc_stats(&own), 0);
	assert_int_equal(remote_alloc_read(getpid(), own_heaps_addr(), 0, &ra), 0);

	stats_assert_equal(&ra.stats, &own);
	groups_assert_equal(&ra);
	assert_true(ra.stats.cache > 0);
	assert_true(ra.nheaps >= 2);
	assert_non_null(heap_of_tid(&ra, t.tid));
	assert_non_null(heap_of_tid(&ra, (uint32_t)syscall(SYS_gettid)));
	assert_true(ra.consistent);
	remote_alloc_free(&ra);
	own_blocks_free(t.blocks);
	tally_alloc_test_purge_hold(0);
}

/* The records each heap holds, not handed over yet: read as they are. */
static void own_process__pending_records_are_the_heaps_batches(void **state)
{
	struct remote_alloc ra;
	void *p[3];

	(void)state;
	tally_alloc_test_purge_hold(1);
	tally_alloc_test_flush_all();
	for (unsigned i = 0; i < 3; i++)
		p[i] = tally_p_malloc(40 + i);
	assert_int_equal(remote_pending_read(getpid(), own_heaps_addr(), 0, &ra), 0);
	assert_true(ra.consistent);
	const struct remote_heap *mine = heap_of_tid(&ra, (uint32_t)syscall(SYS_gettid));
	assert_non_null(mine);
	assert_true(mine->npending >= 3);
	for (uint32_t i = 0; i < ra.nheaps; i++) {
		const struct remote_heap *rh = &ra.heaps[i];
		const struct heap *h = tally_heaps;
		while (h && h->id != rh->id)
			h = h->all_next;
		assert_non_null(h);
		assert_int_equal(rh->tid, h->tid);
		assert_int_equal(rh->seq_first, h->seq);
		assert_int_equal(rh->npending, h->batch.count);
		assert_int_equal(rh->pos, h->seq + h->batch.count);
		assert_true(rh->whole);
		if (rh->npending)
			assert_memory_equal(rh->pending, h->batch.words,
					    rh->npending * sizeof(rh->pending[0]));
	}
	remote_alloc_free(&ra);
	for (unsigned i = 0; i < 3; i++)
		tally_p_free(p[i]);
	tally_alloc_test_purge_hold(0);
}

/* A process that has exited: -ESRCH, nothing to free. */
static void a_pid_that_is_gone__says_so(void **state)
{
	struct remote_alloc ra;
	struct tally_registry reg;
	pid_t pid = fork();

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_int_equal(remote_alloc_read(pid, own_heaps_addr(), 0, &ra), -ESRCH);
	assert_int_equal(ra.nheaps, 0);
	assert_null(ra.heaps);
	assert_int_equal(remote_pending_read(pid, own_heaps_addr(), 0, &ra), -ESRCH);
	assert_int_equal(remote_registry_read(pid, own_heaps_addr(), &reg), -ESRCH);
}

/* An address where nothing is mapped: -EFAULT, not a crash. */
static void own_process__an_unmapped_address_is_a_fault(void **state)
{
	struct remote_alloc ra;

	(void)state;
	assert_int_equal(remote_alloc_read(getpid(), 0x1000, 0, &ra), -EFAULT);
	assert_int_equal(ra.nheaps, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_a_heap_list),
		cmocka_unit_test(a_looping_heap_list_is_refused),
		cmocka_unit_test(a_read_past_its_time_fails),
		cmocka_unit_test(own_process__figures_equal_the_allocators_own),
		cmocka_unit_test(own_process__a_second_heap_and_foreign_frees),
		cmocka_unit_test(own_process__pending_records_are_the_heaps_batches),
		cmocka_unit_test(own_process__an_unmapped_address_is_a_fault),
		cmocka_unit_test(a_pid_that_is_gone__says_so),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
