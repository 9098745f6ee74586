/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The snapshot JSON document (DESIGN.md §6) of a session. */
#ifndef TALLY_SNAPSHOT_H
#define TALLY_SNAPSHOT_H

#include <stdio.h>

#include "json.h"
#include "session.h"

bool snapshot_exact(const struct session *s);
#define SNAPSHOT_MAX_WHY 16
unsigned snapshot_inexact_why(const struct session *s, const char *why[SNAPSHOT_MAX_WHY]);
void snapshot_write(struct json_writer *w, const struct session *s);
/* The whole document to `out`, or nothing: 0 or -errno. */
int snapshot_print(FILE *out, const struct session *s);

#endif /* TALLY_SNAPSHOT_H */
