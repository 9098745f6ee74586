// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target's allocator state, read from its memory and derived exactly as the
 * allocator derives its own figures (alloc/stats_walk.h, on copies of its
 * heaps, segment headers and slot metadata). The target keeps running: each
 * heap's position in its record stream is read with the heap, and read again
 * after its segments, so that a heap that changed meanwhile is known.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../alloc/stats_walk.h"
#include "remote.h"

static int peek(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int heap_pos(pid_t pid, uint64_t addr, uint64_t *pos)
{
	uint64_t seq;
	uint32_t count;
	int err;

	err = peek(pid, addr + offsetof(struct heap, seq), &seq, sizeof(seq));
	if (!err)
		err = peek(pid, addr + offsetof(struct heap, batch.count), &count, sizeof(count));
	if (!err)
		*pos = seq + count;
	return err;
}

/* Every assigned span of one segment header copied into `seg`, whose
 * address in the target is `at`. */
static int walk_segment(pid_t pid, uint64_t at, struct segment *seg, uint16_t *meta,
			struct stats_walk *w)
{
	for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
		struct span *sp = &seg->spans[i];
		uint64_t inline_at = at + offsetof(struct segment, spans) + i * sizeof(*sp) +
				     offsetof(struct span, inline_meta);
		const uint16_t *m = sp->inline_meta;

		if (sp->state == SPAN_UNASSIGNED)
			continue;
		if (sp->bump > SPAN_SIZE / 16)
			return -EPROTO;
		/* an address in the target: only computed, never dereferenced here */
		uint64_t meta_at = (uint64_t)(uintptr_t)sp->cells + sp->meta_skip * sizeof(*meta);
		if (sp->meta_skip > SPAN_SIZE / 16)
			return -EPROTO;
		if (meta_at != inline_at) {
			int err = peek(pid, meta_at, meta, sp->bump * sizeof(*meta));
			if (err)
				return err;
			m = meta;
		} else if (sp->bump > SPAN_INLINE_SLOTS) {
			return -EPROTO;
		}
		stats_walk_span(w, sp, m);
	}
	return 0;
}

static int remote_read(pid_t pid, uint64_t heaps_addr, struct remote_alloc *out, bool spans);

int remote_alloc_read(pid_t pid, uint64_t heaps_addr, struct remote_alloc *out)
{
	return remote_read(pid, heaps_addr, out, true);
}

int remote_pending_read(pid_t pid, uint64_t heaps_addr, struct remote_alloc *out)
{
	return remote_read(pid, heaps_addr, out, false);
}

/* spans: walk the segments too (the figures); without, only the heaps'
 * positions and pending records. */
static int remote_read(pid_t pid, uint64_t heaps_addr, struct remote_alloc *out, bool spans)
{
	struct heap *h = malloc(sizeof(*h));
	struct segment *seg = malloc(sizeof(*seg));
	uint16_t *meta = malloc(SPAN_SIZE / 16 * sizeof(uint16_t));
	struct stats_walk *w = calloc(1, sizeof(*w));
	uint64_t at, seg_at;
	uint32_t cap = 0;
	int err;

	memset(out, 0, sizeof(*out));
	out->consistent = true;
	if (!h || !seg || !meta || !w) {
		err = -ENOMEM;
		goto out;
	}
	err = peek(pid, heaps_addr, &at, sizeof(at));
	for (; !err && at; at = (uint64_t)(uintptr_t)h->all_next) {
		err = peek(pid, at, h, sizeof(*h));
		if (err)
			break;
		if (out->nheaps == cap) {
			cap = cap ? cap * 2 : 16;
			struct remote_heap *n = realloc(out->heaps, cap * sizeof(*n));
			if (!n) {
				err = -ENOMEM;
				break;
			}
			out->heaps = n;
		}
		struct remote_heap *rh = &out->heaps[out->nheaps++];
		uint32_t count = h->batch.count <= TALLY_BATCH_WORDS ? h->batch.count : 0;
		rh->id = h->id;
		rh->tid = h->tid;
		rh->seq_first = h->seq;
		rh->pos = h->seq + count;
		rh->npending = count;
		memcpy(rh->pending, h->batch.words, count * sizeof(rh->pending[0]));
		stats_walk_heap(w, h);
		for (seg_at = spans ? (uint64_t)(uintptr_t)h->segs : 0; !err && seg_at;
		     seg_at = (uint64_t)(uintptr_t)seg->next) {
			err = peek(pid, seg_at, seg, sizeof(*seg));
			if (!err)
				err = walk_segment(pid, seg_at, seg, meta, w);
		}
		uint64_t pos;
		if (!err)
			err = heap_pos(pid, at, &pos);
		if (!err && pos != rh->pos)
			out->consistent = false;
	}
	if (err)
		goto out;
	stats_walk_finish(w, &out->stats);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		out->groups[g] = (struct tally_group_stats){ (uint64_t)w->groups[g].alloc_bytes,
							     (uint64_t)w->groups[g].alloc_objs,
							     (uint64_t)w->groups[g].dealloc_bytes,
							     (uint64_t)w->groups[g].dealloc_objs };
out:
	if (err)
		remote_alloc_free(out);
	free(h);
	free(seg);
	free(meta);
	free(w);
	return err;
}

void remote_alloc_free(struct remote_alloc *ra)
{
	free(ra->heaps);
	ra->heaps = NULL;
	ra->nheaps = 0;
}

int remote_registry_read(pid_t pid, uint64_t addr, struct tally_registry *out)
{
	int err = peek(pid, addr, out, sizeof(*out));

	if (err)
		return err;
	if (out->magic != TALLY_REGISTRY_MAGIC || out->version != TALLY_REGISTRY_VERSION ||
	    out->ngroups > TALLY_MAX_GROUPS)
		return -EPROTO;
	for (unsigned i = 0; i < TALLY_MAX_GROUPS; i++)
		out->names[i][TALLY_GROUP_NAME_MAX - 1] = 0;
	return 0;
}
