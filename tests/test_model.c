// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The model (user/model/model.c) on synthetic message sequences: batches of several
 * threads out of order, foreign frees, thread exit, nested groups, frees
 * from another group, late-attach cut-offs, --group rules, malformed input.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../user/model/figures.h"
#include "../user/model/model.h"

static struct tally_msg_batch *batch(uint64_t heap, uint64_t seq, uint32_t tid,
				     const struct tally_ev *recs, uint32_t n, size_t *len)
{
	struct tally_msg_batch *m = calloc(1, sizeof(*m));
	m->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, tid, 1, 0, 0 };
	m->batch.magic = TALLY_BATCH_MAGIC;
	m->batch.version = TALLY_BATCH_VERSION;
	m->batch.source = TALLY_SRC_ALLOC;
	m->batch.tid = tid;
	for (uint32_t i = 0; i < n; i++)
		tally_ev_put(m->batch.words, &m->batch.count, &recs[i]);
	m->batch.heap_id = heap;
	m->batch.seq_first = seq;
	m->bytes = (uint32_t)(offsetof(struct tally_batch, words) + m->batch.count * 8);
	*len = sizeof(*m);
	return m;
}

static void apply_batch(struct model *m, uint64_t heap, uint64_t seq, uint32_t tid,
			const struct tally_ev *recs, uint32_t n)
{
	size_t len;
	struct tally_msg_batch *b = batch(heap, seq, tid, recs, n, &len);
	assert_int_equal(model_apply(m, b, len), 0);
	free(b);
}

static void group_msg(struct model *m, uint16_t kind, uint32_t tid, uint32_t g, uint32_t other,
		      const char *name)
{
	struct tally_msg_group msg = { .hdr = { kind, 0, tid, 2 }, .group = g, .other = other };
	if (name)
		strncpy(msg.name, name, sizeof(msg.name) - 1);
	assert_int_equal(model_apply(m, &msg, sizeof(msg)), 0);
}

#define SEG(len, hdr)                                                                              \
	{                                                                                          \
		TALLY_EV_SEG_MAP, 0, 0, hdr, len                                                   \
	}
#define BUMP(b)                                                                                    \
	{                                                                                          \
		TALLY_EV_BUMP, TALLY_TERM_VIRGIN, 0, 0, b                                          \
	}
#define ALLOC(g, q, s)                                                                             \
	{                                                                                          \
		TALLY_EV_ALLOC, 0, g, q, s                                                         \
	}
#define FREE(g, q, s)                                                                              \
	{                                                                                          \
		TALLY_EV_FREE, 0, g, q, s                                                          \
	}
#define XFREE(g, q, s)                                                                             \
	{                                                                                          \
		TALLY_EV_FREE_FOREIGN, 0, g, q, s                                                  \
	}
#define DRAIN(s)                                                                                   \
	{                                                                                          \
		TALLY_EV_DRAIN, 0, 0, 0, s                                                         \
	}

static int64_t group_live(const struct model *m, uint32_t g)
{
	return m->replay.groups[g].alloc_bytes - m->replay.groups[g].dealloc_bytes;
}

static void check_balanced(const struct model *m)
{
	struct tally_stats s;
	model_stats(m, &s);
	assert_true(tally_stats_balanced(&s));
}

static void model__batches_out_of_order__same_figures(void **state)
{
	(void)state;
	struct model m;
	struct tally_ev a[] = { SEG(4 << 20, 65536), BUMP(4096), ALLOC(1, 100, 112) };
	struct tally_ev b[] = { SEG(4 << 20, 65536), BUMP(4096), ALLOC(2, 30, 32),
				FREE(2, 30, 32) };
	struct tally_ev a2[] = { FREE(1, 100, 112), ALLOC(1, 7, 16) };

	model_init(&m);
	/* thread 11's second batch first, then thread 12's, then 11's first */
	apply_batch(&m, 1, 5, 11, a2, 2);
	apply_batch(&m, 2, 0, 12, b, 4);
	apply_batch(&m, 1, 0, 11, a, 3);
	check_balanced(&m);
	assert_int_equal(group_live(&m, 1), 7);
	assert_int_equal(group_live(&m, 2), 0);
	assert_int_equal(m.records, 9);
	assert_int_equal(m.malformed, 0);
	model_free(&m);
}

