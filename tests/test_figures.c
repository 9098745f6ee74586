// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The figures of a tick (user/model/figures.c) from a model and sources filled by
 * hand: what each allocator mode knows, which groups are listed, the GPU
 * source that counts, every reason for "not exact" in its order, how the
 * target ended; then the snapshot document (user/views/snapshot_doc.c), the JSON
 * contract of docs/DESIGN.md §6, field by field and in order.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../user/model/figures.h"
#include "../user/views/snapshot_doc.h"

/* Each test's model and sources: static, they are large. */
static struct model m;
static struct figures_sources src;
static struct figures fig;

static int setup(void **state)
{
	(void)state;
	model_init(&m);
	memset(&src, 0, sizeof(src));
	src.allocator = FIGURES_ALLOC_TALLY;
	src.pid = 42;
	strcpy(src.comm, "app");
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	figures_free(&fig);
	model_free(&m);
	return 0;
}

static const struct figures_process *build(void)
{
	assert_int_equal(figures_build(&fig, &m, &src), 0);
	assert_int_equal(fig.nprocs, 1);
	return &fig.procs[0];
}

/* A balanced identity of 1 MiB mapped: 1000 live, 24 rounding, the rest virgin. */
static void balanced_heap(void)
{
	m.replay.mapped = 1 << 20;
	m.replay.live = 1000;
	m.replay.rounding = 24;
	m.replay.segment_overhead = 4096;
	m.replay.virgin = (1 << 20) - 1000 - 24 - 4096;
	m.replay.spans_assigned = 1;
	m.saw_alloc = true;
}

static bool has_why(const struct figures_process *p, const char *start)
{
	for (unsigned i = 0; i < p->nwhy; i++)
		if (!strncmp(p->why[i], start, strlen(start)))
			return true;
	return false;
}

static void tally_mode__every_term_known__identity_derived(void **state)
{
	(void)state;
	balanced_heap();
	src.have_resident = true;
	src.resident = 8192;
	const struct figures_process *p = build();
	assert_int_equal(p->stats.known, (1u << TALLY_STATS_COUNT) - 1);
	assert_int_equal(p->stats.v[TALLY_STAT_mapped], 1 << 20);
	assert_int_equal(p->stats.v[TALLY_STAT_live], 1000);
	assert_true(p->stats.identity);
	assert_true(p->stats.balanced);
	assert_int_equal(p->stats.accounted, 1 << 20);
	assert_int_equal(p->stats.predicted_resident, (1 << 20) - p->stats.v[TALLY_STAT_virgin]);
	assert_true(p->stats.have_resident);
	assert_int_equal(p->stats.resident, 8192);
	assert_true(p->exact);
	assert_int_equal(p->nwhy, 0);
	assert_string_equal(figures_allocator_name(p->target.allocator), "tally");
}

static void glibc_mode__live_rounding_large_only__groups_from_probes(void **state)
{
	(void)state;
	m.replay.groups[3].alloc_bytes = 999; /* the model's, not glibc's: not shown */
	src.allocator = FIGURES_ALLOC_GLIBC;
	src.have_glibc = true;
	src.glibc.live = 700;
	src.glibc.rounding = 50;
	src.glibc.large_count = 2;
	src.glibc.alloc_bytes[2] = 1000;
	src.glibc.alloc_objs[2] = 10;
	src.glibc.dealloc_bytes[2] = 300;
	src.glibc.dealloc_objs[2] = 4;
	const struct figures_process *p = build();
	assert_int_equal(p->stats.known, 1u << TALLY_STAT_live | 1u << TALLY_STAT_rounding |
						 1u << TALLY_STAT_large_count);
	assert_int_equal(p->stats.v[TALLY_STAT_live], 700);
	assert_int_equal(p->stats.v[TALLY_STAT_mapped], 0);
	assert_false(p->stats.identity);
	assert_false(p->have_inprocess);
	assert_non_null(figures_group_of(p, 2));
	assert_int_equal(figures_group_of(p, 2)->live_bytes, 700);
	assert_int_equal(figures_group_of(p, 2)->alloc_objs, 10);
	assert_null(figures_group_of(p, 3)); /* nothing charged: not listed */
	assert_true(p->exact);		     /* started by tally, nothing untracked or lost */
	src.glibc.untracked = 1;
	p = build();
	assert_false(p->exact);
	assert_true(has_why(p, "glibc mode: not every call was seen"));
	src.glibc.untracked = 0;
	src.late = true; /* blocks from before the attach are not known */
	assert_false(build()->exact);
}

