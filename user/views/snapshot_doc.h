/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The snapshot JSON document (docs/DESIGN.md §6) of one tick's figures. */
#ifndef TALLY_SNAPSHOT_DOC_H
#define TALLY_SNAPSHOT_DOC_H

#include <stdio.h>

#include "../model/figures.h"
#include "json.h"
#include "pprof.h"

/* The snapshot's "sites": the heap profile's largest, by in-use bytes */
#define SNAPSHOT_SITES 20

/* sites: the tree's heap profile, its samples largest first (NULL: none
 * taken, "sites" is empty). */
void snapshot_write(struct json_writer *w, const struct figures *f, const struct prof *sites);
/* The whole document to `out`, or nothing: 0 or -errno. */
int snapshot_print(FILE *out, const struct figures *f, const struct prof *sites);

#endif /* TALLY_SNAPSHOT_DOC_H */
