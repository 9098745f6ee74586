// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The models of a tree's other processes (model.h): a fresh one, and a
 * forked child's, cloned from its parent's; and a model's new image. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "model.h"

/* A model for another process of the tree: empty, with the same --group
 * rules (and their groups). */
int model_init_like(struct model *m, const struct model *like)
{
	model_init(m);
	if (!like)
		return 0;
	memcpy(m->rules, like->rules, sizeof(m->rules));
	m->nrules = like->nrules;
	for (unsigned r = 0; r < m->nrules; r++) {
		struct model_group *g = &m->groups[m->rules[r].group];
		strcpy(g->name, m->rules[r].name);
		g->known = g->rule = true;
	}
	return 0;
}

/*
 * fork: the child's figures are its parent's at this point, heaps and their
 * positions included (the records its copy of their batches holds are
 * numbered from there and come in the child's own stream), but not the
 * parent's cut, counts of messages, threads or exit.
 *
 * "This point" is the fork message's place in the ring: the BPF side submits
 * it in the parent, after the kernel copied its memory and before the child
 * runs. Every batch the parent handed over before the copy was submitted
 * before it, so what the parent's model holds is what the child's copy of
 * the heaps says was handed over. One case is not caught: another thread of
 * a multi-threaded parent that hands a batch over in the microseconds
 * between the copy and the message; its records would be in the clone and
 * not in the child's memory.
 */
int model_fork(struct model *m, const struct model *parent, uint32_t parent_tid, uint32_t tid)
{
	const struct model_thread *pt = NULL;
	bool others = false;

	for (size_t i = 0; i < parent->nthreads; i++) {
		if (parent->threads[i].tid == parent_tid)
			pt = &parent->threads[i];
		else if (strcmp(parent->threads[i].comm, TALLY_PURGER_COMM))
			others |= parent->threads[i].alive;
	}
	*m = *parent;
	m->threads = NULL;
	m->nthreads = m->cap_threads = 0;
	m->heaps = NULL;
	m->nheaps = m->cap_heaps = 0;
	if (gpu_copy(&m->gpu, &parent->gpu))
		return -ENOMEM;
	if (sites_copy(&m->sites, &parent->sites)) {
		gpu_free(&m->gpu);
		return -ENOMEM;
	}
	if (parent->nheaps) {
		m->heaps = malloc(parent->nheaps * sizeof(*m->heaps));
		if (!m->heaps) {
			gpu_free(&m->gpu);
			sites_free(&m->sites);
			return -ENOMEM;
		}
		memcpy(m->heaps, parent->heaps, parent->nheaps * sizeof(*m->heaps));
		m->nheaps = m->cap_heaps = parent->nheaps;
		for (size_t i = 0; i < m->nheaps; i++) {
			struct model_heap *h = &m->heaps[i];
			h->limit = UINT64_MAX;
			h->wait = 0;
			/* what came in order is in the copy: a batch the child
			 * hands over again from below there counts once */
			if (h->applied < h->done)
				h->applied = h->done;
		}
	}
	m->received = m->records = m->skipped = m->malformed = m->past_cut = 0;
	/* the child's peaks are its own, from its first figures: its parent's */
	model_peak_restart(m);
	m->peak_seeded = false;
	m->cut = m->holding = m->held = false;
	m->waiting = 0;
	m->have_inprocess = m->inprocess_threads_held = false;
	m->exited = false;
	m->exit_status = 0;
	/* the kernel copies the pages of a heap another thread is writing one
	 * by one, as that thread goes on: its copy may be torn */
	m->fork_threads = parent->fork_threads || others;
	m->inherited = true;
	struct model_thread *t = model_thread(m, tid, true);
	if (t && pt)
		t->group = pt->group;
	return 0;
}

/*
 * exec: a new image in the same process, with an allocator and an SDK
 * registry of its own that start from zero. The old image's figures end here
 * (what it had not handed over went with it); CPU, lost counts and threads
 * go on, as they are the process's.
 */
void model_exec(struct model *m)
{
	tally_replay_init(&m->replay);
	sites_reset(&m->sites);
	/* the new image's peaks (the old image's memory went with it) */
	model_peak_restart(m);
	m->peak_seeded = false;
	m->nheaps = 0;
	m->have_inprocess = false;
	m->saw_alloc = false;
	m->exited = false;
	m->fork_threads = false;
	m->inherited = false;
	for (unsigned g = 1; g < TALLY_MAX_GROUPS; g++) {
		bool ruled = false;
		for (unsigned r = 0; r < m->nrules; r++)
			ruled |= m->rules[r].group == g;
		m->groups[g].yields = m->groups[g].rejects = 0;
		/* the old registry's names go, but for groups threads were in
		 * (CPU may be charged to them, and CPU is the process's);
		 * --group rules stay (they name threads, whatever image runs) */
		if (!m->groups[g].occupied && !ruled) {
			m->groups[g].known = false;
			m->groups[g].name[0] = 0;
		}
	}
	m->groups[0].yields = m->groups[0].rejects = 0;
}
