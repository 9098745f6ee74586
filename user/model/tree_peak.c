// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The tree's peak (tree.h, docs/DESIGN.md §11). The session calls
 * tree_peak_before and tree_peak_after around everything that changes a
 * model's live (a message, pending records read at a cut, a seed at an
 * attach, a fork), and tree_peak_gone at a process's end: the tree's live
 * is then kept by deltas, O(1) a message, and the list of processes is
 * taken only at a new peak.
 *
 * Within one message a process's live may rise and fall; its own peak
 * (the replay's, record by record) is the one crest of it tally knows, so
 * a message that moved that peak offers the tree its crest, the others
 * their end. The tree's peak is exact when it is a process's own crest,
 * one moment of that process, while every other process holding live
 * bytes had moved none since before that crest's window: two processes'
 * records, like two heaps', come in batches whose order between them is
 * not known.
 */
#include <stdio.h>
#include <string.h>

#include "tree.h"

/* Process m's groups at the peak (its crest's when crest), summed by name. */
static void take_groups(struct figures_tree_peak *pk, const struct model *m, bool crest)
{
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		const struct tally_replay *r = &m->replay;
		int64_t live = crest ? tally_replay_group_peak(r, g) :
				       r->groups[g].alloc_bytes - r->groups[g].dealloc_bytes;
		const char *name = m->groups[g].name[0] ? m->groups[g].name : g ? NULL : "root";
		if (!live || !name)
			continue;
		unsigned i = 0;
		while (i < pk->ngroups && strcmp(pk->groups[i].name, name))
			i++;
		if (i == FIGURES_PEAK_GROUPS) {
			pk->groups_more++;
			continue;
		}
		if (i == pk->ngroups) {
			snprintf(pk->groups[i].name, sizeof(pk->groups[i].name), "%s", name);
			pk->groups[i].live = 0;
			pk->ngroups++;
		}
		pk->groups[i].live += live;
	}
}

/* The processes' live at the peak, largest first: pid's from its crest;
 * their mapped and groups then. Returns whether another process moved
 * live at or after since_ns. */
static bool take_procs(struct figures_tree_peak *pk, const struct tree *t, const struct model *root,
		       pid_t root_pid, pid_t pid, int64_t crest, bool crested, uint64_t since_ns)
{
	size_t n = 1 + t->n;
	bool crossed = false;

	pk->nprocs = pk->more = pk->ngroups = pk->groups_more = 0;
	pk->mapped = 0;
	for (size_t i = 0; i < n; i++) {
		const struct model *m = i ? t->procs[i - 1].m : root;
		pid_t p = i ? t->procs[i - 1].pid : root_pid;
		if (!m)
			continue;
		int64_t live = p == pid ? crest : tree_model_live(m);
		if (live <= 0)
			continue;
		const bool at_crest = p == pid && crested;
		pk->mapped += at_crest ? m->replay.peak.mapped : m->replay.mapped;
		take_groups(pk, m, at_crest);
		crossed |= p != pid && m->live_moved_ns >= since_ns;
		/* insertion into the sorted list; the smallest drops off the end */
		unsigned at = pk->nprocs;
		while (at > 0 && pk->procs[at - 1].live < live)
			at--;
		if (at >= FIGURES_PEAK_PROCS) {
			pk->more++;
			continue;
		}
		if (pk->nprocs == FIGURES_PEAK_PROCS)
			pk->more++;
		else
			pk->nprocs++;
		memmove(&pk->procs[at + 1], &pk->procs[at],
			(pk->nprocs - 1 - at) * sizeof(pk->procs[0]));
		pk->procs[at].pid = (int32_t)p;
		pk->procs[at].live = live;
	}
	return crossed;
}

void tree_peak_after(struct tree *t, const struct model *m, pid_t pid,
		     const struct tree_peak_mark *k, const struct model *root, pid_t root_pid)
{
	const int64_t live = tree_model_live(m);
	const bool crested = m->saw_alloc && m->replay.peak.seq > k->seq;
	const int64_t crest = crested ? m->replay.peak.live : live;
	const int64_t others = t->live - k->live;

	t->live = others + live;
	/* another process's records that moved live in the peak's window,
	 * come since: the peak was not one moment */
	if (t->peak.known && pid != t->peak.pid && m->live_moved_ns != k->moved_ns &&
	    m->moved_from_ns <= t->peak.at_ns)
		t->peak.exact = false;
	if (!m->saw_alloc || (t->peak.known && others + crest <= t->peak.live))
		return;
	struct figures_tree_peak *pk = &t->peak;
	pk->known = true;
	pk->live = others + crest;
	pk->at_ns = crested ? m->peak.at_ns : m->now_ns;
	pk->pid = (int32_t)pid;
	/* at a message's end (no crest): the others' records of the same
	 * stretch may be on their way; any that moved at all cross it */
	uint64_t since = crested ? m->peak.from_ns : 0;
	bool crossed = take_procs(pk, t, root, root_pid, pid, crest, crested, since);
	pk->exact = !crossed && (!crested || !m->peak.crossed);
}

void tree_peak_gone(struct tree *t, const struct model *m)
{
	t->live -= tree_model_live(m);
}
