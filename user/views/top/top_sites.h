/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The sites view of `tally top`: the tree's heap profile (pprof.h) by call
 * site, as rows of text and numbers in the frame (top_frame.h). Pure code: the
 * caller builds and symbolizes the profile, only for this view. Every string
 * of a site (its functions, its objects' paths, its group) comes from the
 * traced process and is sanitized here (docs/STYLE.md rule 10).
 */
#ifndef TALLY_TOP_SITES_H
#define TALLY_TOP_SITES_H

#include <stdbool.h>
#include <stddef.h>

#include "../pprof.h"
#include "top_frame.h"

/*
 * The sites of p into f->sites: the TOP_SITES_MAX with the most bytes in use,
 * largest first, then most bytes allocated, then in p's order; by_peak: the
 * TOP_SITES_MAX with the most bytes in use at their process's peak first
 * (what held memory then, freed since or not), those whose process does not
 * know its peak last, then as without. Each with its stack as text
 * (top_site_row); its peak known when its pid is of a process f lists
 * (top_frame_build first) that knows its own. p NULL: sampling is off. 0,
 * or -ENOMEM or -EINVAL (an index out of range), said by the frame
 * (TOP_SITES_FAILED).
 */
int top_sites_build(struct top_frame *f, const struct prof *p, bool by_peak);
/* The rows f has, in the order top_sites_build gives them with by_peak (a
 * paused view's: its frame keeps its moment, and its TOP_SITES_MAX rows). */
void top_sites_sort(struct top_frame *f, bool by_peak);
/* The profile could not be built (err: a negative errno): the frame says so. */
void top_sites_failed(struct top_frame *f, int err);

#endif /* TALLY_TOP_SITES_H */
