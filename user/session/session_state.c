// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A running target's state, read from its memory (remote.c) at the two ends
 * of a session: at a late attach, the starting point the records then add
 * to; at the end of one that still runs, the cut the snapshot is of.
 *
 * A busy target hands over records faster than a read takes (about 1 GB/s
 * from one thread that does nothing but allocate), so the ring is never left
 * alone meanwhile: at attach a thread keeps it drained into a bounded list
 * that is applied after the read; at the end the ring is drained between the
 * tries of the read. Records lost before a read are in the state it reads,
 * and those lost after the final cut are past the snapshot's moment: only
 * the ones lost in between make the figures inexact (session_refresh).
 */
#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../os/remote.h"
#include "cut_read.h"
#include "session.h"
#include "internal.h"

/* Tries of a read during which no heap moves; a busy target rarely gives
 * one, and the read is then flagged (exact: false, with the reason). */
/* How long a read waits for every heap to answer or stand still: a thread
 * that runs outside the allocator stands still for it after 2 ms of its CPU
 * (cut_read.c), which a 2-core machine under load gives within this. */
#define READ_WAIT_MS 2000
#define READ_WAIT_EXITING_MS 300 /* after SIGINT: a read takes two tries at least */
/* Tries of a view's cut before it is shown torn (and called inexact). */
#define CUT_TRIES 3
/* Rings' worth of messages taken to reach a cut or drain what is there: a
 * busy target refills the ring while it is taken. */
#define CUT_RINGS 4
/* The thread list of a running target: grown from, up to. */
#define THREADS_CAP_FIRST 4096
#define THREADS_CAP_MAX (1 << 22)
/* Torn cuts in a row a view skips before it shows one (flagged). */
#define CUT_SKIP_MAX 4
/* The longest the read at attach waits for the ring to be emptied first. */
#define DRAIN_FIRST_WAIT_MS 200

struct deferred {
	struct deferred *next;
	size_t len, cap;
	char data[];
};

/* Nodes are kept for reuse: a fresh one is page faults to fill (expensive
 * in a VM), and the read and the catch-up cycle through the same few. */
#define DEFER_NODE_BYTES sizeof(struct tally_msg_batch)
#define DEFER_SPARE_MAX 512

static struct deferred *node_get(struct session *s, size_t len)
{
	struct deferred *d = s->spare;

	if (len <= DEFER_NODE_BYTES && d) {
		s->spare = d->next;
		s->nspare--;
		return d;
	}
	size_t cap = len <= DEFER_NODE_BYTES ? DEFER_NODE_BYTES : len;
	d = malloc(sizeof(*d) + cap);
	if (d)
		d->cap = cap;
	return d;
}

/* Under deferred_lock. */
static void node_put(struct session *s, struct deferred *d)
{
	if (d->cap == DEFER_NODE_BYTES && s->nspare < DEFER_SPARE_MAX) {
		d->next = s->spare;
		s->spare = d;
		s->nspare++;
	} else {
		free(d);
	}
}

void session_state_free(struct session *s)
{
	while (s->spare) {
		struct deferred *d = s->spare;
		s->spare = d->next;
		free(d);
	}
	s->nspare = 0;
}

/* An allocator batch: the bulk of what a busy target hands over. */
static bool is_alloc_batch(const void *data, size_t len)
{
	const struct tally_msg_batch *mb = data;

	return len >= sizeof(struct tally_msg_batch) - sizeof(mb->batch.words) &&
	       mb->hdr.kind == TALLY_MSG_BATCH && mb->batch.source == TALLY_SRC_ALLOC;
}

/* An allocator batch that announces an object its samples' frames lie in
 * (TALLY_EV_MODULE): the process announces each once per tracer, so a
 * batch that carries one is never left out, even where its byte records
 * are in the state read (the model skips those and keeps the object). A
 * busy process announces its objects with its first samples, while the
 * probes go in: leaving those batches out left every frame of a late
 * attach's profile <unknown> (an nginx worker under wrk, 1.38 GB). */
static bool batch_announces(const void *data, size_t len)
{
	const struct tally_batch *b = &((const struct tally_msg_batch *)data)->batch;
	size_t room = (len - offsetof(struct tally_msg_batch, batch.words)) / sizeof(b->words[0]);
	uint32_t count = b->count < room ? b->count : (uint32_t)room, pos = 0;
	struct tally_ev e;

	while (!tally_ev_next(b->words, count, &pos, &e))
		if (e.type == TALLY_EV_MODULE)
			return true;
	return false;
}

