/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --inject's cut at the end of a session (inject_cut.c): the records every
 * thread of the injected process holds, handed over up to one moment, as a
 * libtally_alloc process's are read from its heaps.
 */
#ifndef TALLY_CORE_INJECT_CUT_H
#define TALLY_CORE_INJECT_CUT_H

struct session;

/* Ask libtally_interpose.so in the running target for its cut and take the
 * ring until it answers. 0, or -errno (-ETIMEDOUT: no answer) with the
 * figures then flagged not exact (src.inject_uncut). */
int session_inject_cut(struct session *s);

#endif /* TALLY_CORE_INJECT_CUT_H */