static void no_allocator__nothing_known__nothing_made_up(void **state)
{
	(void)state;
	src.allocator = FIGURES_ALLOC_NONE;
	m.replay.live = 5; /* not the target's allocator: not shown */
	const struct figures_process *p = build();
	assert_int_equal(p->stats.known, 0);
	assert_int_equal(p->stats.v[TALLY_STAT_live], 0);
	assert_false(p->stats.identity);
	assert_true(p->exact);
	assert_string_equal(figures_allocator_name(p->target.allocator), "none");
}

/* --inject: a tick is no cut (only the end is): a free handed over before
 * its allocation takes live below zero, which is said, never shown exact;
 * and an end the interposer did not cut is said too. */
static void inject__live_below_zero_or_no_cut__not_exact(void **state)
{
	(void)state;
	src.allocator = FIGURES_ALLOC_GLIBC;
	src.injected = true;
	src.have_glibc = true;
	src.glibc.live = (uint64_t)-15040;
	src.glibc.rounding = 8;
	const struct figures_process *p = build();
	assert_false(p->exact);
	assert_true(has_why(p, "--inject: records of other threads still on their way"));
	src.glibc.live = 100;
	assert_true(build()->exact);
	src.inject_uncut = true;
	p = build();
	assert_false(p->exact);
	assert_true(has_why(p, "--inject: the interposer did not hand over"));
}

/* A malloc tally cannot trace: named, nothing made up, not exact. */
static void foreign_allocator__named_not_traced(void **state)
{
	(void)state;
	src.allocator = FIGURES_ALLOC_NONE;
	src.foreign_alloc = "jemalloc";
	const struct figures_process *p = build();
	assert_int_equal(p->stats.known, 0);
	assert_false(p->exact);
	assert_true(has_why(p, "its malloc is not tally's or glibc's"));
	assert_string_equal(figures_target_allocator(&p->target), "jemalloc");
}

static void groups__shown_when_named_or_charged(void **state)
{
	(void)state;
	strcpy(m.groups[1].name, "ingest");
	m.groups[1].known = true;
	src.cpu_ns[4] = 7;		     /* CPU only */
	m.replay.groups[5].dealloc_objs = 1; /* a free only */
	src.cuda.os_yields[6] = 2;	     /* sched_yield calls only */
	const struct figures_process *p = build();
	static const uint32_t want[] = { 0, 1, 4, 5, 6 }; /* listed in id order */
	assert_int_equal(p->ngroups, 5);
	for (unsigned i = 0; i < 5; i++) {
		assert_true(p->groups[i].shown);
		assert_int_equal(p->groups[i].id, want[i]);
	}
	assert_string_equal(figures_group_of(p, 1)->name, "ingest");
	assert_null(figures_group_of(p, 4)->name);
	assert_int_equal(figures_group_of(p, 4)->cpu_ns, 7);
	assert_int_equal(figures_group_of(p, 6)->instance.os_yields, 2);
	assert_null(figures_group_of(p, 2));
}

static void instance__process_is_the_sum_of_groups(void **state)
{
	(void)state;
	m.groups[1].yields = 3;
	m.groups[2].yields = 4;
	m.groups[2].rejects = 1;
	m.gpu.seen[GPU_SRC_DRIVER] = true;
	m.gpu.groups[GPU_SRC_DRIVER][1].kernels_launched = 10;
	m.gpu.groups[GPU_SRC_DRIVER][2].kernels_launched = 5;
	m.gpu.groups[GPU_SRC_DRIVER][2].failed_launches = 2;
	m.gpu.groups[GPU_SRC_DRIVER][2].device_bytes = -64; /* freed what it did not see */
	const struct figures_process *p = build();
	assert_int_equal(p->instance.yield_count, 7);
	assert_int_equal(p->instance.kernels_launched, 15);
	/* a refused launch is back pressure too */
	assert_int_equal(figures_group_of(p, 2)->instance.back_pressure_rejections, 3);
	assert_int_equal(p->instance.back_pressure_rejections, 3);
	assert_int_equal(p->instance.device_bytes_allocated, -64);
	assert_true(p->gpu_spoke);
	assert_int_equal(p->target.cuda, FIGURES_CUDA_DRIVER);
	/* the table the views walk reads the same figures */
	assert_int_equal(figures_instance_get(&p->instance, FIGURES_IN_kernels_launched), 15);
	assert_int_equal(
		(int64_t)figures_instance_get(&p->instance, FIGURES_IN_device_bytes_allocated),
		-64);
	assert_true(figures_instance_fields[FIGURES_IN_device_bytes_allocated].is_signed);
	assert_false(figures_instance_fields[FIGURES_IN_yield_count].is_signed);
}