/* An allocator batch whose records are all in the state read: handed over
 * before the heap's position was read (the model would skip them). */
static bool batch_in_state(const void *data, size_t len)
{
	return is_alloc_batch(data, len) && !batch_announces(data, len);
}

/* The drain thread's side: a message kept aside, while the main thread reads
 * (and then applies the list). An allocator batch that came before the read
 * began is left out (batch_in_state). Bounded: past SESSION_DEFER_MAX the
 * rest is dropped and counted, and the figures say so. */
void session_defer(struct session *s, const void *data, size_t len)
{
	struct deferred *d = NULL;

	if (!__atomic_load_n(&s->reading, __ATOMIC_ACQUIRE) && batch_in_state(data, len))
		return;
	/* the lock only for the lists: the copy is outside it, so that the
	 * read's pruning is never held up behind this thread's loop */
	pthread_mutex_lock(&s->deferred_lock);
	if (s->deferred_bytes + len <= SESSION_DEFER_MAX) {
		d = node_get(s, len);
		if (d)
			s->deferred_bytes += len;
	}
	if (!d)
		s->src.deferred_dropped++;
	pthread_mutex_unlock(&s->deferred_lock);
	if (!d)
		return;
	d->next = NULL;
	d->len = len;
	memcpy(d->data, data, len);
	pthread_mutex_lock(&s->deferred_lock);
	*s->deferred_tail = d;
	s->deferred_tail = &d->next;
	pthread_mutex_unlock(&s->deferred_lock);
}

/* Before another try of the read: the batches kept during the last one came
 * before this one begins. */
static void prune_batches(struct session *s)
{
	pthread_mutex_lock(&s->deferred_lock);
	struct deferred **pp = &s->deferred, *d;
	while ((d = *pp)) {
		if (batch_in_state(d->data, d->len)) {
			*pp = d->next;
			s->deferred_bytes -= d->len;
			node_put(s, d);
		} else {
			pp = &d->next;
		}
	}
	s->deferred_tail = pp;
	pthread_mutex_unlock(&s->deferred_lock);
}

static void *drain_main(void *arg)
{
	struct session *s = arg;

	while (!__atomic_load_n(&s->drain_stop, __ATOMIC_ACQUIRE)) {
		int n = loader_consume(s->loader);
		if (!loader_more(s->loader))
			__atomic_store_n(&s->drain_caught_up, true, __ATOMIC_RELEASE);
		if (n <= 0)
			usleep(1000);
	}
	return NULL;
}

/* After the read: the thread stopped (it finishes the ring's size it may be
 * taking), what it kept is applied. That is quick beside the target's pace
 * (a record costs the model under a nanosecond, the target four), and the
 * list holds only what came during the last try of the read: the ring has
 * room meanwhile. */
static void catch_up(struct session *s, pthread_t drain)
{
	__atomic_store_n(&s->drain_stop, true, __ATOMIC_RELEASE);
	pthread_join(drain, NULL);
	__atomic_store_n(&s->deferring, false, __ATOMIC_RELEASE);
	for (struct deferred *d = s->deferred, *next; d; d = next) {
		next = d->next;
		session_deliver(s, d->data, d->len);
		node_put(s, d);
	}
	s->deferred = NULL;
	s->deferred_tail = &s->deferred;
	s->deferred_bytes = 0;
}

/* Every thread's group: the SDK registry's, and the --group rules' by comm. */
static void read_threads(struct session *s)
{
	struct tally_registry *reg;
	pid_t *tids = NULL;
	int n = 0;

	if (s->registry_addr) {
		reg = malloc(sizeof(*reg));
		if (reg && !remote_registry_read(s->pid, s->registry_addr, reg)) {
			model_seed_registry(&s->model, reg, false);
			for (unsigned i = 0; i < TALLY_MAX_THREADS; i++)
				if (reg->threads[i].tid && reg->threads[i].group)
					loader_set_thread_group(s->loader, s->pid,
								reg->threads[i].tid,
								reg->threads[i].group);
		}
		free(reg);
	}
	/* every thread, however many: a --group rule names them by their comm */
	for (int cap = THREADS_CAP_FIRST; cap <= THREADS_CAP_MAX; cap *= 2) {
		pid_t *more = realloc(tids, (size_t)cap * sizeof(*tids));
		if (!more)
			break;
		tids = more;
		n = target_threads(s->pid, tids, cap);
		if (n < cap)
			break;
	}
	for (int i = 0; i < n; i++) {
		char comm[TALLY_COMM_LEN];
		if (target_comm(s->pid, tids[i], comm, sizeof(comm)))
			continue;
		int32_t g = model_thread_named(&s->model, (uint32_t)tids[i], comm);
		struct model_thread *t = model_thread(&s->model, (uint32_t)tids[i], false);
		if (g >= 0 && t && t->group == 0)
			loader_set_thread_group(s->loader, s->pid, (uint32_t)tids[i], (uint32_t)g);
	}
	free(tids);
}

