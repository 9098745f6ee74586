// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The processes of a traced tree (user/model/tree.c, model_fork.c,
 * figures_tree.c): a forked child's model is its parent's at the fork and
 * goes its own way from there, its copy of a pending batch counted once in
 * each; a vfork child starts empty; an ended process keeps its figures small
 * and its model goes; past TREE_KEEP_ENDED the oldest are only counted; a
 * reused pid is the new process; the tree's sum merges groups by name.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../user/model/tree.h"

#define HEAP 7

static void apply_batch(struct model *m, uint64_t seq, uint32_t tid, const struct tally_ev *recs,
			uint32_t n)
{
	struct tally_msg_batch *b = calloc(1, sizeof(*b));

	assert_non_null(b);
	b->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, tid, 1, 0, 0 };
	b->batch.magic = TALLY_BATCH_MAGIC;
	b->batch.version = TALLY_BATCH_VERSION;
	b->batch.source = TALLY_SRC_ALLOC;
	b->batch.tid = tid;
	for (uint32_t i = 0; i < n; i++)
		tally_ev_put(b->batch.words, &b->batch.count, &recs[i]);
	b->batch.heap_id = HEAP;
	b->batch.seq_first = seq;
	b->bytes = (uint32_t)(offsetof(struct tally_batch, words) + b->batch.count * 8);
	assert_int_equal(model_apply(m, b, sizeof(*b)), 0);
	free(b);
}

static const struct tally_ev seg = { TALLY_EV_SEG_MAP, 0, 0, 4096, 1 << 20 };
static const struct tally_ev bump = { TALLY_EV_BUMP, TALLY_TERM_VIRGIN, 0, 0, 4096 };

static struct tally_ev alloc_ev(uint16_t g, uint32_t q)
{
	return (struct tally_ev){ TALLY_EV_ALLOC, 0, g, q, 64 };
}

static struct tally_ev free_ev(uint16_t g, uint32_t q)
{
	return (struct tally_ev){ TALLY_EV_FREE, 0, g, q, 64 };
}

static struct tally_msg_thread fork_msg(pid_t child, pid_t parent, uint32_t parent_tid,
					uint16_t flags)
{
	struct tally_msg_thread m = { .hdr = { TALLY_MSG_PROC_FORK, flags, (uint32_t)child, 5,
					       (uint32_t)child, 0 },
				      .pid = (uint32_t)parent,
				      .parent_tid = parent_tid };
	strcpy(m.comm, "child");
	return m;
}

static void group_enter(struct model *m, uint32_t tid, uint32_t g, const char *name)
{
	struct tally_msg_group r = { .hdr = { TALLY_MSG_GROUP_REGISTER, 0, tid, 2, 0, 0 },
				     .group = g };
	struct tally_msg_group e = { .hdr = { TALLY_MSG_GROUP_ENTER, 0, tid, 2, 0, 0 },
				     .group = g };

	strcpy(r.name, name);
	assert_int_equal(model_apply(m, &r, sizeof(r)), 0);
	assert_int_equal(model_apply(m, &e, sizeof(e)), 0);
}

static int64_t live_of(const struct model *m, unsigned g)
{
	return m->replay.groups[g].alloc_bytes - m->replay.groups[g].dealloc_bytes;
}

/*
 * The parent has handed over six words of records (a segment and a bump,
 * two words each, and two allocations: the child's copy of its heap starts
 * at position 6) and holds two more in its batch (100 and 200 bytes in group
 * 1) when it forks. The child's copy of that batch comes in the child's
 * stream, numbered from 6, as do its own records; the parent hands over its
 * own copy, and goes on.
 */
