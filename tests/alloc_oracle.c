// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
#include <pthread.h>
#include <stdbool.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "../user/model/replay.h"
#include "alloc_oracle.h"

static pthread_mutex_t sink_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_replay replay;
static uint64_t sink_rejected;

#ifdef TALLY_ORACLE_NO_REPLAY
/*
 * Against the product library (untraced, so its fast paths run): no batches
 * to replay, so the checks are the identity and, in the callers, each group's
 * exact live bytes.
 */
static const bool have_replay = false;
void tally_alloc_test_flush_all(void)
{
}
/* the product library has no way to pause its purger: what the checks read
 * under its heaps' lock (the identity, the groups) is consistent all the same */
static void purge_hold(int hold)
{
	(void)hold;
}
#else
static const bool have_replay = true;
/* The purger (alloc/purge.c) sweeps heaps in the background: no sweep between
 * the in-process figures and the replay's. */
void tally_alloc_test_purge_hold(int hold);
static void purge_hold(int hold)
{
	tally_alloc_test_purge_hold(hold);
}
/* Called by the allocator with each batch (the TALLY_ALLOC_TEST_SINK build).
 * It must not allocate: it runs inside malloc. */
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes);
void tally_alloc_test_sink(const struct tally_batch *b, size_t bytes)
{
	pthread_mutex_lock(&sink_lock);
	if (tally_replay_batch(&replay, b, bytes))
		sink_rejected++;
	pthread_mutex_unlock(&sink_lock);
}
#endif

/* clang-format off */
#define FIELDS(X) X(mapped) X(live) X(rounding) X(cache) X(span_free) X(returned) X(virgin) \
	X(hysteresis) X(segment_overhead) X(large_count) X(spans_assigned)
/* clang-format on */

static struct tally_stats last;

void oracle_check(const char *where)
{
	struct tally_stats in, re;

	purge_hold(1);
	tally_alloc_test_flush_all();
	assert_int_equal(tally_alloc_stats(&in), 0);
	pthread_mutex_lock(&sink_lock);
	tally_replay_stats(&replay, &re);
	uint64_t rejected = sink_rejected + replay.rejected;
	pthread_mutex_unlock(&sink_lock);
	last = in;
	if (!tally_stats_balanced(&in))
		fail_msg("%s: identity not balanced: mapped %lu accounted %lu", where,
			 (unsigned long)in.mapped, (unsigned long)tally_stats_accounted(&in));
	if (!have_replay) {
		purge_hold(0);
		return;
	}
#define CMP(f)                                                                                     \
	if (in.f != re.f)                                                                          \
		fail_msg("%s: " #f " in-process %ld, replayed %ld", where, (long)in.f, (long)re.f);
	FIELDS(CMP)
#undef CMP
	assert_int_equal(rejected, 0);
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		struct tally_group_stats a, b;
		assert_int_equal(tally_alloc_group_stats(g, &a), 0);
		pthread_mutex_lock(&sink_lock);
		tally_replay_group(&replay, g, &b);
		pthread_mutex_unlock(&sink_lock);
		if (memcmp(&a, &b, sizeof(a)))
			fail_msg(
				"%s: group %u counters differ: in-process %lu/%lu replayed %lu/%lu",
				where, g, (unsigned long)a.allocated_bytes,
				(unsigned long)a.deallocated_bytes,
				(unsigned long)b.allocated_bytes,
				(unsigned long)b.deallocated_bytes);
	}
	purge_hold(0);
}

struct tally_stats oracle_stats(void)
{
	return last;
}

int64_t oracle_group_live(uint32_t group)
{
	struct tally_group_stats g;
	assert_int_equal(tally_alloc_group_stats(group, &g), 0);
	return (int64_t)(g.allocated_bytes - g.deallocated_bytes);
}

uint64_t oracle_smaps_resident(void)
{
	FILE *f = fopen("/proc/self/smaps", "r");
	char line[512];
	uint64_t total = 0, rss = 0;
	bool anon = false;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f)) {
		unsigned long lo, hi, kb;
		char path[256] = "";
		if (sscanf(line, "%lx-%lx %*s %*s %*s %*s %255s", &lo, &hi, path) >= 2 &&
		    strchr(line, '-') < strchr(line, ' ')) {
			anon = path[0] == '\0';
			rss = 0;
		} else if (sscanf(line, "Rss: %lu kB", &kb) == 1) {
			rss = kb * 1024;
		} else if (!strncmp(line, "VmFlags:", 8)) {
			if (anon && strstr(line, " nh") && strstr(line, " rr"))
				total += rss;
		}
	}
	fclose(f);
	return total;
}