/* Between two tries of a read: the ring drained (the final read: all of it
 * before the next try, not past its cut), or the attach's deferred batches
 * pruned; and the lost counters noted, just before the try that is kept. */
struct read_wait {
	struct session *s;
	struct tally_lost *lost_before;
	bool drain;
};

static void read_between(void *ctx)
{
	struct read_wait *w = ctx;

	if (w->drain)
		session_drain_ring(w->s);
	else
		prune_batches(w->s);
	loader_lost(w->s->loader, w->lost_before);
}

/* The allocator's state of one moment (cut_read.c). */
static int read_alloc(struct session *s, struct remote_alloc *ra, struct tally_lost *lost_before,
		      bool drain)
{
	struct cut_target t = { s->pid, s->heaps_addr, s->cut_addr };
	struct read_wait w = { s, lost_before, drain };

	loader_lost(s->loader, lost_before);
	return cut_read_figures(&t, session_exiting ? READ_WAIT_EXITING_MS : READ_WAIT_MS,
				read_between, &w, ra);
}

static int read_attach_state(struct session *s)
{
	struct remote_alloc ra;
	int err;

	read_threads(s);
	if (!s->heaps_addr)
		return TALLY_EXIT_OK;
	err = read_alloc(s, &ra, &s->lost_base, false);
	if (err == -ESRCH || !target_alive(s->pid)) {
		if (!err)
			remote_alloc_free(&ra);
		return session_fail(TALLY_EXIT_NO_PROCESS, "process %d exited during attach",
				    s->pid);
	}
	if (err == -EPERM || err == -EACCES)
		return session_fail(TALLY_EXIT_PERM,
				    "cannot read the memory of process %d: %s (another user's "
				    "process: needs CAP_SYS_PTRACE)",
				    s->pid, strerror(-err));
	if (err)
		return session_fail(TALLY_EXIT_FAIL, "cannot read the allocator of %d: %s", s->pid,
				    remote_strerror(err));
	s->src.late_consistent = ra.consistent;
	struct tree_peak_mark k;
	tree_peak_before(&s->model, &k);
	s->model.now_ns = clock_now_ns();
	model_seed_alloc(&s->model, &ra);
	tree_peak_after(&s->tree, &s->model, s->pid, &k, &s->model, s->pid);
	remote_alloc_free(&ra);
	return TALLY_EXIT_OK;
}

int session_read_attach(struct session *s)
{
	pthread_t drain;
	int rc;

	/* nothing of the allocator's to read (glibc mode, --inject, a malloc
	 * tally does not trace): no state the ring's records must wait for.
	 * Kept aside anyway, an injected two-thread churn filled the 64 MiB in
	 * the drain's first 200 ms and the rest was dropped (live below zero) */
	if (!s->heaps_addr) {
		read_threads(s);
		return TALLY_EXIT_OK;
	}
	s->deferred = NULL;
	s->deferred_tail = &s->deferred;
	s->deferred_bytes = 0;
	pthread_mutex_init(&s->deferred_lock, NULL);
	s->deferring = true;
	s->reading = false;
	s->drain_stop = false;
	s->drain_caught_up = false;
	if (pthread_create(&drain, NULL, drain_main, s)) {
		/* no thread: read with the ring left alone (losses counted) */
		s->deferring = false;
		s->reading = true;
		rc = read_attach_state(s);
	} else {
		/* the ring filled while the probes were attached (those records
		 * are in the state about to be read): once emptied, it has room
		 * for what comes during the read */
		for (int i = 0; i < DRAIN_FIRST_WAIT_MS &&
				!__atomic_load_n(&s->drain_caught_up, __ATOMIC_ACQUIRE);
		     i++)
			usleep(1000);
		__atomic_store_n(&s->reading, true, __ATOMIC_RELEASE);
		rc = read_attach_state(s);
		catch_up(s, drain);
	}
	pthread_mutex_destroy(&s->deferred_lock);
	return rc;
}