static void model__foreign_free__charged_to_the_allocating_group(void **state)
{
	(void)state;
	struct model m;
	struct tally_ev owner[] = { SEG(4 << 20, 65536), BUMP(4096), ALLOC(3, 60, 64) };
	/* thread 22, in group 4, frees group 3's block: the record carries 3 */
	struct tally_ev other[] = { XFREE(3, 60, 64) };
	struct tally_ev drain[] = { DRAIN(64) };
	struct tally_stats s;

	model_init(&m);
	group_msg(&m, TALLY_MSG_GROUP_ENTER, 22, 4, 0, NULL);
	apply_batch(&m, 1, 0, 21, owner, 3);
	apply_batch(&m, 2, 0, 22, other, 1);
	model_stats(&m, &s);
	assert_int_equal(s.cache, 64);
	assert_int_equal(group_live(&m, 3), 0);
	assert_int_equal(m.replay.groups[4].dealloc_objs, 0);
	apply_batch(&m, 1, 5, 21, drain, 1);
	model_stats(&m, &s);
	assert_int_equal(s.cache, 0);
	check_balanced(&m);
	model_free(&m);
}

static void model__nested_groups__thread_follows_enter_and_exit(void **state)
{
	(void)state;
	struct model m;

	model_init(&m);
	group_msg(&m, TALLY_MSG_GROUP_REGISTER, 5, 1, 0, "outer");
	group_msg(&m, TALLY_MSG_GROUP_REGISTER, 5, 2, 0, "inner");
	group_msg(&m, TALLY_MSG_GROUP_ENTER, 5, 1, 0, NULL);
	group_msg(&m, TALLY_MSG_GROUP_ENTER, 5, 2, 1, NULL);
	assert_int_equal(model_thread(&m, 5, false)->group, 2);
	group_msg(&m, TALLY_MSG_GROUP_EXIT, 5, 1, 2, NULL);
	assert_int_equal(model_thread(&m, 5, false)->group, 1);
	group_msg(&m, TALLY_MSG_GROUP_EXIT, 5, 0, 1, NULL);
	assert_int_equal(model_thread(&m, 5, false)->group, 0);
	assert_string_equal(m.groups[2].name, "inner");
	group_msg(&m, TALLY_MSG_YIELD, 5, 2, 0, NULL);
	group_msg(&m, TALLY_MSG_REJECT, 5, 1, 0, NULL);
	assert_int_equal(m.groups[2].yields, 1);
	assert_int_equal(m.groups[1].rejects, 1);
	model_free(&m);
}

static void model__thread_exit__marks_thread_and_process(void **state)
{
	(void)state;
	struct model m;
	struct tally_msg_thread t = { .hdr = { TALLY_MSG_THREAD_NEW, 0, 9, 3 }, .pid = 8 };

	model_init(&m);
	strcpy(t.comm, "worker");
	assert_int_equal(model_apply(&m, &t, sizeof(t)), 0);
	assert_true(model_thread(&m, 9, false)->alive);
	t.hdr.kind = TALLY_MSG_THREAD_EXIT;
	assert_int_equal(model_apply(&m, &t, sizeof(t)), 0);
	assert_false(model_thread(&m, 9, false)->alive);
	assert_false(m.exited);
	t.hdr.flags = TALLY_THREAD_GROUP_DEAD;
	assert_int_equal(model_apply(&m, &t, sizeof(t)), 0);
	assert_true(m.exited);
	model_free(&m);
}

