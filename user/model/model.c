// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The rebuild of everything tally reports, from the ring buffer's messages
 * (bpf/contract/tally_events.h). Allocator records go through the replay; each heap's
 * records are numbered, so that those already counted in a state read from
 * memory (late attach, or pending records read at the end) are applied once.
 */
#include <errno.h>
#include <fnmatch.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"
#include "../util/grow.h"

void model_init(struct model *m)
{
	memset(m, 0, sizeof(*m));
	tally_replay_init(&m->replay);
	gpu_init(&m->gpu);
	strcpy(m->groups[0].name, "root");
	m->groups[0].known = true;
}

void model_free(struct model *m)
{
	gpu_free(&m->gpu);
	sites_free(&m->sites);
	free(m->threads);
	free(m->heaps);
	m->threads = NULL;
	m->heaps = NULL;
	m->nthreads = m->nheaps = 0;
}

static int group_by_name(const struct model *m, const char *name)
{
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		if (m->groups[g].known && !strcmp(m->groups[g].name, name))
			return (int)g;
	return -1;
}

/* A glob fnmatch reads as the user meant: every '[' closed (fnmatch would
 * take an unclosed one as a literal, and the rule would never match). */
static bool glob_valid(const char *g)
{
	for (const char *c = g; *c; c++) {
		if (*c == '\\' && c[1]) {
			c++;
			continue;
		}
		if (*c != '[')
			continue;
		const char *e = c + 1;
		if (*e == '!' || *e == '^')
			e++;
		if (*e == ']')
			e++; /* a ']' first in the set is one of its members */
		while (*e && *e != ']')
			e++;
		if (!*e)
			return false;
		c = e;
	}
	return true;
}

int model_add_rule(struct model *m, const char *spec)
{
	const char *eq = strchr(spec, '=');
	struct model_rule *r;
	int g;

	if (!eq || eq == spec || !eq[1] || (size_t)(eq - spec) >= TALLY_GROUP_NAME_MAX ||
	    strlen(eq + 1) >= sizeof(r->glob) || !glob_valid(eq + 1))
		return -EINVAL;
	if (m->nrules == MODEL_MAX_RULES)
		return -ENOSPC;
	r = &m->rules[m->nrules];
	memcpy(r->name, spec, (size_t)(eq - spec));
	r->name[eq - spec] = 0;
	strcpy(r->glob, eq + 1);
	g = group_by_name(m, r->name);
	if (g < 0) {
		/* ids from the top, where the SDK (counting up from 1) is last to reach */
		for (g = TALLY_MAX_GROUPS - 1; g > 0 && m->groups[g].known; g--)
			;
		if (g == 0)
			return -ENOSPC;
		strcpy(m->groups[g].name, r->name);
		m->groups[g].known = true;
		m->groups[g].rule = true;
	}
	r->group = (uint32_t)g;
	m->nrules++;
	return 0;
}

struct model_thread *model_thread(struct model *m, uint32_t tid, bool create)
{
	for (size_t i = 0; i < m->nthreads; i++)
		if (m->threads[i].tid == tid)
			return &m->threads[i];
	if (!create)
		return NULL;
	if (grow((void **)&m->threads, &m->cap_threads, m->nthreads + 1, sizeof(*m->threads), 64))
		return NULL;
	struct model_thread *t = &m->threads[m->nthreads++];
	memset(t, 0, sizeof(*t));
	t->tid = tid;
	t->rule_group = -1;
	t->alive = true;
	return t;
}

uint32_t model_thread_group(const struct model_thread *t)
{
	if (t->group == 0 && t->rule_group >= 0)
		return (uint32_t)t->rule_group;
	return t->group;
}

int32_t model_thread_named(struct model *m, uint32_t tid, const char *comm)
{
	struct model_thread *t = model_thread(m, tid, true);

	if (!t)
		return -1;
	strncpy(t->comm, comm, sizeof(t->comm) - 1);
	t->comm[sizeof(t->comm) - 1] = 0;
	t->rule_group = -1;
	for (unsigned i = 0; i < m->nrules; i++) {
		if (!fnmatch(m->rules[i].glob, t->comm, 0)) {
			t->rule_group = (int32_t)m->rules[i].group;
			break;
		}
	}
	return t->rule_group;
}