static void fork__child_starts_with_the_parents_figures_then_its_own(void **state)
{
	struct model parent;
	struct tree t;
	(void)state;
	model_init(&parent);
	tree_init(&t);
	group_enter(&parent, 100, 1, "work");
	struct tally_ev before[] = { seg, bump, alloc_ev(1, 10), alloc_ev(1, 20) };
	apply_batch(&parent, 0, 100, before, 4);

	struct tally_msg_thread fm = fork_msg(200, 100, 100, 0);
	struct tree_proc *c = tree_fork(&t, &parent, NULL, &fm);
	assert_non_null(c);
	assert_int_equal(c->pid, 200);
	assert_int_equal(c->ppid, 100);
	/* the figures at the fork are the parent's, the group's name too */
	struct tally_stats ps, cs;
	model_stats(&parent, &ps);
	model_stats(c->m, &cs);
	assert_memory_equal(&ps, &cs, sizeof(ps));
	assert_string_equal(c->m->groups[1].name, "work");
	/* the child's one thread is in the group its forking thread was in */
	assert_int_equal(model_thread(c->m, 200, false)->group, 1);
	assert_null(model_thread(c->m, 100, false));
	assert_int_equal(c->m->received, 0); /* its own messages from here */

	/* the pending records, in both streams; each side's own after them */
	struct tally_ev parent_after[] = { alloc_ev(1, 100), alloc_ev(1, 200), free_ev(1, 10) };
	struct tally_ev child_after[] = { alloc_ev(1, 100), alloc_ev(1, 200), alloc_ev(1, 5000) };
	apply_batch(&parent, 6, 100, parent_after, 3);
	apply_batch(c->m, 6, 200, child_after, 3);
	assert_int_equal(live_of(&parent, 1), 20 + 100 + 200);
	assert_int_equal(live_of(c->m, 1), 10 + 20 + 100 + 200 + 5000);
	/* records the clone has already (a batch before the fork point) are
	 * skipped: a copy of an already handed-over batch counts once */
	apply_batch(c->m, 0, 200, before, 4);
	assert_int_equal(live_of(c->m, 1), 10 + 20 + 100 + 200 + 5000);
	model_free(&parent);
	tree_free(&t);
}

/* Another thread of the parent alive at the fork may have been writing its
 * heap as the kernel copied it: the child says so until it execs. The
 * allocator's purger does not count: it sweeps under the lock fork takes. */
static void fork__other_threads_make_the_copy_inexact_until_exec(void **state)
{
	struct model parent;
	struct tree t;
	(void)state;
	model_init(&parent);
	tree_init(&t);
	model_thread_named(&parent, 100, "main");
	model_thread_named(&parent, 101, TALLY_PURGER_COMM);
	struct tally_msg_thread fm = fork_msg(500, 100, 100, 0);
	struct tree_proc *c = tree_fork(&t, &parent, NULL, &fm);
	assert_false(c->m->fork_threads);
	model_thread_named(&parent, 102, "worker");
	fm = fork_msg(501, 100, 100, 0);
	c = tree_fork(&t, &parent, NULL, &fm);
	assert_true(c->m->fork_threads);
	struct tally_msg_thread ex = {
		.hdr = { TALLY_MSG_THREAD_NAME, TALLY_THREAD_EXEC, 501, 9, 501, 0 }, .pid = 501
	};
	strcpy(ex.comm, "true");
	assert_int_equal(model_apply(c->m, &ex, sizeof(ex)), 0);
	assert_false(c->m->fork_threads);
	model_free(&parent);
	tree_free(&t);
}

/* A running process's figures at a tick: its model plus what its heaps hold,
 * the model itself untouched; not when a batch before them is still on its
 * way, nor from a copy a flush tore. */
static void preview__pending_records_added_model_untouched(void **state)
{
	struct model m;
	(void)state;
	model_init(&m);
	struct tally_ev recs[] = { seg, bump, alloc_ev(0, 10) };
	apply_batch(&m, 0, 100, recs, 3); /* words 0..4: the heap's done is 5 */
	__u64 pending[2] = { tally_ev_word(TALLY_EV_ALLOC, 0, 30, 64),
			     tally_ev_word(TALLY_EV_ALLOC, 0, 40, 64) };
	struct remote_heap h = { .id = HEAP,
				 .seq_first = 5,
				 .pos = 7,
				 .tid = 100,
				 .npending = 2,
				 .pending = pending,
				 .whole = true };
	struct remote_alloc ra = { .nheaps = 1, .heaps = &h };
	struct tally_replay view;
	assert_true(model_preview(&m, &ra, &view));
	assert_int_equal(view.live, 80);
	assert_int_equal(m.replay.live, 10);
	h.seq_first = 9; /* words 5..8 not in yet */
	h.pos = 11;
	assert_false(model_preview(&m, &ra, &view));
	h.seq_first = 5;
	h.pos = 7;
	h.whole = false;
	assert_false(model_preview(&m, &ra, &view));
	model_free(&m);
}

