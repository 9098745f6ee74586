// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A cut of a running target (cut_read.h). The figures' read needs each heap
 * that did not answer to stand still while tally reads it: its owner out of
 * the allocator. A heap answers at its owner's next operation, so a busy
 * owner answers within microseconds; one that does not is blocked, idle, or
 * running code of its own. tally reads such a heap, not busy (no slow
 * operation under way, alloc/cut.c), and keeps the read when the owner was
 * asleep as the read began (a fast path never sleeps), or had run long
 * enough since tally first saw it (2 ms of CPU) that no fast path it was in
 * then can still be under way: an operation of its since would have
 * answered first, which the read checks after the walk.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <unistd.h>

#include "../os/target.h"
#include "../util/clock.h"
#include "cut_read.h"

#define RAN_ENOUGH_NS 2000000ULL /* of CPU since the request: see above */
#define TRY_GAP_US 1000
/* A tick's positions: a heap inside an operation it began before the
 * request is read again until the operation is over, 50 us apart, for
 * 20 ms at most (an owner preempted there; then the cut is taken as it
 * is, and the view's check of it decides). */
#define BUSY_GAP_US 50
#define BUSY_WAIT_NS 20000000ULL

/* The request, written into the target (0: none could be). */
static uint64_t request(const struct cut_target *t, bool figures)
{
	uint64_t req = 0;

	if (t->cut_addr)
		(void)remote_cut_request(t->pid, t->cut_addr, figures, &req);
	return req;
}

/* Every heap read for req: the purger may sweep again those that did not
 * answer (alloc/purge.c). */
static void request_done(const struct cut_target *t, uint64_t req)
{
	if (req)
		(void)remote_cut_done(t->pid, t->cut_addr, req);
}

/* Each heap's position and pending records, read until no heap that has not
 * answered is inside an operation it began before the request (the purger's
 * pass among them, which may be in the middle of another heap): from then
 * on every operation answers first, and a heap read from outside stands
 * still unless its owner answers. */
static int read_unbusy(const struct cut_target *t, uint64_t req, struct remote_alloc *out)
{
	uint64_t deadline = clock_now_ns() + BUSY_WAIT_NS;

	for (;;) {
		int err = remote_pending_read(t->pid, t->heaps_addr, req, out);
		if (err || !req || !out->nbusy || clock_now_ns() >= deadline)
			return err;
		remote_alloc_free(out);
		usleep(BUSY_GAP_US);
	}
}

/* A thread seen owning a heap tally read: when first seen, and at the try
 * before (state and CPU time). */
struct owner_seen {
	uint32_t tid;
	uint64_t first_ns;
	struct thread_run before;
	bool have_before;
};

struct owners {
	struct owner_seen *v;
	size_t n, cap;
};

static struct owner_seen *owner_find(struct owners *o, uint32_t tid, bool add)
{
	for (size_t i = 0; i < o->n; i++)
		if (o->v[i].tid == tid)
			return &o->v[i];
	if (!add)
		return NULL;
	if (o->n == o->cap) {
		size_t cap = o->cap ? 2 * o->cap : 16;
		struct owner_seen *v = realloc(o->v, cap * sizeof(*v));
		if (!v)
			return NULL;
		o->v = v;
		o->cap = cap;
	}
	o->v[o->n] = (struct owner_seen){ .tid = tid };
	return &o->v[o->n++];
}

/* Whether every heap tally read (rather than took as answered) had its
 * owner out of the allocator while it was read: from its state as the try
 * began (noted after the try before). Notes each owner's state for the
 * next try. */
static bool owners_still(pid_t pid, const struct remote_alloc *ra, struct owners *o)
{
	bool still = true;

	for (uint32_t i = 0; i < ra->nheaps; i++) {
		const struct remote_heap *h = &ra->heaps[i];
		struct thread_run now;
		if (h->answered)
			continue;
		struct owner_seen *w = owner_find(o, h->tid, true);
		if (!w || target_thread_run(pid, h->tid, &now)) {
			still = false;
			continue;
		}
		if (!w->have_before) {
			w->first_ns = now.run_ns;
			still = false; /* no state from before this try */
		} else if (now.gone && w->before.gone) {
			/* no thread: an orphan, whose sweeper answers first */
		} else if (!w->before.gone && w->before.state != 'R' && w->before.state != 'D') {
			/* asleep as the read began: out of the allocator (its fast
			 * paths never sleep), and whatever it began since began
			 * with its answer, which the read saw */
		} else if (w->before.gone || w->before.run_ns < w->first_ns + RAN_ENOUGH_NS) {
			still = false;
		}
		w->before = now;
		w->have_before = true;
	}
	return still;
}

int cut_read_figures(const struct cut_target *t, uint32_t wait_ms, cut_wait_fn between, void *ctx,
		     struct remote_alloc *out)
{
	uint64_t deadline = clock_now_ns() + (uint64_t)wait_ms * 1000000;
	/* an allocator without the request (an older build): tally's reads only */
	uint64_t req = request(t, true);
	struct owners o = { 0 };
	int err = 0;

	if (req) {
		err = read_unbusy(t, req, out);
		if (!err)
			remote_alloc_free(out);
	}
	while (!err) {
		err = remote_alloc_read(t->pid, t->heaps_addr, req, out);
		if (err)
			break;
		bool still = !req || (!out->nbusy && owners_still(t->pid, out, &o));
		if (out->consistent && still)
			break;
		if (clock_now_ns() >= deadline) {
			out->consistent = false;
			break;
		}
		remote_alloc_free(out);
		usleep(TRY_GAP_US);
		/* without a request each try cuts anew, past what came meanwhile;
		 * with one, a heap's answer stays where it was: what came since
		 * is past it, and must stay for after the read */
		if (between && !req)
			between(ctx);
	}
	free(o.v);
	/* Read: a request without figures in its place, done at once, so
	 * that no owner walks its heap for a figure nobody reads */
	if (req)
		request_done(t, request(t, false));
	return err;
}

int cut_read_positions(const struct cut_target *t, struct remote_alloc *out)
{
	uint64_t req = request(t, false);
	int err = read_unbusy(t, req, out);

	request_done(t, req);
	return err;
}