static void cuda__cupti_counts_over_the_driver(void **state)
{
	(void)state;
	assert_int_equal(build()->target.cuda, FIGURES_CUDA_NONE);
	assert_false(build()->gpu_attached);
	src.cuda.entry_points = 40; /* probed, silent */
	assert_int_equal(build()->target.cuda, FIGURES_CUDA_DRIVER);
	assert_true(build()->gpu_attached);
	assert_false(build()->gpu_spoke);
	m.gpu.seen[GPU_SRC_DRIVER] = m.gpu.seen[GPU_SRC_CUPTI] = true;
	m.gpu.groups[GPU_SRC_DRIVER][0].kernels_launched = 9;
	m.gpu.groups[GPU_SRC_CUPTI][0].kernels_launched = 4;
	const struct figures_process *p = build();
	assert_int_equal(p->target.cuda, FIGURES_CUDA_CUPTI);
	assert_string_equal(figures_cuda_name(p->target.cuda), "cupti");
	assert_int_equal(p->instance.kernels_launched, 4);
}

static void why__every_reason_in_order(void **state)
{
	(void)state;
	balanced_heap();
	m.replay.live += 1; /* unbalanced */
	src.lost_msgs = 1;
	m.malformed = 1;
	src.deferred_dropped = 1;
	src.late = true;
	src.late_consistent = false;
	src.have_final_inprocess = true;
	src.final_consistent = false;
	m.collided_id = 200;
	src.cut_torn = true;
	m.registry_threads_dropped = 3;
	const struct figures_process *p = build();
	const char *want[] = {
		"events lost",
		"malformed records",
		"records that came while the state was read at attach",
		"the allocator's state moved while it was read at attach",
		"the allocator's state moved while it was read at the end",
		"an SDK group got the id",
		"a thread's records from before this moment",
		"the identity does not balance",
		"more threads in groups than the SDK's registry holds",
	};
	assert_int_equal(p->nwhy, sizeof(want) / sizeof(want[0]));
	for (unsigned i = 0; i < p->nwhy; i++)
		assert_true(!strncmp(p->why[i], want[i], strlen(want[i])));
	/* the limits they name are the constants' */
	assert_string_equal(p->why[2], "records that came while the state was read at attach were "
				       "more than tally keeps aside (64 MiB): some dropped");
	assert_string_equal(p->why[8],
			    "more threads in groups than the SDK's registry holds (4096) "
			    "at attach: some threads' groups unknown, their CPU charged "
			    "to root");
	assert_false(p->exact);
}

static void why__end_of_a_running_or_exited_target(void **state)
{
	(void)state;
	balanced_heap();
	/* read at the end while running, consistent, equal: exact */
	src.have_final_inprocess = true;
	src.final_consistent = true;
	model_stats(&m, &src.final_inprocess);
	const struct figures_process *p = build();
	assert_true(p->exact);
	assert_true(p->have_inprocess);
	assert_int_equal(p->inprocess[TALLY_STAT_live], 1000);
	src.final_inprocess.live++;
	assert_true(has_why(build(), "the target was running"));
	/* gone without the exit hand-over, then with one while threads held records */
	src.have_final_inprocess = false;
	src.gone = true;
	assert_true(has_why(build(), "ended without the allocator's exit hand-over"));
	m.have_inprocess = true;
	m.inprocess_threads_held = true;
	m.inprocess[TALLY_STAT_live] = 1000;
	p = build();
	assert_false(has_why(p, "ended without"));
	assert_true(has_why(p, "exit() while other threads held records"));
	assert_true(p->have_inprocess);
	/* a whole exit hand-over: exact when the figures are the allocator's
	 * own, field for field; else said, though nothing else is wrong */
	m.inprocess_threads_held = false;
	struct tally_stats own;
	model_stats(&m, &own);
	tally_stats_to_array(&own, m.inprocess);
	assert_true(build()->exact);
	m.inprocess[TALLY_STAT_rounding]++;
	p = build();
	assert_false(p->exact);
	assert_true(has_why(p, "tally's figures and the allocator's own at its exit differ"));
	assert_int_equal(p->nwhy, 1);
}