static void model__late_attach_cutoff__applies_only_newer_records(void **state)
{
	(void)state;
	struct model m;
	struct remote_alloc ra = { 0 };
	struct remote_heap h = { .id = 7, .pos = 4 }; /* words: two two-word records */
	/* the state read had the segment and the first allocation */
	struct tally_ev recs[] = { SEG(4 << 20, 65536), BUMP(4096), ALLOC(1, 10, 16) };

	model_init(&m);
	ra.stats = (struct tally_stats){ .mapped = 4 << 20,
					 .segment_overhead = 65536,
					 .virgin = (4 << 20) - 65536 - 4096,
					 .span_free = 4096 };
	ra.nheaps = 1;
	ra.heaps = &h;
	model_seed_alloc(&m, &ra);
	apply_batch(&m, 7, 0, 1, recs, 3); /* records 0, 1 skipped; 2 applied */
	assert_int_equal(m.skipped, 2);
	assert_int_equal(group_live(&m, 1), 10);
	check_balanced(&m);
	/* pending records read from memory, then handed over in their batch */
	__u64 more[2];
	uint32_t nmore = 0;
	struct tally_ev a = ALLOC(1, 5, 16), f = FREE(1, 10, 16);
	tally_ev_put(more, &nmore, &a);
	tally_ev_put(more, &nmore, &f);
	model_apply_pending(&m, 7, 5, 1, more, nmore);
	assert_int_equal(group_live(&m, 1), 5);
	struct tally_ev recs2[] = { ALLOC(1, 5, 16), FREE(1, 10, 16) };
	apply_batch(&m, 7, 5, 1, recs2, 2);
	assert_int_equal(group_live(&m, 1), 5);
	check_balanced(&m);
	model_free(&m);
}

/* Rules take ids from 255 down, the SDK from 1 up: when they meet, the rule's
 * group keeps its name and the collision is recorded (the snapshot then says
 * it is not exact), rather than the rule's group silently renamed. */
static void model__group_rule__sdk_group_on_its_id_is_flagged(void **state)
{
	struct model m;

	(void)state;
	model_init(&m);
	assert_int_equal(model_add_rule(&m, "W=worker"), 0);
	assert_true(m.groups[TALLY_MAX_GROUPS - 1].rule);
	group_msg(&m, TALLY_MSG_GROUP_REGISTER, 5, 7, 0, "sdk6");
	assert_int_equal(m.collided_id, 0);
	group_msg(&m, TALLY_MSG_GROUP_REGISTER, 5, TALLY_MAX_GROUPS - 1, 0, "sdk254");
	assert_int_equal(m.collided_id, TALLY_MAX_GROUPS - 1);
	assert_string_equal(m.groups[TALLY_MAX_GROUPS - 1].name, "W");
	assert_string_equal(m.collided_sdk, "sdk254");
	assert_string_equal(m.groups[7].name, "sdk6");
	model_free(&m);
}

/* A registry that had no slot for some threads: their groups are unknown at
 * a late attach, which the model keeps for the snapshot to say. */
static void model__registry__dropped_threads_remembered(void **state)
{
	struct model m;
	struct tally_registry *reg = calloc(1, sizeof(*reg));

	(void)state;
	assert_non_null(reg);
	model_init(&m);
	reg->ngroups = 2;
	strcpy(reg->names[1], "busy");
	model_seed_registry(&m, reg, false);
	assert_int_equal(m.registry_threads_dropped, 0);
	reg->threads_dropped = 104;
	model_seed_registry(&m, reg, false);
	assert_int_equal(m.registry_threads_dropped, 104);
	assert_string_equal(m.groups[1].name, "busy");
	model_free(&m);
	free(reg);
}

static void model__group_rule__charges_root_records_of_named_threads(void **state)
{
	(void)state;
	struct model m;
	struct tally_ev recs[] = { SEG(4 << 20, 65536), BUMP(4096), ALLOC(0, 50, 64) };

	model_init(&m);
	assert_int_equal(model_add_rule(&m, "io=io-*"), 0);
	assert_int_equal(model_add_rule(&m, "bad"), -EINVAL);
	assert_int_equal(model_add_rule(&m, "=x"), -EINVAL);
	int32_t g = model_thread_named(&m, 31, "io-3");
	assert_true(g > 0);
	assert_string_equal(m.groups[g].name, "io");
	assert_int_equal(model_thread_named(&m, 32, "main"), -1);
	apply_batch(&m, 1, 0, 31, recs, 3);
	assert_int_equal(group_live(&m, (uint32_t)g), 50);
	assert_int_equal(group_live(&m, 0), 0);
	model_free(&m);
}