/* The addresses a started CMD's libraries have, once it has mapped them. */
static void find_started_libs(struct session *s)
{
	if (!s->heaps_addr && (s->spawned || s->execed) &&
	    !target_lib_symbol(s->pid, "libtally_alloc.so", "tally_heaps", s->alloc_path,
			       sizeof(s->alloc_path), &s->heaps_addr) &&
	    target_lib_symbol(s->pid, "libtally_alloc.so", "tally_cut", s->alloc_path,
			      sizeof(s->alloc_path), &s->cut_addr))
		s->cut_addr = 0;
	if (!s->registry_addr && (s->spawned || s->execed))
		target_lib_symbol(s->pid, "libtally.so", "tally_registry", s->sdk_path,
				  sizeof(s->sdk_path), &s->registry_addr);
}

/* A view's tick is a cut: each heap's position and pending records read at
 * one moment (a few microseconds for all), the ring taken until every batch
 * handed over before then is in, and records past that moment held back
 * until session_cut_end. Without it a view mixed, say, one thread's frees
 * (handed over) with another's allocations of those blocks (still pending):
 * negative live bytes in a frame. */
static bool take_cut(struct session *s)
{
	struct remote_alloc ra;
	bool whole = true;

	struct cut_target t = { s->pid, s->heaps_addr, s->cut_addr };
	if (cut_read_positions(&t, &ra))
		return false;
	model_hold(&s->model);
	for (uint32_t i = 0; i < ra.nheaps; i++)
		model_hold_at(&s->model, ra.heaps[i].id, ra.heaps[i].seq_first, ra.heaps[i].pos);
	/* on_msg stops a consume once nothing is awaited */
	s->cutting = true;
	for (int i = 0; i < CUT_RINGS && s->model.waiting; i++)
		if (loader_consume(s->loader) <= 0)
			break;
	s->cutting = false;
	for (uint32_t i = 0; i < ra.nheaps; i++) {
		struct remote_heap *h = &ra.heaps[i];
		/* a copy a flush tore holds words of another batch than its seq
		 * says: those records come through the ring instead */
		if (h->whole)
			session_apply_pending(s, &s->model, s->pid, h);
		if (!model_hold_reached(&s->model, h->id, h->pos))
			whole = false;
	}
	remote_alloc_free(&ra);
	return whole;
}

/* What a true cut always is: every term of the identity and every group's
 * live bytes at least 0, and the identity balanced. The heaps' positions are
 * read one after the other (microseconds apart): a thread that frees, in
 * that gap, a block another allocated after its heap was read tears the cut,
 * and this is how it shows. */
static bool cut_plausible(const struct model *m)
{
	struct tally_stats st;

	model_stats(m, &st);
	if (!tally_stats_balanced(&st))
		return false;
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		if (m->replay.groups[g].alloc_bytes < m->replay.groups[g].dealloc_bytes)
			return false;
	return true;
}

void session_cut_begin(struct session *s)
{
	s->src.cut_torn = false;
	if (s->gone)
		return;
	find_started_libs(s);
	if (!s->heaps_addr)
		return;
	for (int tries = 0; tries < CUT_TRIES; tries++) {
		if (tries)
			session_cut_end(s);
		bool whole = take_cut(s);
		s->src.cut_torn = !whole || !cut_plausible(&s->model);
		if (!s->src.cut_torn || !s->model.holding)
			break;
	}
}

bool session_cut_shown(struct session *s)
{
	if (!s->src.cut_torn) {
		s->torn_in_a_row = 0;
		return true;
	}
	/* a torn cut is not shown; a target that never gives another (hostile,
	 * or a pipeline faster than the read) is shown, flagged, now and then */
	if (++s->torn_in_a_row <= CUT_SKIP_MAX)
		return false;
	s->torn_in_a_row = 0;
	return true;
}

