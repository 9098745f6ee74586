/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The tree's heap profile by call site, symbolized (docs/DESIGN.md §7): every
 * site of the root and of the processes still running, each frame looked up
 * in the objects its process announced, ready for the pprof and folded
 * writers (views/pprof.h, model/prof.h), the snapshot's "sites" and top's sites view.
 */
#ifndef TALLY_PROFILE_H
#define TALLY_PROFILE_H

#include "../model/prof.h"
#include "../os/symbols.h"
#include "session.h"

#define PROFILE_BEFORE_ATTACH "(allocated before attach)"

struct profile {
	struct prof p; /* what the writers take; points into the arrays below */
	struct prof_mapping *maps;
	size_t nmaps, cap_maps;
	struct prof_loc *locs;
	size_t nlocs, cap_locs;
	struct prof_line *lines;
	size_t nlines, cap_lines;
	size_t *ix; /* every sample's location indices, one after the other */
	size_t nix, cap_ix;
	struct prof_sample *samples;
	size_t nsamples, cap_samples;
	char **strs; /* strings the profile owns: group names, paths */
	size_t nstrs, cap_strs;
	struct symbolizer *sym;
	uint64_t *loc_keys; /* hash index: (process, pc) -> location */
	size_t cap_keys;
	struct sym_maps maps_scratch;
};

/* The tree's profile as of now: 0 or -ENOMEM. The symbolizer is kept in s
 * between calls (files are opened once). */
int profile_build(struct session *s, struct profile *pr);
void profile_free(struct profile *pr); /* NULL-safe, leaves pr empty */
/* Samples sorted by in-use bytes, largest first (the snapshot's and top's order). */
void profile_sort_inuse(struct profile *pr);
/* The snapshot's sites: the profile built and sorted, &pr->p; NULL when
 * nothing is sampled or on a failure (said on stderr), pr then empty. */
const struct prof *profile_for_snapshot(struct session *s, struct profile *pr);

#endif /* TALLY_PROFILE_H */
