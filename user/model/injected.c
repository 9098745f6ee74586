// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's records applied to glibc mode's figures
 * (injected.h). A block in an ALLOC or LARGE_ALLOC record was allocated
 * since the injection and its free comes as FREE or LARGE_FREE with the
 * same requested size (the interposer's table says which); any other free
 * is FREE_UNTRACKED and moves no live byte.
 */
#include <errno.h>
#include <string.h>

#include "injected.h"

static void charge(struct injected *in, uint16_t g, bool alloc, uint64_t q, uint64_t usable)
{
	struct glibc_figures *f = &in->f;

	if (alloc) {
		f->live += q;
		f->rounding += usable - q;
		f->alloc_bytes[g] += q;
		f->alloc_objs[g]++;
	} else {
		f->live -= q;
		f->rounding -= usable - q;
		f->dealloc_bytes[g] += q;
		f->dealloc_objs[g]++;
	}
	f->calls++;
}

/* A batch cut inside a record, or with a record of another kind, is
 * refused whole. */
static bool batch_valid(const __u64 *words, uint32_t count)
{
	struct tally_ev e;
	uint32_t pos = 0;

	while (pos < count) {
		if (tally_ev_next(words, count, &pos, &e))
			return false;
		switch (e.type) {
		case TALLY_EV_ALLOC:
		case TALLY_EV_FREE:
		case TALLY_EV_LARGE_ALLOC:
		case TALLY_EV_LARGE_FREE:
		case TALLY_EV_FREE_UNTRACKED:
		case TALLY_EV_GLIBC_INFO:
		case TALLY_EV_RING: /* the transport's (user/probes/heap_rings.c) */
		case TALLY_EV_SAMPLE:
		case TALLY_EV_SAMPLE_FREE:
		case TALLY_EV_MODULE:
			break;
		default:
			return false;
		}
		if (e.group >= TALLY_MAX_GROUPS || (e.type == TALLY_EV_ALLOC && e.bytes < e.n))
			return false;
	}
	return true;
}

int injected_apply(struct injected *in, const __u64 *words, uint32_t count, int32_t rule,
		   void (*on_sample)(void *ctx, const struct tally_ev *e, const __u64 *extra),
		   void *ctx)
{
	struct tally_ev e;
	int applied = 0;

	if (!batch_valid(words, count))
		return -EINVAL;
	for (uint32_t pos = 0; pos < count; applied++) {
		uint32_t at = pos;
		tally_ev_next(words, count, &pos, &e);
		uint16_t g = e.group == 0 && rule >= 0 ? (uint16_t)rule : e.group;
		if (tally_ev_is_sample(e.type)) {
			e.group = g;
			if (on_sample)
				on_sample(ctx, &e, &words[at + 2]);
			continue;
		}
		switch (e.type) {
		case TALLY_EV_ALLOC:
		case TALLY_EV_FREE:
			charge(in, g, e.type == TALLY_EV_ALLOC, e.n, e.bytes);
			break;
		case TALLY_EV_LARGE_ALLOC:
		case TALLY_EV_LARGE_FREE:
			charge(in, g, e.type == TALLY_EV_LARGE_ALLOC, e.bytes, e.bytes + e.n);
			break;
		case TALLY_EV_FREE_UNTRACKED:
			in->f.unknown_frees++;
			in->unknown_free_bytes += e.bytes;
			in->f.calls++;
			break;
		case TALLY_EV_RING:
			break;
		case TALLY_EV_GLIBC_INFO:
			in->f.untracked = e.n;
			in->table_bytes = e.bytes;
			memcpy(in->info, &words[at + 2], sizeof(in->info));
			in->f.unseen_frees = in->info[TALLY_GLIBC_INFO_WORDS - 1];
			in->have_info = true;
			break;
		}
	}
	in->seen = true;
	return applied;
}