static void target__exit_code_or_signal(void **state)
{
	(void)state;
	const struct figures_process *p = build();
	assert_int_equal(p->target.exit_code, -1);
	assert_int_equal(p->target.signal, 0);
	src.gone = src.have_exit = true;
	src.exit_status = 7 << 8;
	p = build();
	assert_int_equal(p->target.exit_code, 7);
	assert_int_equal(p->target.signal, 0);
	src.exit_status = 9; /* killed by SIGKILL */
	p = build();
	assert_int_equal(p->target.exit_code, -1);
	assert_int_equal(p->target.signal, 9);
	src.late = true;
	p = build();
	assert_true(p->target.read_known);
	src.allocator = FIGURES_ALLOC_GLIBC;
	assert_false(build()->target.read_known);
}

static void threads__alive_only_by_tid(void **state)
{
	(void)state;
	struct model_thread *t;
	t = model_thread(&m, 30, true);
	t->alive = true;
	strcpy(t->comm, "c");
	t = model_thread(&m, 10, true);
	t->alive = true;
	t->group = 2;
	t = model_thread(&m, 20, true);
	t->alive = false;
	const struct figures_process *p = build();
	assert_int_equal(p->nthreads, 2);
	assert_int_equal(p->threads[0].tid, 10);
	assert_int_equal(p->threads[0].group, 2);
	assert_int_equal(p->threads[1].tid, 30);
	assert_string_equal(p->threads[1].comm, "c");
}

/* The heap profile the next document carries (NULL: none sampled). */
static const struct prof *doc_sites;

/* The document, compact, of the figures now. */
static char *document(void)
{
	struct json_writer w;
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	build();
	json_init(&w, out, false);
	snapshot_write(&w, &fig, doc_sites);
	assert_int_equal(json_finish(&w), 0);
	fclose(out);
	assert_true(len > 0 && buf[len - 1] == '\n'); /* one document, one line */
	buf[len - 1] = 0;
	return buf;
}

#define ZERO_INSTANCE                                                                              \
	"\"kernels_launched\":0,\"bytes_pinned\":0,\"back_pressure_rejections\":0,"                \
	"\"yield_count\":0,\"device_bytes_allocated\":0,\"graph_launches\":0,"                     \
	"\"failed_launches\":0,\"host_pinned_bytes\":0,\"os_yields\":0"

/* The document of one process: its fields at the top, again as the one
 * entry of "processes", and the tree's sums (zero: it has ended). */
/* fields: the process's; tree: its tree's exactness (from "exact") and
 * lifetime, between which comes what is alive at the end (nothing: the
 * documents below are of an ended process). */
static char *one_process_doc(const char *fields, const char *exact, const char *lifetime)
{
	char *doc;

	assert_true(asprintf(&doc,
			     "{%s,\"sampling\":{\"rate\":0},\"sites\":[],\"processes\":[{%s}],"
			     "\"tree\":{\"processes\":1,\"alive\":0,\"not_listed\":0,%s,"
			     "\"alive_at_end\":{\"processes\":0,\"live\":0,\"mapped\":0,"
			     "\"cpu_ns\":0,\"instance\":{" ZERO_INSTANCE ",\"exact\":true}},"
			     "\"lifetime\":{\"processes\":1,%s},\"peak\":null}}",
			     fields, fields, exact, lifetime) > 0);
	return doc;
}

/* The document is what was wanted (both freed); else where they part, and a
 * failure. */
