// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The processes of a traced tree (tree.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/grow.h"
#include "tree.h"

void tree_init(struct tree *t)
{
	memset(t, 0, sizeof(*t));
}

static void proc_free(struct tree_proc *p)
{
	free(p->cgroup);
	free(p->container);
	p->cgroup = p->container = NULL;
	if (p->m) {
		model_free(p->m);
		free(p->m);
		p->m = NULL;
	}
	figures_process_free(&p->kept);
	if (p->sites) {
		sites_free(p->sites);
		free(p->sites);
		p->sites = NULL;
	}
}

void tree_free(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++)
		proc_free(&t->procs[i]);
	free(t->procs);
	memset(t, 0, sizeof(*t));
}

struct tree_proc *tree_find(struct tree *t, pid_t pid)
{
	/* the newest first: a pid the kernel used again belongs to the last */
	for (size_t i = t->n; i-- > 0;)
		if (t->procs[i].pid == pid && !t->procs[i].ended)
			return &t->procs[i];
	return NULL;
}

/* Past TREE_KEEP_ENDED ended processes, the oldest ended one goes. */
static void fold_oldest(struct tree *t)
{
	for (size_t i = 0; i < t->n; i++) {
		if (!t->procs[i].ended)
			continue;
		t->sites_bytes -= t->procs[i].sites ? sites_bytes(t->procs[i].sites) : 0;
		/* the tree's lifetime totals and exactness keep it */
		figures_life_add(&t->folded_life, &t->procs[i].kept.life);
		t->folded_inexact += !t->procs[i].kept.exact;
		proc_free(&t->procs[i]);
		memmove(&t->procs[i], &t->procs[i + 1], (t->n - i - 1) * sizeof(t->procs[0]));
		t->n--;
		t->nended--;
		t->folded++;
		return;
	}
}

static struct tree_proc *proc_new(struct tree *t, pid_t pid, pid_t ppid, const char *comm)
{
	if (grow((void **)&t->procs, &t->cap, t->n + 1, sizeof(*t->procs), 16))
		return NULL;
	struct tree_proc *p = &t->procs[t->n];
	memset(p, 0, sizeof(*p));
	p->m = malloc(sizeof(*p->m));
	if (!p->m)
		return NULL;
	p->pid = pid;
	p->ppid = ppid;
	memcpy(p->comm, comm, sizeof(p->comm));
	p->comm[sizeof(p->comm) - 1] = 0;
	t->n++;
	return p;
}

struct tree_proc *tree_fork(struct tree *t, const struct model *parent, const struct model *like,
			    const struct tally_msg_thread *msg)
{
	struct tree_proc *p = proc_new(t, (pid_t)msg->hdr.pid, (pid_t)msg->pid, msg->comm);

	if (!p)
		return NULL;
	p->born_ns = msg->hdr.ts_ns;
	p->ns_pid = (pid_t)msg->hdr.ns_pid;
	p->shared_vm = msg->hdr.flags & TALLY_PROC_SHARED_VM;
	int err = parent && !p->shared_vm ?
			  model_fork(p->m, parent, msg->parent_tid, msg->hdr.tid) :
			  model_init_like(p->m, like);
	if (err) {
		free(p->m);
		t->n--;
		return NULL;
	}
	model_thread_named(p->m, msg->hdr.tid, p->comm);
	return p;
}

struct tree_proc *tree_adopt(struct tree *t, const struct model *like, pid_t pid, pid_t ppid,
			     const char *comm)
{
	struct tree_proc *p = proc_new(t, pid, ppid, comm);

	if (!p)
		return NULL;
	if (model_init_like(p->m, like)) {
		free(p->m);
		t->n--;
		return NULL;
	}
	return p;
}

/* *at becomes s (NULL for "" or NULL), copied only when it changed. */
static int keep_str(char **at, const char *s)
{
	if (!s || !*s) {
		free(*at);
		*at = NULL;
		return 0;
	}
	if (*at && !strcmp(*at, s))
		return 0;
	char *d = strdup(s);
	if (!d)
		return -ENOMEM;
	free(*at);
	*at = d;
	return 0;
}

int tree_place(struct tree_proc *p, const char *cgroup, const char *container)
{
	int err = keep_str(&p->cgroup, cgroup);

	return err ? err : keep_str(&p->container, container);
}

int tree_end(struct tree *t, struct tree_proc *p, const struct figures_process *fig)
{
	int err = figures_keep(&p->kept, fig);

	if (err)
		return err;
	p->ended = true;
	p->ended_ns = fig->ended_ns;
	/* its sites move out of the model, what only a running process needs
	 * (the live samples, the indexes) left behind */
	struct sites *st = p->m->sites.n ? malloc(sizeof(*st)) : NULL;
	if (st && t->sites_bytes + sites_bytes(&p->m->sites) <= TREE_SITES_BUDGET) {
		*st = p->m->sites;
		sites_settle(st, &p->m->replay);
		sites_init(&p->m->sites);
		sites_trim(st);
		p->sites = st;
		t->sites_bytes += sites_bytes(st);
	} else {
		t->sites_dropped += p->m->sites.n != 0;
		free(st);
	}
	model_free(p->m);
	free(p->m);
	p->m = NULL;
	t->nended++;
	if (t->nended > TREE_KEEP_ENDED)
		fold_oldest(t);
	return 0;
}
