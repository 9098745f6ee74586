/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The processes of a traced tree other than its root (whose model is the
 * session's own): one model each while it runs, cloned from its parent's at
 * the fork (docs/DESIGN.md §9: a child starts with a copy of its parent's heaps,
 * their pending records included), and once it has ended its final figures
 * alone, small (figures_keep), so that a tree of thousands of short-lived
 * processes costs tally a bounded amount of memory. Pure code.
 */
#ifndef TALLY_TREE_H
#define TALLY_TREE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "figures.h"
#include "model.h"

/* Ended processes kept one by one; past it the oldest are only counted. */
#define TREE_KEEP_ENDED 4096
/* The heap profiles of ended processes kept, in bytes at most (a build's
 * compilers, a shell's children: their sites stay in the tree's profile). */
#define TREE_SITES_BUDGET (64UL << 20)

struct tree_proc {
	pid_t pid, ppid;
	pid_t ns_pid; /* in its own PID namespace, as at its fork (0: not known) */
	char comm[TALLY_COMM_LEN];
	char cmdline[SOURCES_CMDLINE_MAX]; /* as last read ("": not yet) */
	uint64_t born_ns, ended_ns;	   /* CLOCK_MONOTONIC; 0: before the attach, running */
	bool shared_vm;			   /* vfork: its parent's memory until it execs */
	bool ended;			   /* its last thread is gone: `kept` holds its figures */
	bool listed;			   /* a view showed it ended (top keeps it one refresh) */
	struct model *m;		   /* while it runs */
	char *cgroup, *container;	   /* where it was last seen (NULL: not known) */
	uint64_t heaps_addr;	    /* its allocator's tally_heaps, once found (0: not yet) */
	uint64_t cut_addr;	    /* ... and tally_cut (0: none) */
	bool heaps_looked;	    /* ... looked for in this image */
	struct oom_arm oom_arm;	    /* ... given to the OOM program (session_oom.c) */
	bool read, read_consistent; /* -f at attach: its state read, while no heap moved */
	bool have_final, final_consistent; /* running at the end: its state read then, */
	struct tally_stats final;	   /* ... its allocator's own Stats */
	bool gpu_said[2];		   /* session_gpu_news: CUPTI spoke, refused */
	struct figures_process kept;
	struct figures_lifetime base; /* forked: what its counters inherited */
	struct sites *sites;	      /* ended: its heap profile as at its end (NULL: none kept) */
};

struct tree {
	struct tree_proc *procs; /* by birth */
	size_t n, cap;
	size_t nended;			     /* of procs */
	uint64_t folded;		     /* ended processes no longer kept one by one */
	struct figures_lifetime folded_life; /* ... what they did */
	uint64_t folded_inexact;	     /* ... those whose figures were not exact */
	uint64_t strays;		     /* messages of a process the tree does not know */
	uint64_t unfollowed;		     /* forks whose parent the tree does not know */
	size_t sites_bytes;		     /* kept in ended processes' sites */
	uint64_t sites_dropped;		     /* ended processes whose sites were over the budget */
	int64_t live; /* the sum of its running processes' live, the root's included */
	struct figures_tree_peak peak;
};

/* A model's live before a message or a read changes it (tree_peak_after). */
struct tree_peak_mark {
	int64_t live;
	uint64_t seq;	   /* its replay's peak.seq */
	uint64_t moved_ns; /* its live_moved_ns */
};
/* The live bytes a model counts: those of tally's allocator, none else. */
static inline int64_t tree_model_live(const struct model *m)
{
	return m->saw_alloc ? m->replay.live : 0;
}
static inline void tree_peak_before(const struct model *m, struct tree_peak_mark *k)
{
	k->live = tree_model_live(m);
	k->seq = m->replay.peak.seq;
	k->moved_ns = m->live_moved_ns;
}
/* Process pid's model m changed since k: the tree's live follows, and a new
 * peak of it is taken (root, root_pid: the session's root, for the list of
 * processes then). */
void tree_peak_after(struct tree *t, const struct model *m, pid_t pid,
		     const struct tree_peak_mark *k, const struct model *root, pid_t root_pid);
/* A process's model went away (it ended, or was folded): its live leaves. */
void tree_peak_gone(struct tree *t, const struct model *m);

void tree_init(struct tree *t);
void tree_free(struct tree *t);
/* The running process with this pid, or NULL. */
struct tree_proc *tree_find(struct tree *t, pid_t pid);
/*
 * A fork (TALLY_MSG_PROC_FORK): a new process whose model is a copy of
 * `parent` as of this message (NULL: a fresh one, for a child that shares
 * its parent's memory or whose parent is unknown), its one thread in the
 * group the forking thread was in. `like` gives a fresh model its --group
 * rules. NULL when out of memory.
 */
struct tree_proc *tree_fork(struct tree *t, const struct model *parent, const struct model *like,
			    const struct tally_msg_thread *msg);
/* A running process tally found rather than saw born (-f at attach). */
struct tree_proc *tree_adopt(struct tree *t, const struct model *like, pid_t pid, pid_t ppid,
			     const char *comm);
/* Where it lives, as last read ("" or NULL: not known); -ENOMEM. */
int tree_place(struct tree_proc *p, const char *cgroup, const char *container);
/* It has ended and these are its final figures: kept (copied), its model
 * freed. -ENOMEM leaves it as it was. */
int tree_end(struct tree *t, struct tree_proc *p, const struct figures_process *fig);

#endif /* TALLY_TREE_H */