static void assert_doc(char *doc, char *want)
{
	size_t i = 0;

	while (doc[i] && doc[i] == want[i])
		i++;
	if (doc[i] || want[i])
		print_error("documents part at byte %zu:\n got: %.80s\nwant: %.80s\n", i, doc + i,
			    want + i);
	bool same = !doc[i] && !want[i];
	free(doc);
	free(want);
	assert_true(same);
}

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
static void document__tally_mode__every_field_in_order(void **state)
{
	(void)state;
	balanced_heap();
	strcpy(m.groups[1].name, "io \"q\"");
	m.groups[1].known = true;
	m.replay.groups[1].alloc_bytes = 1000;
	m.replay.groups[1].alloc_objs = 2;
	m.groups[1].yields = 1;
	src.cpu_ns[1] = 5;
	m.received = 12;
	m.records = 30;
	src.lost_outside_read = 4;
	src.in_place = 3;
	src.gone = src.have_exit = true;
	/* the allocator's own at its exit: tally's figures (else the
	 * figures say exit_figures_differ) */
	m.have_inprocess = true;
	struct tally_stats own;
	model_stats(&m, &own);
	tally_stats_to_array(&own, m.inprocess);
	/* in a container: its PID namespace, cgroup and id */
	src.ns_pid = 7;
	src.ppid = 1;
	strcpy(src.cgroup, "/system.slice/docker-" ID64 ".scope");
	strcpy(src.container, ID64);
	strcpy(src.cmdline, "app --serve \\x09 \"q\"");
	/* its peak: before 500 of the group's bytes were freed (the lazy
	 * group figure taken at that change) */
	m.replay.peak = (struct tally_replay_mark){ .mapped = 1 << 20, .live = 1500, .seq = 3 };
	m.replay.groups[1].peak_live = 1500;
	m.replay.groups[1].changed = 4;
	m.peak = (struct model_peak){ .at_ns = 2500000000, .from_ns = 2000000000, .heap = 1 };
	m.replay.peak_mapped = m.replay.peak;
	m.peak_mapped = m.peak;
	char *doc = document();
	const char *want =
		"\"target\":{\"pid\":42,\"ns_pid\":7,\"ppid\":1,\"comm\":\"app\","
		"\"cmdline\":\"app --serve \\\\x09 \\\"q\\\"\","
		"\"allocator\":\"tally\",\"cuda\":\"none\",\"attach\":\"start\",\"exit_code\":0,"
		"\"signal\":null,\"cgroup\":\"/system.slice/docker-" ID64 ".scope\","
		"\"container\":\"" ID64 "\",\"oom_kill\":false,\"oom\":null,"
		"\"born_s\":null,\"lifetime_s\":null},"
		"\"exact\":true,"
		"\"events\":{\"received\":12,\"lost\":0,\"lost_record_words\":0,"
		"\"lost_outside_read\":4,\"malformed\":0,\"records\":30,\"batches_in_place\":3},"
		"\"stats\":{\"mapped\":1048576,\"live\":1000,\"rounding\":24,\"cache\":0,"
		"\"span_free\":0,\"returned\":0,\"virgin\":1043456,\"hysteresis\":0,"
		"\"segment_overhead\":4096,\"large_count\":0,\"spans_assigned\":1,"
		"\"accounted\":1048576,\"balanced\":true,\"predicted_resident\":5120,"
		"\"measured_resident\":null},"
		"\"stats_inprocess\":{\"mapped\":1048576,\"live\":1000,\"rounding\":24,\"cache\":0,"
		"\"span_free\":0,\"returned\":0,\"virgin\":1043456,\"hysteresis\":0,"
		"\"segment_overhead\":4096,\"large_count\":0,\"spans_assigned\":1},"
		"\"instance\":{\"kernels_launched\":0,\"bytes_pinned\":0,"
		"\"back_pressure_rejections\":0,\"yield_count\":1,\"device_bytes_allocated\":0,"
		"\"graph_launches\":0,\"failed_launches\":0,\"host_pinned_bytes\":0,"
		"\"os_yields\":0,\"scheduler\":true,\"exact\":true},"
		"\"groups\":[{\"id\":0,\"name\":\"root\",\"allocated_bytes\":0,\"allocated_objects\":0,"
		"\"deallocated_bytes\":0,\"deallocated_objects\":0,\"live_bytes\":0,\"peak_live\":0,"
		"\"cpu_ns\":0,"
		"\"instance\":{" ZERO_INSTANCE ",\"exact\":true}},"
		"{\"id\":1,\"name\":\"io \\\"q\\\"\",\"allocated_bytes\":1000,"
		"\"allocated_objects\":2,\"deallocated_bytes\":0,\"deallocated_objects\":0,"
		"\"live_bytes\":1000,\"peak_live\":1500,\"cpu_ns\":5,\"instance\":{\"kernels_launched\":0,"
		"\"bytes_pinned\":0,\"back_pressure_rejections\":0,\"yield_count\":1,"
		"\"device_bytes_allocated\":0,\"graph_launches\":0,\"failed_launches\":0,"
		"\"host_pinned_bytes\":0,\"os_yields\":0,\"exact\":true}}],"
		"\"peak\":{\"at_s\":2.5,\"after_s\":2,\"exact\":true,\"since\":\"start\","
		"\"live\":1500,\"mapped\":1048576,\"stats\":{\"mapped\":1048576,\"live\":1500,"
		"\"rounding\":0,\"cache\":0,\"span_free\":0,\"returned\":0,\"virgin\":0,"
		"\"hysteresis\":0,\"segment_overhead\":0,\"large_count\":0,\"spans_assigned\":0},"
		"\"groups\":[{\"name\":\"root\",\"live\":0},{\"name\":\"io \\\"q\\\"\",\"live\":1500}],"
		"\"sites\":[]},"
		"\"peak_mapped\":{\"at_s\":2.5,\"after_s\":2,\"exact\":true,\"since\":\"start\","
		"\"live\":1500,\"mapped\":1048576},"
		"\"leaked\":[],\"temporary\":[],\"lifetimes\":[{\"group\":\"root\","
		"\"lt_1ms\":0,\"lt_10ms\":0,\"lt_100ms\":0,\"lt_1s\":0,\"lt_10s\":0,\"longer\":0,\"live\":0},"
		"{\"group\":\"io \\\"q\\\"\","
		"\"lt_1ms\":0,\"lt_10ms\":0,\"lt_100ms\":0,\"lt_1s\":0,\"lt_10s\":0,\"longer\":0,\"live\":0}"
		"]";
	/* over its life: CPU and allocations, though it has ended */
	assert_doc(doc,
		   one_process_doc(
			   want, "\"exact\":true,\"inexact_processes\":0,\"inexact\":[]",
			   "\"cpu_ns\":5,\"allocated_bytes\":1000,\"allocated_objects\":2,"
			   "\"deallocated_bytes\":0,\"deallocated_objects\":0,"
			   "\"kernels_launched\":0,\"graph_launches\":0,\"events_received\":12,"
			   "\"records\":30,\"batches_in_place\":3"));
}