static struct model_heap *model_heap(struct model *m, uint64_t id)
{
	for (size_t i = 0; i < m->nheaps; i++)
		if (m->heaps[i].id == id)
			return &m->heaps[i];
	if (grow((void **)&m->heaps, &m->cap_heaps, m->nheaps + 1, sizeof(*m->heaps), 16))
		return NULL;
	struct model_heap *h = &m->heaps[m->nheaps++];
	/* made after the cut: all past it */
	*h = (struct model_heap){ .id = id, .limit = m->cut || m->holding ? 0 : UINT64_MAX };
	return h;
}

void model_cut(struct model *m, uint64_t heap_id, uint64_t pos)
{
	struct model_heap *h = model_heap(m, heap_id);

	if (h)
		h->limit = pos;
}

void model_hold(struct model *m)
{
	m->holding = true;
	m->waiting = 0;
	for (size_t i = 0; i < m->nheaps; i++) {
		m->heaps[i].limit = 0;
		m->heaps[i].wait = 0;
	}
}

void model_hold_at(struct model *m, uint64_t heap_id, uint64_t seq_first, uint64_t pos)
{
	struct model_heap *h = model_heap(m, heap_id);

	if (!h)
		return;
	h->limit = pos;
	/* its batches before seq_first are in the ring, or were applied */
	if (h->done < seq_first && !h->wait)
		m->waiting++;
	h->wait = seq_first;
}

bool model_hold_reached(const struct model *m, uint64_t heap_id, uint64_t pos)
{
	for (size_t i = 0; i < m->nheaps; i++)
		if (m->heaps[i].id == heap_id)
			return m->heaps[i].done >= pos || m->heaps[i].applied >= pos;
	return false;
}

void model_release(struct model *m)
{
	m->holding = false;
	m->waiting = 0;
	for (size_t i = 0; i < m->nheaps; i++) {
		m->heaps[i].limit = m->cut ? m->heaps[i].limit : UINT64_MAX;
		m->heaps[i].wait = 0;
	}
}

/* The sites' replay (models move). */
static void sites_bind(struct model *m, const struct tally_replay *r)
{
	m->sites.clock = r;
}

/* Malloc's and free's one-word records, nearly all of them: applied
 * without decoding to struct tally_ev, so the consumer keeps up with a busy
 * target. A record it cannot decode counts as malformed and ends the
 * batch. */
void model_apply_records(struct model *m, uint64_t heap_id, uint64_t seq_first, uint32_t tid,
			 const __u64 *words, uint32_t count)
{
	struct model_heap *h = model_heap(m, heap_id);
	struct model_thread *t = model_thread(m, tid, false);
	int32_t rule = t ? t->rule_group : -1;
	uint32_t pos = 0;

	m->saw_alloc = true;
	if (!h) {
		m->malformed++;
		return;
	}
	sites_bind(m, &m->replay);
	/* records already in a state read from memory */
	while (pos < count && seq_first + pos < h->applied) {
		struct tally_ev e;
		uint32_t at = pos;
		if (tally_ev_next(words, count, &pos, &e)) {
			m->malformed++;
			return;
		}
		/* in the state read, but not in its profile: a process's objects
		 * are announced once. Not those applied already (pending at a
		 * cut, or a held batch's part below it): a sample freed since
		 * came back live, the sites' in-use drifting past live (a rate-1
		 * pipeline: 2.52 MB over the sites, 1.99 MB live) */
		if (tally_ev_is_sample(e.type) && seq_first + at < h->seeded)
			sites_on_record(&m->sites, &e, &words[at + 2]);
		m->skipped++;
	}
	/* records past the final cut: counted, not applied; past a view's
	 * cut (holding): applied when it is released, the caller keeps the
	 * message (held), and those below it are marked in */
	bool truncated = false;
	if (seq_first + count > h->limit) {
		uint32_t keep = seq_first >= h->limit ? 0 : (uint32_t)(h->limit - seq_first);
		if (m->holding)
			m->held = true;
		else
			m->past_cut += count - (keep > pos ? keep : pos);
		if (keep < count) {
			count = keep > pos ? keep : pos;
			truncated = m->holding;
		}
	}
	uint64_t applied = 0, refused = 0;
	const uint64_t before[3] = { m->replay.peak.seq, m->replay.peak_mapped.seq,
				     m->replay.live_moves };
	m->replay.on_sample = sites_on_record;
	m->replay.sample_ctx = &m->sites;
	int err = tally_replay_words(&m->replay, words, pos, count, rule, &applied, &refused);
	model_peak_note(m, h, before);
	m->records += applied;
	m->malformed += refused + (err ? 1 : 0);
	if (err)
		return;
	/* a batch across the cut: its part below is in (one wholly past it
	 * marks nothing) */
	if (truncated && seq_first < h->limit && h->applied < h->limit)
		h->applied = h->limit;
}