static void model__malformed_messages__counted_not_applied(void **state)
{
	(void)state;
	struct model m;
	struct tally_ev recs[] = { ALLOC(1, 10, 16) };
	size_t len;

	model_init(&m);
	struct tally_msg_batch *b = batch(1, 0, 1, recs, 1, &len);
	b->batch.magic = 0;
	assert_int_equal(model_apply(&m, b, len), -EINVAL);
	b->batch.magic = TALLY_BATCH_MAGIC;
	b->batch.count = TALLY_BATCH_WORDS + 1;
	assert_int_equal(model_apply(&m, b, len), -EINVAL);
	assert_int_equal(model_apply(&m, b, 8), -EINVAL);
	struct tally_msg odd = { 99, 0, 1, 1, 0, 0 };
	assert_int_equal(model_apply(&m, &odd, sizeof(odd)), -EINVAL);
	assert_int_equal(m.malformed, 4);
	/* the batch ends where the producer's bytes or the message end, the
	 * first of the two; a producer's bytes past a batch is not a batch */
	b->batch.count = 1;
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + 7);
	assert_int_equal(model_apply(&m, b, len), -EINVAL);
	b->bytes = sizeof(b->batch) + 1;
	assert_int_equal(model_apply(&m, b, len), -EINVAL);
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + 8);
	assert_int_equal(model_apply(&m, b, offsetof(struct tally_msg_batch, batch.words) + 7),
			 -EINVAL);
	b->batch.source = TALLY_SRC_INTERPOSE + 1;
	assert_int_equal(model_apply(&m, b, len), -EINVAL);
	assert_int_equal(m.malformed, 8);
	assert_int_equal(group_live(&m, 1), 0);
	/* and the same batch whole is applied */
	b->batch.source = TALLY_SRC_ALLOC;
	assert_int_equal(model_apply(&m, b, offsetof(struct tally_msg_batch, batch.words) + 8), 0);
	assert_int_equal(group_live(&m, 1), 10);
	free(b);
	model_free(&m);
}

static void gpu_msg(struct model *m, uint8_t type, uint8_t term, uint16_t g, uint32_t n,
		    uint64_t bytes)
{
	struct tally_msg_gpu msg = { .hdr = { TALLY_MSG_GPU, 0, 1, 4 },
				     .ev = { type, term, g, n, bytes } };
	assert_int_equal(model_apply(m, &msg, sizeof(msg)), 0);
}

static void model__gpu_driver_records__counters_and_gauges_per_group(void **state)
{
	(void)state;
	struct model m;

	model_init(&m);
	gpu_msg(&m, TALLY_EV_GPU_LAUNCH, 0, 2, 0, TALLY_GPU_API_LAUNCH_KERNEL);
	gpu_msg(&m, TALLY_EV_GPU_LAUNCH, 0, 2, 0, TALLY_GPU_API_LAUNCH_KERNEL_EX);
	gpu_msg(&m, TALLY_EV_GPU_LAUNCH_FAILED, 0, 2, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	gpu_msg(&m, TALLY_EV_GPU_GRAPH_LAUNCH, 0, 3, 0, TALLY_GPU_API_GRAPH_LAUNCH);
	gpu_msg(&m, TALLY_EV_GPU_DEVICE_MEM, 0, 2, 0, 1 << 20);
	gpu_msg(&m, TALLY_EV_GPU_HOST_PINNED, 0, 3, 0, 4096);
	gpu_msg(&m, TALLY_EV_GPU_IMAGE, 0, 2, 0, 777);
	const struct gpu_group *g2 = &m.gpu.groups[GPU_SRC_DRIVER][2];
	assert_int_equal(g2->kernels_launched, 2);
	assert_int_equal(g2->failed_launches, 1);
	assert_int_equal(g2->device_bytes, 1 << 20);
	assert_int_equal(g2->image_bytes, 777);
	assert_int_equal(m.gpu.groups[GPU_SRC_DRIVER][3].graph_launches, 1);
	/* frees and unloads carry the allocating group: the gauges return to 0 */
	gpu_msg(&m, TALLY_EV_GPU_DEVICE_MEM, 1, 2, 0, 1 << 20);
	gpu_msg(&m, TALLY_EV_GPU_HOST_PINNED, 1, 3, 0, 4096);
	gpu_msg(&m, TALLY_EV_GPU_IMAGE, 1, 2, 0, 777);
	assert_int_equal(g2->device_bytes, 0);
	assert_int_equal(g2->image_bytes, 0);
	assert_int_equal(m.gpu.groups[GPU_SRC_DRIVER][3].host_pinned, 0);
	assert_int_equal(gpu_source_of(&m.gpu), GPU_SRC_DRIVER);
	assert_true(m.groups[2].known);
	model_free(&m);
}

/* An empty batch of the CUPTI library's, from thread 5. */
static void cupti_batch(struct tally_msg_batch *b)
{
	b->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 5, 1, 0, 0 };
	b->batch = (struct tally_batch){ .magic = TALLY_BATCH_MAGIC,
					 .version = TALLY_BATCH_VERSION,
					 .source = TALLY_SRC_CUPTI,
					 .tid = 5 };
}