static void document__glibc_late_killed__nulls_and_reasons(void **state)
{
	(void)state;
	src.allocator = FIGURES_ALLOC_GLIBC;
	src.have_glibc = true;
	src.glibc.live = 7;
	src.late = true;
	src.gone = src.have_exit = true;
	src.exit_status = 9;
	char *doc = document();
	const char *want =
		"\"target\":{\"pid\":42,\"ns_pid\":42,\"ppid\":0,\"comm\":\"app\","
		"\"cmdline\":null,\"allocator\":\"glibc\",\"cuda\":\"none\",\"attach\":\"running\","
		"\"exit_code\":null,\"signal\":\"SIGKILL\",\"cgroup\":null,\"container\":null,"
		"\"oom_kill\":false,\"oom\":null,\"born_s\":null,\"lifetime_s\":null},"
		"\"exact\":false,\"inexact_why\":[\"glibc mode: not every call was seen\"],"
		"\"inexact_codes\":[\"glibc_calls_not_seen\"],"
		"\"events\":{\"received\":0,\"lost\":0,\"lost_record_words\":0,"
		"\"lost_outside_read\":0,\"malformed\":0,\"records\":0,\"batches_in_place\":0},"
		"\"stats\":{\"mapped\":null,\"live\":7,\"rounding\":0,\"cache\":null,"
		"\"span_free\":null,\"returned\":null,\"virgin\":null,\"hysteresis\":null,"
		"\"segment_overhead\":null,\"large_count\":0,\"spans_assigned\":null,"
		"\"accounted\":null,\"balanced\":null,\"predicted_resident\":null,"
		"\"measured_resident\":null},"
		"\"stats_inprocess\":null,"
		"\"instance\":{" ZERO_INSTANCE ",\"scheduler\":false,\"exact\":true},"
		"\"groups\":[{\"id\":0,\"name\":\"root\",\"allocated_bytes\":0,\"allocated_objects\":0,"
		"\"deallocated_bytes\":0,\"deallocated_objects\":0,\"live_bytes\":0,"
		"\"peak_live\":null,\"cpu_ns\":0,"
		"\"instance\":{" ZERO_INSTANCE ",\"exact\":true}}],"
		"\"peak\":null,\"peak_mapped\":null,"
		"\"leaked\":[],\"temporary\":[],\"lifetimes\":[{\"group\":\"root\","
		"\"lt_1ms\":0,\"lt_10ms\":0,\"lt_100ms\":0,\"lt_1s\":0,\"lt_10s\":0,\"longer\":0,\"live\":0}"
		"]";
	assert_doc(doc,
		   one_process_doc(want,
				   "\"exact\":false,\"inexact_processes\":1,\"inexact\":"
				   "[{\"pid\":42,\"comm\":\"app\",\"inexact_codes\":"
				   "[\"glibc_calls_not_seen\"]}]",
				   "\"cpu_ns\":0,\"allocated_bytes\":0,\"allocated_objects\":0,"
				   "\"deallocated_bytes\":0,\"deallocated_objects\":0,"
				   "\"kernels_launched\":0,\"graph_launches\":0,"
				   "\"events_received\":0,\"records\":0,\"batches_in_place\":0"));
}