void model_apply_pending(struct model *m, uint64_t heap_id, uint64_t seq_first, uint32_t tid,
			 const __u64 *words, uint32_t count)
{
	struct model_heap *h = model_heap(m, heap_id);

	/* batches before these are still on their way through the ring (or
	 * came out of order): applied now, these would set the watermark past
	 * records not yet applied, which would then be skipped. They come
	 * through the ring in their batch instead. */
	if (h && seq_first > h->done)
		return;
	/* those the ring brought already (a full batch is read pending just
	 * before its flush; the ring's copy may be in first) */
	if (h && h->applied < h->done)
		h->applied = h->done;
	model_apply_records(m, heap_id, seq_first, tid, words, count);
	/* when the batch they sit in is handed over later, they are in already */
	h = model_heap(m, heap_id);
	if (h && h->applied < seq_first + count)
		h->applied = seq_first + count;
}

/* One of the CUPTI library's records: GPU records only, a kernel's name in
 * the words after its KERNEL_NAME record. */
static void gpu_record(void *arg, const struct tally_ev *e, const __u64 *name)
{
	struct model *m = arg;

	if (gpu_apply(&m->gpu, GPU_SRC_CUPTI, e, name))
		m->malformed++;
	else
		m->records++;
	if (e->group && e->group < TALLY_MAX_GROUPS)
		m->groups[e->group].known = true;
}

static int apply_batch(struct model *m, const struct tally_msg_batch *mb, size_t len)
{
	const struct tally_batch *b = &mb->batch;
	const __u32 sources = TALLY_SRC_BIT(TALLY_SRC_ALLOC) | TALLY_SRC_BIT(TALLY_SRC_CUPTI) |
			      TALLY_SRC_BIT(TALLY_SRC_INTERPOSE);
	uint64_t valid = tally_msg_batch_valid(mb, len);

	if (!valid || tally_batch_check(b, valid, sources))
		return -EINVAL;
	if (b->source == TALLY_SRC_CUPTI)
		return tally_replay_each(b, valid, TALLY_SRC_BIT(TALLY_SRC_CUPTI), gpu_record, m);
	if (b->source == TALLY_SRC_INTERPOSE) {
		struct model_thread *t = model_thread(m, b->tid, false);
		sites_bind(m, NULL); /* glibc's figures: no replay, no peak */
		int n = injected_apply(&m->injected, b->words, b->count, t ? t->rule_group : -1,
				       sites_on_record, &m->sites);
		if (n < 0)
			return n;
		m->records += (uint64_t)n;
		return 0;
	}
	/* TALLY_SRC_ALLOC, the last of `sources` */
	model_apply_records(m, b->heap_id, b->seq_first, b->tid, b->words, b->count);
	/* every record below `done` is in: the ring's batches, in order (up
	 * to a view's cut while it holds) */
	struct model_heap *h = model_heap(m, b->heap_id);
	uint64_t end = b->seq_first + b->count;
	if (h && m->holding && end > h->limit)
		end = h->limit > b->seq_first ? h->limit : b->seq_first;
	if (h && b->seq_first <= h->done && h->done < end) {
		if (h->wait && h->done < h->wait && end >= h->wait)
			m->waiting--;
		h->done = end;
	}
	return 0;
}

/* The SDK named group g. A --group rule's group with that id keeps its name
 * (the user asked for it); the two are merged from here on, which the
 * snapshot calls inexact (collided_id). */
static void sdk_group_named(struct model *m, uint32_t g, const char *name)
{
	struct model_group *mg = &m->groups[g];

	if (mg->rule) {
		if (!m->collided_id && strncmp(mg->name, name, TALLY_GROUP_NAME_MAX)) {
			m->collided_id = g;
			memcpy(m->collided_sdk, name, TALLY_GROUP_NAME_MAX);
			m->collided_sdk[TALLY_GROUP_NAME_MAX - 1] = 0;
		}
		return;
	}
	memcpy(mg->name, name, TALLY_GROUP_NAME_MAX);
	mg->name[TALLY_GROUP_NAME_MAX - 1] = 0;
	mg->known = true;
}