/* A record whose text follows it in words (a kernel's name, CUPTI's reason). */
static void put_text(struct tally_msg_batch *b, const struct tally_ev *e, const char *text)
{
	tally_ev_put(b->batch.words, &b->batch.count, e);
	memcpy(&b->batch.words[b->batch.count], text, strlen(text));
	b->batch.count += (uint32_t)((strlen(text) + 7) / 8);
}

static void model__cupti_batch__kernel_name_interned_and_preferred(void **state)
{
	(void)state;
	struct model m;
	struct tally_msg_batch *b = calloc(1, sizeof(*b));
	const char *name = "_Z6matmulPfS_S_i";
	struct tally_ev kn = { TALLY_EV_GPU_KERNEL_NAME, 0, 0, 7, strlen(name) };
	struct tally_ev launch = { TALLY_EV_GPU_LAUNCH, 0, 1, 7, TALLY_GPU_API_LAUNCH_KERNEL };

	model_init(&m);
	cupti_batch(b);
	put_text(b, &kn, name);
	tally_ev_put(b->batch.words, &b->batch.count, &launch);
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + b->batch.count * 8);
	assert_int_equal(model_apply(&m, b, sizeof(*b)), 0);
	assert_string_equal(gpu_kernel_name(&m.gpu, 7), name);
	assert_int_equal(m.gpu.groups[GPU_SRC_CUPTI][1].kernels_launched, 1);
	/* a driver record too: CUPTI's figures are the ones reported */
	gpu_msg(&m, TALLY_EV_GPU_LAUNCH, 0, 1, 0, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_int_equal(gpu_source_of(&m.gpu), GPU_SRC_CUPTI);
	/* a name that runs past the batch is refused */
	b->batch.count = 3;
	assert_int_equal(model_apply(&m, b, sizeof(*b)), -EINVAL);
	free(b);
	model_free(&m);
}

/* An injected process's batch (libtally_interpose.so), from thread 9. */
static void interpose_batch(struct tally_msg_batch *b, const struct tally_ev *recs, uint32_t n)
{
	b->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 9, 1, 0, 0 };
	b->batch = (struct tally_batch){ .magic = TALLY_BATCH_MAGIC,
					 .version = TALLY_BATCH_VERSION,
					 .source = TALLY_SRC_INTERPOSE,
					 .tid = 9,
					 .heap_id = 1 };
	for (uint32_t i = 0; i < n; i++)
		tally_ev_put(b->batch.words, &b->batch.count, &recs[i]);
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + b->batch.count * 8);
}

/* --inject: blocks since the injection are live bytes and their rounding,
 * a large one too; a free of a block from before moves no live byte and is
 * counted apart; glibc's totals kept; the figures say glibc, exact. */
