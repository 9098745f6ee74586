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

#include <stddef.h>

#include "../pprof.h"
#include "top_frame.h"

/*
 * The sites of p into f->sites: the TOP_SITES_MAX with the most bytes in use,
 * largest first, then most bytes allocated, then in p's order; each with its
 * stack as text (top_site_row). p NULL: sampling is off. 0, or -ENOMEM or
 * -EINVAL (an index out of range), said by the frame (TOP_SITES_FAILED).
 */
int top_sites_build(struct top_frame *f, const struct prof *p);
/* The profile could not be built (err: a negative errno): the frame says so. */
void top_sites_failed(struct top_frame *f, int err);

#endif /* TALLY_TOP_SITES_H */