/* A copy of the message at the end of a list; false without memory. */
static bool hold_append(struct session *s, struct deferred ***tail, const void *data, size_t len)
{
	struct deferred *d = node_get(s, len);

	if (!d)
		return false;
	d->next = NULL;
	d->len = len;
	memcpy(d->data, data, len);
	**tail = d;
	*tail = &d->next;
	return true;
}

/* Called by session_deliver for a batch the model held back in part. */
void session_hold_keep(struct session *s, const void *data, size_t len)
{
	if (!hold_append(s, &s->held_tail, data, len))
		s->model.malformed++; /* counted: the figures say they are not exact */
}

/* A message of another process of the tree, while the root's figures are
 * held at a view's cut with some of its messages kept aside: its fork, or
 * what its child said since, waits for them (session_cut_end delivers it). */
void session_hold_tree(struct session *s, const void *data, size_t len)
{
	if (!hold_append(s, &s->tree_held_tail, data, len))
		s->tree.strays++; /* counted: the figures say they are not exact */
}

void session_cut_end(struct session *s)
{
	struct deferred *d = s->held;

	if (!s->model.holding)
		return;
	model_release(&s->model);
	s->held = NULL;
	s->held_tail = &s->held;
	while (d) {
		struct deferred *next = d->next;
		/* the rest of a message the model and the observer had already */
		s->model.received--;
		session_apply(s, &s->model, s->pid, d->data, d->len);
		node_put(s, d);
		d = next;
	}
	/* then what the tree's other processes said meanwhile, in order */
	d = s->tree_held;
	s->tree_held = NULL;
	s->tree_held_tail = &s->tree_held;
	while (d) {
		struct deferred *next = d->next;
		session_deliver(s, d->data, d->len);
		node_put(s, d);
		d = next;
	}
}

void session_read_final(struct session *s)
{
	struct remote_alloc ra;
	struct tally_lost before;

	find_started_libs(s);
	if (s->heaps_addr && !read_alloc(s, &ra, &before, true)) {
		s->src.final_consistent = ra.consistent;
		/* the snapshot is of this moment: records after it, still on
		 * their way through the ring, stay out (session_finish drains) */
		for (uint32_t i = 0; i < ra.nheaps; i++)
			model_cut(&s->model, ra.heaps[i].id, ra.heaps[i].pos);
		s->model.cut = true;
		/* a record lost while the read ran may be before its heap's cut */
		loader_lost(s->loader, &s->lost_cut);
		s->have_lost_cut = true;
		session_end_pending(s, &s->model, s->pid, &ra);
		s->src.final_inprocess = ra.stats;
		s->src.have_final_inprocess = true;
		remote_alloc_free(&ra);
		if (!target_alloc_resident(s->pid, &s->src.resident))
			s->src.have_resident = true;
	}
	if (s->registry_addr) {
		struct tally_registry *reg = malloc(sizeof(*reg));
		if (reg && !remote_registry_read(s->pid, s->registry_addr, reg))
			model_seed_registry(&s->model, reg, true);
		free(reg);
	}
}

void session_drain_ring(struct session *s)
{
	/* a ring's size at most per call: what is in it now takes two */
	for (int i = 0; i < CUT_RINGS && loader_consume(s->loader) > 0; i++)
		;
}

/* The batches each heap of m handed over before ra was read, still in the
 * ring, taken in: the pending records read come after them (the model
 * leaves those to the ring otherwise, and an owner asleep never hands them
 * over). A ring's size at most, as session_drain_ring. */
void session_await_batches(struct session *s, struct model *m, const struct remote_alloc *ra)
{
	for (int i = 0; i < CUT_RINGS; i++) {
		bool in = true;
		for (uint32_t k = 0; in && k < ra->nheaps; k++) {
			const struct remote_heap *h = &ra->heaps[k];
			in = !h->whole ||
			     model_hold_reached(m, h->id,
						h->seq_first < h->pos ? h->seq_first : h->pos);
		}
		if (in || loader_consume(s->loader) <= 0)
			break;
	}
}

/* The end's cut, once m's limits are set (model_cut): the batches in the
 * ring from before the read, then the pending records. */
void session_end_pending(struct session *s, struct model *m, pid_t pid, struct remote_alloc *ra)
{
	session_await_batches(s, m, ra);
	for (uint32_t k = 0; k < ra->nheaps; k++)
		if (ra->heaps[k].whole)
			session_apply_pending(s, m, pid, &ra->heaps[k]);
}
