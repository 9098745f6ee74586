// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The peaks' moments (model.h, docs/DESIGN.md §11). The replay keeps the
 * highest live and mapped record by record, with the whole figures there;
 * this says when that was and whether it was one moment of the process.
 *
 * Why a flag and not always "exact": each heap's records are in its own
 * order, but two heaps' records of the same interval come in two batches,
 * applied one after the other. The replay's running sum is then a
 * staircase: heap A's records over heap B's figures as of B's last batch.
 * Where B moved live within the window of A's batch that holds the peak,
 * that sum was not the process's at any moment, and the peak may be over
 * or under the true one by what B moved. A single-threaded program, or
 * one whose other threads only allocate while the peak's thread is idle,
 * is exact; the threads that move no live byte (the purger, a thread
 * blocked in read()) never cross a window.
 */
#include "figures.h"
#include "model.h"

/* One peak's moment: a new one in heap h's records, or another heap's
 * records that moved live in its window. */
static void note(const struct model *m, struct model_peak *pk, const struct model_heap *h,
		 bool fresh, bool moved)
{
	const uint64_t now = m->now_ns, from = h->handed_ns;

	if (fresh) {
		*pk = (struct model_peak){ now, from, h->id, false };
		for (size_t i = 0; i < m->nheaps; i++)
			if (m->heaps[i].id != h->id && m->heaps[i].moved_ns &&
			    m->heaps[i].moved_ns >= from)
				pk->crossed = true;
	} else if (moved && h->id != pk->heap && from <= pk->at_ns) {
		pk->crossed = true;
	}
}

void model_peak_note(struct model *m, struct model_heap *h, const uint64_t before[3])
{
	const struct tally_replay *r = &m->replay;
	const bool moved = r->live_moves != before[2];

	note(m, &m->peak, h, r->peak.seq > before[0], moved);
	note(m, &m->peak_mapped, h, r->peak_mapped.seq > before[1], moved);
	if (m->now_ns > h->handed_ns)
		h->handed_ns = m->now_ns;
	if (moved && m->now_ns > h->moved_ns)
		h->moved_ns = m->now_ns;
}

void model_peak_restart(struct model *m)
{
	tally_replay_mark_now(&m->replay);
	m->peak = m->peak_mapped = (struct model_peak){ m->now_ns, m->now_ns, 0, false };
}

static void peak_of(struct figures_peak *out, const struct tally_replay_mark *k,
		    const struct model_peak *at, bool seeded)
{
	struct tally_stats st;

	tally_replay_mark_stats(k, &st);
	out->known = true;
	out->exact = !at->crossed;
	out->since_attach = seeded;
	out->at_ns = at->at_ns;
	out->from_ns = at->from_ns;
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
		out->v[i] = (int64_t)((const uint64_t *)&st)[i]; /* (its fields in order) */
}

void figures_build_peak(struct figures_process *p, const struct model *m,
			const struct figures_sources *src)
{
	if (src->allocator != FIGURES_ALLOC_TALLY || !m->saw_alloc)
		return;
	peak_of(&p->peak, &m->replay.peak, &m->peak, m->peak_seeded);
	peak_of(&p->peak_mapped, &m->replay.peak_mapped, &m->peak_mapped, m->peak_seeded);
	for (unsigned i = 0; i < p->ngroups; i++)
		p->groups[i].peak_live = tally_replay_group_peak(&m->replay, p->groups[i].id);
}
