// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the event decoder (model_apply in user/model/model.c) on ring
 * buffer messages made by the fuzzer, several to one model, then the
 * figures the views render (figures_build). The input is a flags byte and a run of
 * chunks, each a little-endian u16 header and a payload:
 *
 *   byte 0        bit 0: two --group rules ("work=work*", "io=io[0-9]*");
 *                 bits 1-2: the allocator mode of the figures (figures.h), mod 3
 *   header >> 14  0: the payload is one message (model_apply)
 *                 3: one message to the tree of processes (tree.h): a fork
 *                    clones the root's model (or its parent's), the others go
 *                    to their process's model, the last thread's exit keeps
 *                    its figures and frees the model
 *                 1: records read from a live heap's memory
 *                    (model_apply_pending): heap id u64, seq_first u64,
 *                    tid u32, then the record words
 *                 2: the final cut (model_cut, then model.cut): heap id u64, pos u64
 *   header & 0x3fff  the payload's length (cut short by the input's end)
 *
 * Each payload is copied to a buffer of its exact length, aligned as the ring
 * buffer's are, so that a read past a message's end is AddressSanitizer's.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../user/model/figures.h"
#include "../../user/model/model.h"
#include "../../user/model/tree.h"

#define CHUNK_MESSAGE 0
#define CHUNK_PENDING 1
#define CHUNK_CUT 2
#define CHUNK_TREE 3

static uint64_t le(const uint8_t *p, size_t n)
{
	uint64_t v = 0;

	while (n--)
		v = v << 8 | p[n];
	return v;
}

static void apply_pending(struct model *m, const uint8_t *p, size_t len)
{
	if (len < 20)
		return;
	uint32_t count = (uint32_t)((len - 20) / 8);
	__u64 *words = malloc(count ? count * sizeof(*words) : 1);
	if (!words)
		return;
	memcpy(words, p + 20, count * sizeof(*words));
	model_apply_pending(m, le(p, 8), le(p + 8, 8), (uint32_t)le(p + 16, 4), words, count);
	free(words);
}

/* A message to the tree, as the session routes it (user/session/session_tree.c). */
static void apply_tree(struct tree *t, struct model *root, const uint8_t *p, size_t len)
{
	static struct figures_sources src;
	const struct tally_msg *h = (const void *)p;
	struct tree_proc *tp;

	if (len < sizeof(*h))
		return;
	if (h->kind == TALLY_MSG_PROC_FORK) {
		const struct tally_msg_thread *th = (const void *)p;
		if (len < sizeof(*th) || tree_find(t, (pid_t)h->pid))
			return;
		tp = tree_find(t, (pid_t)th->pid);
		tree_fork(t, tp ? tp->m : root, root, th);
		return;
	}
	tp = tree_find(t, (pid_t)h->pid);
	if (!tp)
		return;
	model_apply(tp->m, p, len);
	if (h->kind == TALLY_MSG_THREAD_EXIT && (h->flags & TALLY_THREAD_GROUP_DEAD)) {
		struct figures_process fig = { 0 };
		src.gone = true;
		if (!figures_build_process(&fig, tp->m, &src))
			tree_end(t, tp, &fig);
		figures_process_free(&fig);
	}
}

/* What the views read: the figures (snapshot, top, trace and prom render
 * them and nothing else), with the contracts they rely on: names they print
 * as strings are terminated. In the allocator mode the input's flags byte
 * says: the replayed allocator, glibc mode beside a model fed the same
 * messages, or none. */
static void read_figures(const struct model *m, enum figures_allocator mode)
{
	static struct figures_sources src;
	struct figures f = { 0 };
	volatile uint64_t sink = 0;
	struct tally_group_stats gs;

	src.allocator = mode;
	src.have_glibc = mode == FIGURES_ALLOC_GLIBC;
	if (!figures_build(&f, m, &src)) { /* else out of memory: nothing to read */
		const struct figures_process *p = &f.procs[0];
		sink += (uint64_t)p->stats.v[TALLY_STAT_live] + p->exact + p->nwhy;
		for (unsigned g = 0; g < p->ngroups; g++) {
			const struct figures_group *fg = &p->groups[g];
			sink += (uint64_t)fg->live_bytes + fg->instance.kernels_launched;
			if (fg->name &&
			    strnlen(fg->name, TALLY_GROUP_NAME_MAX) == TALLY_GROUP_NAME_MAX)
				abort();
		}
		for (size_t i = 0; i < p->nthreads; i++)
			if (strnlen(p->threads[i].comm, TALLY_COMM_LEN) == TALLY_COMM_LEN ||
			    p->threads[i].group >= TALLY_MAX_GROUPS)
				abort();
		figures_free(&f);
	}
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++)
		if (tally_replay_group(&m->replay, g, &gs))
			abort();
	if (m->collided_id &&
	    strnlen(m->collided_sdk, TALLY_GROUP_NAME_MAX) == TALLY_GROUP_NAME_MAX)
		abort();
	for (uint32_t id = 0; id < m->gpu.nnames; id++) {
		const char *name = gpu_kernel_name(&m->gpu, id);
		if (name)
			sink += strlen(name);
	}
	(void)sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct model *m = malloc(sizeof(*m));
	struct tree t;
	size_t at = 1;

	if (!m || !size) {
		free(m);
		return 0;
	}
	model_init(m);
	tree_init(&t);
	if (data[0] & 1) {
		if (model_add_rule(m, "work=work*") || model_add_rule(m, "io=io[0-9]*"))
			abort();
	}
	while (at + 2 <= size) {
		unsigned hdr = (unsigned)le(data + at, 2);
		size_t len = hdr & 0x3fff;
		at += 2;
		if (len > size - at)
			len = size - at;
		uint8_t *p = malloc(len ? len : 1);
		if (!p)
			break;
		memcpy(p, data + at, len);
		at += len;
		switch (hdr >> 14) {
		case CHUNK_PENDING:
			apply_pending(m, p, len);
			break;
		case CHUNK_CUT:
			if (len >= 16) {
				model_cut(m, le(p, 8), le(p + 8, 8));
				m->cut = true;
			}
			break;
		case CHUNK_TREE:
			apply_tree(&t, m, p, len);
			break;
		default:
			model_apply(m, p, len);
			break;
		}
		free(p);
	}
	enum figures_allocator mode =
		(enum figures_allocator)((data[0] >> 1) % (FIGURES_ALLOC_NONE + 1));
	read_figures(m, mode);
	for (size_t i = 0; i < t.n; i++)
		if (t.procs[i].m)
			read_figures(t.procs[i].m, mode);
	tree_free(&t);
	model_free(m);
	free(m);
	return 0;
}