/* A child that shares its parent's memory (vfork, posix_spawn) has no
 * allocator of its own until it execs: it starts empty, with the rules. */
static void vfork__child_starts_empty_with_the_rules(void **state)
{
	struct model parent;
	struct tree t;
	(void)state;
	model_init(&parent);
	tree_init(&t);
	assert_int_equal(model_add_rule(&parent, "workers=w*"), 0);
	struct tally_ev recs[] = { seg, bump, alloc_ev(0, 10) };
	apply_batch(&parent, 0, 100, recs, 3);
	struct tally_msg_thread fm = fork_msg(300, 100, 100, TALLY_PROC_SHARED_VM);
	struct tree_proc *c = tree_fork(&t, &parent, &parent, &fm);
	assert_non_null(c);
	assert_true(c->shared_vm);
	assert_false(c->m->saw_alloc);
	assert_int_equal(c->m->replay.mapped, 0);
	assert_int_equal(c->m->nrules, 1);
	assert_string_equal(c->m->groups[c->m->rules[0].group].name, "workers");
	model_free(&parent);
	tree_free(&t);
}

static void end__figures_kept_small_and_the_model_freed(void **state)
{
	struct model parent;
	struct tree t;
	struct figures_sources src;
	struct figures_process fig = { 0 };
	(void)state;
	model_init(&parent);
	tree_init(&t);
	memset(&src, 0, sizeof(src));
	struct tally_msg_thread fm = fork_msg(400, 100, 100, 0);
	struct tree_proc *c = tree_fork(&t, &parent, NULL, &fm);
	group_enter(c->m, 400, 3, "io");
	struct tally_ev recs[] = { seg, bump, alloc_ev(3, 48) };
	apply_batch(c->m, 0, 400, recs, 3);
	src.pid = 400;
	strcpy(src.comm, "child");
	src.allocator = FIGURES_ALLOC_TALLY;
	src.gone = true;
	src.born_ns = 5;
	src.ended_ns = 9;
	assert_int_equal(figures_build_process(&fig, c->m, &src), 0);
	assert_int_equal(tree_end(&t, c, &fig), 0);
	figures_process_free(&fig); /* the kept copy is its own */
	c = &t.procs[0];
	assert_true(c->ended);
	assert_null(c->m);
	assert_null(tree_find(&t, 400));
	assert_string_equal(c->kept.target.comm, "child");
	assert_int_equal(c->kept.ended_ns, 9);
	/* only the groups listed: root and io */
	assert_int_equal(c->kept.ngroups, 2);
	assert_string_equal(figures_group_of(&c->kept, 3)->name, "io");
	assert_int_equal(figures_group_of(&c->kept, 3)->live_bytes, 48);
	assert_int_equal(c->kept.stats.v[TALLY_STAT_live], 48);
	model_free(&parent);
	tree_free(&t);
}

/* Past TREE_KEEP_ENDED ended processes the oldest go, counted; running ones
 * stay whatever their age. A pid the kernel gives again is the new one. */