static int apply_group(struct model *m, const struct tally_msg_group *g)
{
	struct model_thread *t;

	if (g->group >= TALLY_MAX_GROUPS)
		return -EINVAL;
	switch (g->hdr.kind) {
	case TALLY_MSG_GROUP_REGISTER:
		sdk_group_named(m, g->group, g->name);
		break;
	case TALLY_MSG_GROUP_ENTER:
	case TALLY_MSG_GROUP_EXIT:
		t = model_thread(m, g->hdr.tid, true);
		if (t)
			t->group = g->group;
		m->groups[g->group].occupied = true;
		break;
	case TALLY_MSG_YIELD:
		m->groups[g->group].yields++;
		break;
	case TALLY_MSG_REJECT:
		m->groups[g->group].rejects++;
		break;
	}
	return 0;
}

static int apply_thread(struct model *m, const struct tally_msg_thread *th)
{
	char comm[TALLY_COMM_LEN];
	struct model_thread *t;

	memcpy(comm, th->comm, sizeof(comm));
	comm[sizeof(comm) - 1] = 0;
	switch (th->hdr.kind) {
	case TALLY_MSG_THREAD_NAME:
		if (th->hdr.flags & TALLY_THREAD_EXEC)
			model_exec(m);
		model_thread_named(m, th->hdr.tid, comm);
		break;
	case TALLY_MSG_THREAD_NEW:
		model_thread_named(m, th->hdr.tid, comm);
		break;
	case TALLY_MSG_THREAD_EXIT:
		t = model_thread(m, th->hdr.tid, false);
		if (t)
			t->alive = false;
		if (th->hdr.flags & TALLY_THREAD_GROUP_DEAD) {
			m->exited = true;
			m->exit_status = (int)th->parent_tid;
		}
		break;
	}
	return 0;
}

/* The OOM killer chose the process: what it saw then; the cgroups' paths are
 * the session's to fill (struct model_oom). */
static int apply_oom(struct model *m, const struct tally_msg_oom *o)
{
	memset(&m->oom, 0, sizeof(m->oom));
	m->oom.msg = *o;
	m->oom.msg.comm[TALLY_COMM_LEN - 1] = 0;
	m->oom.killed = true;
	return 0;
}

int model_apply(struct model *m, const void *data, size_t len)
{
	const struct tally_msg *hdr = data;
	int err = -EINVAL;

	m->received++;
	if (len < sizeof(*hdr))
		goto out;
	if (hdr->ts_ns > m->now_ns)
		m->now_ns = hdr->ts_ns;
	switch (hdr->kind) {
	case TALLY_MSG_BATCH:
		err = apply_batch(m, data, len);
		break;
	case TALLY_MSG_GROUP_REGISTER:
	case TALLY_MSG_GROUP_ENTER:
	case TALLY_MSG_GROUP_EXIT:
	case TALLY_MSG_YIELD:
	case TALLY_MSG_REJECT:
		if (len >= sizeof(struct tally_msg_group))
			err = apply_group(m, data);
		break;
	case TALLY_MSG_THREAD_NEW:
	case TALLY_MSG_THREAD_EXIT:
	case TALLY_MSG_THREAD_NAME:
		if (len >= sizeof(struct tally_msg_thread))
			err = apply_thread(m, data);
		break;
	case TALLY_MSG_GPU:
		if (len >= sizeof(struct tally_msg_gpu)) {
			const struct tally_msg_gpu *gm = data;
			err = gpu_apply(&m->gpu, GPU_SRC_DRIVER, &gm->ev, NULL);
			if (!err && gm->ev.group)
				m->groups[gm->ev.group].known = true;
		}
		break;
	case TALLY_MSG_OOM:
		if (len >= sizeof(struct tally_msg_oom))
			err = apply_oom(m, data);
		break;
	case TALLY_MSG_STATS:
		if (len >= sizeof(struct tally_msg_stats)) {
			const struct tally_msg_stats *s = data;
			memcpy(m->inprocess, s->stats, sizeof(m->inprocess));
			m->resident_at_exit = s->resident;
			m->have_inprocess = true;
			m->inprocess_threads_held = s->hdr.flags & TALLY_STATS_THREADS_HELD;
			m->saw_alloc = true;
			err = 0;
		}
		break;
	}
out:
	if (err)
		m->malformed++;
	return err;
}

