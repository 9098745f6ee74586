/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Between session.c, session_start.c and session_state.c (a running
 * target's state read at attach and at the end); not for the views.
 */
#ifndef TALLY_SESSION_STATE_H
#define TALLY_SESSION_STATE_H

#include <stddef.h>

#include "session.h"

/* session_load.c */
/* tally.bpf.o loaded and its scheduler programs attached, and beside it,
 * on threads of their own, the driver's object (cuda) and glibc mode's
 * (glibc): TALLY_EXIT_OK or another status, after one line. */
int session_load(struct session *s, const struct session_opts *o, bool cuda, bool glibc);
/* Those loads are over: s->cuda and s->glibc are set, or s->cuda_err and
 * s->glibc_err say why not. */
void session_loaded(struct session *s);

/* session_state.c */
/* The starting state of a running target, its records kept meanwhile and
 * applied after: TALLY_EXIT_OK or another status, after one line. */
int session_read_attach(struct session *s);
/* The cut at the end of a target that still runs: its allocator's own
 * figures, its pending records, each heap's position. */
void session_read_final(struct session *s);
/* The same for the tree's other processes still running (session_tree.c). */
void session_read_final_tree(struct session *s);
/* What is in the ring now (a target that still runs refills it meanwhile). */
void session_drain_ring(struct session *s);
void session_await_batches(struct session *s, struct model *m, const struct remote_alloc *ra);
void session_end_pending(struct session *s, struct model *m, pid_t pid, struct remote_alloc *ra);
/* The nodes kept for reuse. */
void session_state_free(struct session *s);
/* Keep a message the model held back in part (a view's cut). */
void session_hold_keep(struct session *s, const void *data, size_t len);
/* A message of the tree's other processes that must wait for the root's
 * held ones (session_tree.c). */
void session_hold_tree(struct session *s, const void *data, size_t len);
/* A message that comes while session_read_attach reads. */
void session_defer(struct session *s, const void *data, size_t len);

/* session.c */
int session_fail(int status, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* A message to the model, and to what follows it (rules, exec, observer). */
void session_deliver(struct session *s, const void *data, size_t len);
/* The loader's callback: a message delivered, or kept aside while a state
 * read runs; LOADER_STOP where the taking must stop. */
int session_on_msg(void *ctx, const void *data, size_t len);
/* Where the target lives (PID namespace, parent, cgroup) into s->src. */
void session_place(struct session *s);

/* session_tree.c */
/* A message of another process of the tree than the root: true when it
 * was kept, to be delivered again at the end of a view's cut. */
bool session_deliver_tree(struct session *s, const void *data, size_t len);
/* One message to process pid's model m, the tree's live and peak kept
 * (model/tree.h); every model_apply of the session goes through it. */
void session_apply(struct session *s, struct model *m, pid_t pid, const void *data, size_t len);
/* A heap's pending records read from process pid's memory just now, the
 * same way. */
void session_apply_pending(struct session *s, struct model *m, pid_t pid,
			   const struct remote_heap *h);
/* -p PID -f: its running descendants into the tree. */
void session_adopt_descendants(struct session *s);
/* The lost counts of the ring into src (every process's figures share them). */
void session_sources_lost(struct session *s, struct figures_sources *src);

/* session_oom.c: each process's heaps given to the OOM program as soon as
 * its allocator is found (at every poll); after a message was applied to
 * m, the OOM killer's news; an exec's new image looked for anew */
void session_oom_arm(struct session *s);
void session_oom_news(struct model *m, const void *data, size_t len);
void session_oom_exec(struct oom_arm *st);

#endif /* TALLY_SESSION_STATE_H */