static void document__late_tally__says_whether_the_read_was_consistent(void **state)
{
	(void)state;
	balanced_heap();
	src.late = true;
	src.late_consistent = true;
	char *doc = document();
	assert_non_null(strstr(doc, "\"attach\":\"running\",\"state_read_consistent\":true,"));
	free(doc);
	src.late_consistent = false;
	doc = document();
	assert_non_null(strstr(doc, "\"state_read_consistent\":false,"));
	assert_non_null(strstr(doc, "\"inexact_why\":[\"the allocator's state moved"));
	free(doc);
}

/* "sites": the largest SNAPSHOT_SITES with in-use bytes, in the order given
 * (largest first), each frame a line (inlined ones too, innermost first),
 * unknown parts null, and the sampling rate. */
static void document__sites__frames_lines_and_the_largest_only(void **state)
{
	static const struct prof_line inl[2] = { { "inner", "a.c", 7 }, { "outer", "a.c", 30 } };
	static const struct prof_mapping maps[1] = { { 0x1000, 0x9000, 0, "/bin/app", "ab", true,
						       true, true } };
	const struct prof_loc locs[2] = { { 0x1100, 0, inl, 2 }, { 0x2200, -1, NULL, 0 } };
	static const size_t ix[2] = { 0, 1 };
	struct prof_sample smp[SNAPSHOT_SITES + 2];
	for (int i = 0; i < SNAPSHOT_SITES + 2; i++)
		smp[i] = (struct prof_sample){ ix,   2,	 3, 300,     2,	    SNAPSHOT_SITES + 2 - i,
					       "io", 42, 1, 100 + i, { 0 }, 0,
					       0 };
	smp[SNAPSHOT_SITES + 1].inuse_space = 0;
	struct prof p = {
		maps, 1, locs, 2, smp, SNAPSHOT_SITES + 2, 65536, 0, 0, NULL, NULL, NULL
	};

	(void)state;
	balanced_heap();
	src.gone = src.have_exit = true; /* ended: "leaked" */
	doc_sites = &p;
	char *doc = document();
	doc_sites = NULL;
	assert_non_null(strstr(
		doc,
		"\"sampling\":{\"rate\":65536},\"sites\":[{\"frames\":[{\"function\":\"inner\","
		"\"file\":\"a.c\",\"line\":7,\"module\":\"/bin/app\",\"address\":4352},"
		"{\"function\":\"outer\",\"file\":\"a.c\",\"line\":30,\"module\":\"/bin/app\","
		"\"address\":4352},{\"function\":null,\"file\":null,\"line\":null,"
		"\"module\":null,\"address\":8704}],\"group\":\"io\",\"pid\":42,"
		"\"inuse_bytes\":22,\"inuse_objects\":2,\"alloc_bytes\":300,\"alloc_objects\":3,"
		"\"peak_bytes\":100,\"peak_objects\":1,\"lifetimes\":{\"lt_1ms\":0,\"lt_10ms\":0,"
		"\"lt_100ms\":0,\"lt_1s\":0,\"lt_10s\":0,\"longer\":0,\"live\":2}}"));
	/* the peak's sites: most at the peak first, one in use at the end or not */
	assert_non_null(strstr(doc, "\"address\":8704}],\"group\":\"io\",\"pid\":42,"
				    "\"peak_bytes\":121,\"peak_objects\":1,\"inuse_bytes\":0,"
				    "\"inuse_objects\":2,\"alloc_bytes\":300,\"alloc_objects\":3},"
				    "{\"frames\""));
	/* it has ended: its sites in use at the end are its leaks, most first */
	assert_non_null(strstr(doc, "\"address\":8704}],\"group\":\"io\",\"pid\":42,"
				    "\"inuse_bytes\":22,\"inuse_objects\":2,\"alloc_bytes\":300,"
				    "\"alloc_objects\":3},{\"frames\""));
	/* twenty of the twenty-two in "sites" (the answers' lists are the
	 * process's own): the smallest (3 bytes) is not there */
	int n = 0;
	const char *sites = strstr(doc, "\"sampling\":"), *end = strstr(doc, "\"processes\":[");
	assert_non_null(sites);
	assert_non_null(end);
	for (const char *at = sites; (at = strstr(at, "\"inuse_bytes\":")) && at < end; at++)
		n++;
	assert_int_equal(n, SNAPSHOT_SITES);
	const char *small = strstr(sites, "\"inuse_bytes\":2,");
	assert_true(!small || small > end);
	free(doc);
}