static void many__ended_bounded_running_kept_pid_reuse(void **state)
{
	struct model root;
	struct tree t;
	struct figures_sources src;
	struct figures_process fig = { 0 };
	(void)state;
	model_init(&root);
	tree_init(&t);
	memset(&src, 0, sizeof(src));
	struct tally_msg_thread fm = fork_msg(2, 1, 1, 0);
	assert_non_null(tree_fork(&t, &root, NULL, &fm)); /* runs throughout */
	for (unsigned i = 0; i < TREE_KEEP_ENDED + 10; i++) {
		fm = fork_msg(1000 + (pid_t)(i % 3), 1, 1, 0); /* pids used again */
		struct tree_proc *c = tree_fork(&t, &root, NULL, &fm);
		assert_non_null(c);
		assert_ptr_equal(tree_find(&t, c->pid), c);
		src.pid = c->pid;
		src.gone = true;
		assert_int_equal(figures_build_process(&fig, c->m, &src), 0);
		assert_int_equal(tree_end(&t, c, &fig), 0);
	}
	assert_int_equal(t.nended, TREE_KEEP_ENDED);
	assert_int_equal(t.folded, 10);
	assert_int_equal(t.n, TREE_KEEP_ENDED + 1);
	assert_int_equal(t.procs[0].pid, 2);
	assert_false(t.procs[0].ended);
	assert_non_null(tree_find(&t, 2));
	figures_process_free(&fig);
	model_free(&root);
	tree_free(&t);
}

/* The tree as one process (serve's unlabelled series): the root and the
 * running processes, groups merged by name, ended ones out. */
static void sum__groups_merged_by_name_running_only(void **state)
{
	static struct figures_group g0[2], g1[2], g2[1];
	struct figures_process procs[3];
	struct figures f = { .nprocs = 3, .cap = 3, .procs = procs };
	struct figures_process sum;
	(void)state;
	memset(procs, 0, sizeof(procs));
	g0[0] = (struct figures_group){ .id = 0, .name = "root", .live_bytes = 1, .cpu_ns = 10 };
	g0[1] = (struct figures_group){ .id = 1, .name = "ingest", .live_bytes = 100 };
	g1[0] = (struct figures_group){ .id = 0, .name = "root", .live_bytes = 2 };
	g1[1] = (struct figures_group){ .id = 4, .name = "ingest", .live_bytes = 50, .cpu_ns = 7 };
	g2[0] = (struct figures_group){ .id = 0, .name = "root", .live_bytes = 1000 };
	struct figures_group *gs[] = { g0, g1, g2 };
	unsigned ns[] = { 2, 2, 1 };
	for (unsigned i = 0; i < 3; i++) {
		procs[i].groups = gs[i];
		procs[i].ngroups = ns[i];
		procs[i].exact = true;
		procs[i].stats.identity = true;
		procs[i].stats.known = (1u << TALLY_STATS_COUNT) - 1;
		procs[i].stats.v[TALLY_STAT_mapped] = procs[i].stats.accounted = 4096;
		procs[i].instance.kernels_launched = i + 1;
	}
	procs[2].target.gone = true; /* ended: its memory is gone */
	assert_int_equal(figures_sum(&f, &sum), 0);
	assert_int_equal(sum.ngroups, 2);
	assert_int_equal(figures_group_of(&sum, 0)->live_bytes, 3);
	assert_int_equal(figures_group_of(&sum, 1)->live_bytes, 150);
	assert_int_equal(figures_group_of(&sum, 1)->cpu_ns, 7);
	assert_int_equal(sum.stats.v[TALLY_STAT_mapped], 8192);
	assert_true(sum.stats.balanced);
	assert_int_equal(sum.instance.kernels_launched, 3);
	figures_process_free(&sum);
	figures_sum_tree(&f);
	assert_int_equal(f.tree.processes, 3);
	assert_int_equal(f.tree.alive, 2);
	assert_int_equal(f.tree.mapped, 8192);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(fork__child_starts_with_the_parents_figures_then_its_own),
		cmocka_unit_test(fork__other_threads_make_the_copy_inexact_until_exec),
		cmocka_unit_test(vfork__child_starts_empty_with_the_rules),
		cmocka_unit_test(preview__pending_records_added_model_untouched),
		cmocka_unit_test(end__figures_kept_small_and_the_model_freed),
		cmocka_unit_test(many__ended_bounded_running_kept_pid_reuse),
		cmocka_unit_test(sum__groups_merged_by_name_running_only),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
