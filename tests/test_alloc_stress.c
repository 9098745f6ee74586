// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Allocator stress tests with the allocator as the process's malloc (no
 * sanitizer: it would bring its own). Everything in the process allocates
 * through it, so exact live figures are asserted per group: the workloads'
 * blocks are charged to STRESS_GROUP. Every batch is replayed (alloc_oracle.c)
 * and must equal the in-process figures at every quiescent point.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../alloc/internal.h"
#include "alloc_oracle.h"
#include "alloc_stress.h"

static uint64_t seed = 1;

static void stress__random_threads_with_exits_and_leftovers(void **state)
{
	(void)state;
	stress_random(6, 60000, seed);
}

static void stress__producer_consumer(void **state)
{
	(void)state;
	stress_producer_consumer(3, 40000, seed + 1);
}

static void stress__fork(void **state)
{
	(void)state;
	stress_fork(seed + 2);
}

/* predicted_resident against smaps: within 1 % plus one page per assigned span */
static void assert_resident_close(const char *where)
{
	oracle_check(where);
	struct tally_stats s = oracle_stats();
	uint64_t predicted = tally_stats_predicted_resident(&s);
	uint64_t measured = oracle_smaps_resident();
	uint64_t slack = measured / 100 + s.spans_assigned * OS_PAGE;
	uint64_t diff = predicted > measured ? predicted - measured : measured - predicted;
	print_message("%s: predicted_resident %lu measured %lu (slack %lu)\n", where,
		      (unsigned long)predicted, (unsigned long)measured, (unsigned long)slack);
	if (diff > slack)
		fail_msg("%s: predicted_resident %lu vs smaps %lu: off by %lu > %lu", where,
			 (unsigned long)predicted, (unsigned long)measured, (unsigned long)diff,
			 (unsigned long)slack);
}

static void resident__predicted_matches_smaps(void **state)
{
	(void)state;
	enum { N = 200000 };
	char **v = malloc(N * sizeof(*v));
	uint64_t s = seed | 1;

	assert_non_null(v);
	tally_alloc__set_group(STRESS_GROUP);
	for (int i = 0; i < N; i++) {
		s ^= s << 13, s ^= s >> 7, s ^= s << 17;
		size_t q = 16 + s % 2000;
		v[i] = malloc(q);
		memset(v[i], 1, q);
	}
	tally_alloc__set_group(0);
	assert_resident_close("filled");
	/* scattered frees, pages handed back */
	for (int i = 0; i < N; i++)
		if (i % 16) {
			free(v[i]);
			v[i] = NULL;
		}
	tally_alloc_collect(1);
	assert_resident_close("scattered frees collected");
	for (int i = 0; i < N; i++)
		free(v[i]);
	free(v);
	tally_alloc_collect(1);
	assert_resident_close("all freed and collected");
	assert_int_equal(oracle_group_live(STRESS_GROUP), 0);
}

int main(int argc, char **argv)
{
	if (argc > 1)
		seed = strtoull(argv[1], NULL, 0);
	if (getenv("TEST_FILTER"))
		cmocka_set_test_filter(getenv("TEST_FILTER"));
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(stress__random_threads_with_exits_and_leftovers),
		cmocka_unit_test(stress__producer_consumer),
		cmocka_unit_test(stress__fork),
		cmocka_unit_test(resident__predicted_matches_smaps),
	};
	return cmocka_run_group_tests_name("alloc_stress", tests, NULL, NULL);
}