/* The OOM killer chose it: TALLY_MSG_OOM through the model, its cgroups'
 * paths as the session fills them; exact when every heap was read at the
 * choice (no exit hand-over needed), flagged as any SIGKILL when not. */
static void document__oom_killed__what_it_saw_exact_when_every_heap_read(void **state)
{
	(void)state;
	struct tally_msg_oom o = {
		.hdr = { .kind = TALLY_MSG_OOM,
			 .flags = TALLY_OOM_SHARES_MM | TALLY_OOM_HEAPS_READ | TALLY_OOM_HEAPS_ALL,
			 .tid = 42,
			 .pid = 42 },
		.cgroup_id = 7,
		.limit_cgroup_id = 7,
		.limit = 96 << 20,
		.usage = 96 << 20,
		.total_vm_kb = 3,
		.anon_rss_kb = 2,
		.file_rss_kb = 1,
		.pgtables_kb = 4,
		.oom_score_adj = -5,
		.heaps = 2,
		.v1 = 1,
		.comm = "app",
	};
	balanced_heap();
	assert_int_equal(model_apply(&m, &o, sizeof(o)), 0);
	strcpy(m.oom.cgroup, "/t");
	strcpy(m.oom.limit_cgroup, "/t");
	src.gone = src.have_exit = true;
	src.exit_status = 9;
	const struct figures_process *p = build();
	assert_true(p->exact);
	assert_false(has_why(p, "ended without"));
	char *doc = document();
	assert_non_null(strstr(
		doc,
		"\"signal\":\"SIGKILL\",\"cgroup\":null,\"container\":null,\"oom_kill\":true,"
		"\"oom\":{\"cgroup\":\"/t\",\"cgroup_version\":1,\"limit\":100663296,\"limit_file\":\"memory.limit_in_bytes\","
		"\"limit_cgroup\":\"/t\",\"usage\":100663296,\"total_vm\":3072,"
		"\"anon_rss\":2048,\"file_rss\":1024,\"shmem_rss\":0,\"pgtables\":4096,"
		"\"oom_score_adj\":-5,\"uid\":0,\"killer_in_victim\":true,\"read_at_exit\":false,\"heaps_read\":2,"
		"\"held_records_read\":true},\"born_s\""));
	free(doc);
	/* a heap not read (or torn): what its threads held may be missing */
	m.oom.msg.hdr.flags &= (__u16)~TALLY_OOM_HEAPS_ALL;
	assert_true(has_why(build(), "ended without the allocator's exit hand-over"));
	/* no limit on its path (the global killer): nulls, not a number */
	m.oom.msg.limit = TALLY_OOM_NO_LIMIT;
	doc = document();
	assert_non_null(strstr(
		doc, "\"limit\":null,\"limit_file\":null,\"limit_cgroup\":null,\"usage\":null,"));
	assert_non_null(strstr(doc, "\"held_records_read\":false}"));
	free(doc);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(tally_mode__every_term_known__identity_derived),
		T(glibc_mode__live_rounding_large_only__groups_from_probes),
		T(no_allocator__nothing_known__nothing_made_up),
		T(inject__live_below_zero_or_no_cut__not_exact),
		T(foreign_allocator__named_not_traced),
		T(groups__shown_when_named_or_charged),
		T(instance__process_is_the_sum_of_groups),
		T(cuda__cupti_counts_over_the_driver),
		T(why__every_reason_in_order),
		T(why__end_of_a_running_or_exited_target),
		T(target__exit_code_or_signal),
		T(threads__alive_only_by_tid),
		T(document__tally_mode__every_field_in_order),
		T(document__glibc_late_killed__nulls_and_reasons),
		T(document__late_tally__says_whether_the_read_was_consistent),
		T(document__sites__frames_lines_and_the_largest_only),
		T(document__oom_killed__what_it_saw_exact_when_every_heap_read),
#undef T
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
