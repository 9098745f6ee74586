// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The remote state reader (user/remote.c) against a memory that is not a
 * process: the bounds on a hostile target's state. The fuzz targets
 * (tests/fuzz) look for crashes; these pin down what it answers.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "../user/remote.h"

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
	assert_int_equal(remote_alloc_read_mem(&mem, HEAPS_AT, true, &ra), 0);
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
	assert_int_equal(remote_alloc_read_mem(&mem, HEAPS_AT, true, &ra), -ELOOP);
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
	int err = remote_alloc_read_mem(&mem, HEAPS_AT, false, &ra);
	uint64_t took = mono_ns() - t0;
	remote_read_max_ns = saved;
	assert_int_equal(err, -ETIME);
	assert_true(took < 2000000000ULL);
	assert_non_null(strstr(remote_strerror(err), "to read"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(reads_a_heap_list),
		cmocka_unit_test(a_looping_heap_list_is_refused),
		cmocka_unit_test(a_read_past_its_time_fails),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