static void model__interpose_batch__glibc_figures_since_the_injection(void **state)
{
	(void)state;
	struct model m;
	struct tally_msg_batch *b = calloc(1, sizeof(*b));
	struct figures_sources *src = calloc(1, sizeof(*src));
	struct figures_process p = { 0 };
	const struct tally_ev recs[] = {
		{ TALLY_EV_ALLOC, 0, 0, 100, 104 },
		{ TALLY_EV_ALLOC, 0, 0, 40, 40 },
		{ TALLY_EV_FREE, 0, 0, 40, 40 },
		{ TALLY_EV_LARGE_ALLOC, 0, 0, 4000, 20000000 }, /* n = usable - requested */
		{ TALLY_EV_FREE_UNTRACKED, 0, 0, 0, 72 },
		{ TALLY_EV_GLIBC_INFO, 0, 0, 0, 65536 },
	};
	uint64_t info[TALLY_GLIBC_INFO_WORDS] = { 135168, 20004096, 21000, 114168, 4096, 0 };

	assert_non_null(b);
	assert_non_null(src);
	model_init(&m);
	interpose_batch(b, recs, 6);
	memcpy(&b->batch.words[b->batch.count], info, sizeof(info));
	b->batch.count += TALLY_GLIBC_INFO_WORDS;
	b->bytes += sizeof(info);
	assert_int_equal(model_apply(&m, b, sizeof(*b)), 0);
	assert_true(m.injected.seen);
	assert_false(m.saw_alloc);
	assert_int_equal(m.injected.f.live, 100 + 20000000);
	assert_int_equal(m.injected.f.rounding, 4 + 4000);
	assert_int_equal(m.injected.f.unknown_frees, 1);
	assert_int_equal(m.injected.unknown_free_bytes, 72);
	assert_int_equal(m.injected.f.alloc_objs[0], 3);
	assert_int_equal(m.injected.f.dealloc_objs[0], 1);
	assert_int_equal(m.injected.table_bytes, 65536);
	assert_int_equal(m.injected.info[1], 20004096);

	src->allocator = FIGURES_ALLOC_GLIBC;
	src->injected = true;
	src->late = true;
	src->have_glibc = true;
	src->glibc = m.injected.f;
	assert_int_equal(figures_build_process(&p, &m, src), 0);
	assert_true(p.exact);
	assert_true(p.target.injected);
	assert_int_equal(p.stats.v[TALLY_STAT_live], 100 + 20000000);
	assert_false(p.stats.known & (1u << TALLY_STAT_large_count));
	assert_true(p.have_glibc_info);
	assert_int_equal(p.groups[0].live_bytes, 100 + 20000000);
	/* the table could not hold a block: flagged */
	src->glibc.untracked = 1;
	figures_process_free(&p);
	memset(&p, 0, sizeof(p));
	assert_int_equal(figures_build_process(&p, &m, src), 0);
	assert_false(p.exact);
	figures_process_free(&p);
	/* a block given again whose free the interposer did not see (the
	 * last word of the process's report): flagged, with its reason */
	src->glibc.untracked = 0;
	info[TALLY_GLIBC_INFO_WORDS - 1] = 3;
	memset(b, 0, sizeof(*b));
	interpose_batch(b, &recs[5], 1);
	memcpy(&b->batch.words[b->batch.count], info, sizeof(info));
	b->batch.count += TALLY_GLIBC_INFO_WORDS;
	b->bytes += sizeof(info);
	assert_int_equal(model_apply(&m, b, sizeof(*b)), 0);
	assert_int_equal(m.injected.f.unseen_frees, 3);
	src->glibc = m.injected.f;
	memset(&p, 0, sizeof(p));
	assert_int_equal(figures_build_process(&p, &m, src), 0);
	assert_false(p.exact);
	assert_int_equal(p.nwhy, 1);
	assert_non_null(strstr(p.why[0], "did not see"));
	figures_process_free(&p);
	free(src);
	free(b);
	model_free(&m);
}

/* A batch of the interposer's with a record it never writes, or cut inside
 * a record, is refused whole: nothing of it applied. */
