/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The figures of a process attached with --inject, rebuilt from
 * libtally_interpose.so's records (bpf/contract/tally_events.h, source
 * TALLY_SRC_INTERPOSE): glibc mode's figures (live, rounding, the groups'
 * counters), exact over the blocks allocated since the injection, and
 * glibc's own totals as mallinfo2 gave them. Pure code.
 */
#ifndef TALLY_MODEL_INJECTED_H
#define TALLY_MODEL_INJECTED_H

#include "sources.h"

struct injected {
	bool seen; /* a record came: the process is injected */
	struct glibc_figures f;
	uint64_t unknown_free_bytes; /* usable bytes of the blocks f.unknown_frees counts */
	bool have_info;
	uint64_t info[TALLY_GLIBC_INFO_WORDS]; /* the last mallinfo2: arena, hblkhd, ... */
	uint64_t table_bytes;		       /* the interposer's table of blocks */
};

/* Apply a batch's words: the records applied, or -EINVAL for a malformed
 * batch (nothing of it applied). `rule`: the group of a thread grouped by
 * name (-1: none), charged what it charges to root. Heap-profile records
 * (samples, their frees, objects) go to on_sample, as the replay's do. */
int injected_apply(struct injected *in, const __u64 *words, uint32_t count, int32_t rule,
		   void (*on_sample)(void *ctx, const struct tally_ev *e, const __u64 *extra),
		   void *ctx);

#endif /* TALLY_MODEL_INJECTED_H */