void model_seed_alloc(struct model *m, const struct remote_alloc *ra)
{
	const struct tally_stats *s = &ra->stats;
	struct tally_replay *r = &m->replay;

	r->mapped = (int64_t)s->mapped;
	r->live = (int64_t)s->live;
	r->rounding = (int64_t)s->rounding;
	r->cache = (int64_t)s->cache;
	r->span_free = (int64_t)s->span_free;
	r->returned = (int64_t)s->returned;
	r->virgin = (int64_t)s->virgin;
	r->hysteresis = (int64_t)s->hysteresis;
	r->segment_overhead = (int64_t)s->segment_overhead;
	r->large_count = (int64_t)s->large_count;
	r->spans_assigned = (int64_t)s->spans_assigned;
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++) {
		const struct tally_group_stats *gs = &ra->groups[g];
		r->groups[g].alloc_bytes = (int64_t)gs->allocated_bytes;
		r->groups[g].alloc_objs = (int64_t)gs->allocated_objects;
		r->groups[g].dealloc_bytes = (int64_t)gs->deallocated_bytes;
		r->groups[g].dealloc_objs = (int64_t)gs->deallocated_objects;
		if (gs->allocated_objects)
			m->groups[g].known = true;
	}
	/* without it, blocks from before the attach are not named: not fatal */
	sites_seed(&m->sites, r);
	/* the peaks are those since this read: what came before it is not known */
	model_peak_restart(m);
	m->peak_seeded = true;
	for (uint32_t i = 0; i < ra->nheaps; i++) {
		struct model_heap *h = model_heap(m, ra->heaps[i].id);
		if (h && h->applied < ra->heaps[i].pos)
			h->applied = h->seeded = ra->heaps[i].pos;
		if (h && h->done < ra->heaps[i].pos)
			h->done = ra->heaps[i].pos;
	}
	m->saw_alloc = true;
}

void model_seed_registry(struct model *m, const struct tally_registry *reg, bool absolute)
{
	/* threads beyond the registry's slots: their groups are not known */
	if (reg->threads_dropped)
		m->registry_threads_dropped = reg->threads_dropped;
	for (uint32_t g = 0; g < reg->ngroups && g < TALLY_MAX_GROUPS; g++) {
		if (!reg->names[g][0])
			continue;
		sdk_group_named(m, g, reg->names[g]);
	}
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++) {
		if (absolute || !m->groups[g].yields)
			m->groups[g].yields = reg->yields[g];
		if (absolute || !m->groups[g].rejects)
			m->groups[g].rejects = reg->rejects[g];
	}
	for (unsigned i = 0; i < TALLY_MAX_THREADS; i++) {
		const struct tally_registry_thread *rt = &reg->threads[i];
		if (!rt->tid || rt->group >= TALLY_MAX_GROUPS)
			continue;
		struct model_thread *t = model_thread(m, rt->tid, true);
		if (t)
			t->group = rt->group;
		m->groups[rt->group].occupied = true;
	}
}

static const struct model_heap *heap_find(const struct model *m, uint64_t id)
{
	for (size_t i = 0; i < m->nheaps; i++)
		if (m->heaps[i].id == id)
			return &m->heaps[i];
	return NULL;
}

bool model_preview(const struct model *m, const struct remote_alloc *ra, struct tally_replay *out)
{
	*out = m->replay;
	out->on_sample = NULL; /* figures only: the model's sites stay as they are */
	for (uint32_t i = 0; i < ra->nheaps; i++) {
		const struct remote_heap *h = &ra->heaps[i];
		const struct model_heap *mh = heap_find(m, h->id);
		uint64_t in = mh ? (mh->done > mh->applied ? mh->done : mh->applied) : 0;
		if (in >= h->pos)
			continue; /* all in, from the ring */
		/* a torn copy, or batches before it still on their way */
		if (!h->whole || in < h->seq_first || in - h->seq_first > h->npending)
			return false;
		const struct model_thread *t = NULL;
		for (size_t k = 0; k < m->nthreads && !t; k++)
			if (m->threads[k].tid == h->tid)
				t = &m->threads[k];
		uint64_t applied = 0, refused = 0;
		if (tally_replay_words(out, h->pending, (uint32_t)(in - h->seq_first), h->npending,
				       t ? t->rule_group : -1, &applied, &refused) ||
		    refused)
			return false;
	}
	return true;
}

void model_stats(const struct model *m, struct tally_stats *out)
{
	tally_replay_stats(&m->replay, out);
}