static void model__interpose_batch__malformed_refused_whole(void **state)
{
	(void)state;
	struct model m;
	struct tally_msg_batch *b = calloc(1, sizeof(*b));
	const struct tally_ev recs[] = {
		{ TALLY_EV_ALLOC, 0, 0, 100, 104 },
		{ TALLY_EV_SPAN_CLAIM, 0, 0, 64, 0 },
	};

	assert_non_null(b);
	model_init(&m);
	interpose_batch(b, recs, 2);
	assert_int_equal(model_apply(&m, b, sizeof(*b)), -EINVAL);
	assert_int_equal(m.injected.f.live, 0);
	memset(b, 0, sizeof(*b));
	const struct tally_ev info = { TALLY_EV_GLIBC_INFO, 0, 0, 0, 0 };
	interpose_batch(b, &info, 1); /* its words missing */
	assert_int_equal(model_apply(&m, b, sizeof(*b)), -EINVAL);
	assert_false(m.injected.have_info);
	free(b);
	model_free(&m);
}

/* CUPTI refused tally's subscriber (libtally_cupti.so's record): its
 * reason kept, printable; the driver's probes are the source, and the
 * figures say so with the reason. */
static void model__cupti_refused__driver_counts_with_the_reason(void **state)
{
	(void)state;
	struct model m;
	struct tally_msg_batch *b = calloc(1, sizeof(*b));
	const char *why = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; held by nsys\n";
	struct tally_ev r = { TALLY_EV_GPU_CUPTI_REFUSED, 0, 0, 39, strlen(why) };
	struct figures_sources *src = calloc(1, sizeof(*src));
	struct figures_process p = { 0 };

	assert_non_null(b);
	assert_non_null(src);
	model_init(&m);
	cupti_batch(b);
	put_text(b, &r, why);
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + b->batch.count * 8);
	assert_int_equal(model_apply(&m, b, sizeof(*b)), 0);
	assert_string_equal(m.gpu.cupti_refused,
			    "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; held by nsys?");
	assert_false(m.gpu.seen[GPU_SRC_CUPTI]);
	gpu_msg(&m, TALLY_EV_GPU_LAUNCH, 0, 0, 0, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_int_equal(gpu_source_of(&m.gpu), GPU_SRC_DRIVER);
	src->cuda.entry_points = 30;
	src->cupti = true;
	assert_int_equal(figures_build_process(&p, &m, src), 0);
	assert_int_equal(p.target.cuda, FIGURES_CUDA_DRIVER);
	assert_string_equal(p.target.cuda_why, m.gpu.cupti_refused);
	assert_int_equal(p.instance.kernels_launched, 1);
	assert_true(p.instance_exact);
	/* not a figure: without the driver's probes nothing counts, and
	 * nothing claims to */
	src->cuda.entry_points = 0;
	src->cuda.late = true;
	assert_int_equal(figures_build_process(&p, &m, src), 0);
	assert_false(p.instance_exact);
	assert_false(p.exact);
	figures_process_free(&p);
	free(src);
	free(b);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(model__batches_out_of_order__same_figures),
		cmocka_unit_test(model__foreign_free__charged_to_the_allocating_group),
		cmocka_unit_test(model__nested_groups__thread_follows_enter_and_exit),
		cmocka_unit_test(model__thread_exit__marks_thread_and_process),
		cmocka_unit_test(model__late_attach_cutoff__applies_only_newer_records),
		cmocka_unit_test(model__group_rule__charges_root_records_of_named_threads),
		cmocka_unit_test(model__group_rule__sdk_group_on_its_id_is_flagged),
		cmocka_unit_test(model__registry__dropped_threads_remembered),
		cmocka_unit_test(model__malformed_messages__counted_not_applied),
		cmocka_unit_test(model__gpu_driver_records__counters_and_gauges_per_group),
		cmocka_unit_test(model__cupti_batch__kernel_name_interned_and_preferred),
		cmocka_unit_test(model__cupti_refused__driver_counts_with_the_reason),
		cmocka_unit_test(model__interpose_batch__glibc_figures_since_the_injection),
		cmocka_unit_test(model__interpose_batch__malformed_refused_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
