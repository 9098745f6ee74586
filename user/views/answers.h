/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The answers users bring, beside the figures (docs/DESIGN.md §11), as the
 * snapshot document writes them for each process: what held the memory at
 * its peak, what it leaked (ended) or what grew (running), which sites
 * churn short-lived blocks, and how long the blocks of each group lived.
 */
#ifndef TALLY_ANSWERS_H
#define TALLY_ANSWERS_H

#include "../model/figures.h"
#include "../model/prof.h"
#include "json.h"

/* How many sites each answer lists, most first */
#define ANSWERS_SITES 20

/* A site's "frames": one per line of each location, innermost first. */
void answers_frames(struct json_writer *w, const struct prof *p, const struct prof_sample *s);
/* A site's "lifetimes": the objects freed after each lifetime, and still live. */
void answers_site_life(struct json_writer *w, const struct prof_sample *s);
/* Process p's answers: "peak", "peak_mapped", then "leaked" (ended) or
 * "growing" (running), "temporary" and "lifetimes"; prof may be NULL. */
void answers_write(struct json_writer *w, const struct figures_process *p, const struct prof *prof);

#endif /* TALLY_ANSWERS_H */
