/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A heap profile (struct prof, model/prof.h) as the views write it
 * (docs/DESIGN.md §7): pprof's profile.proto, gzip-compressed, hand-encoded
 * as Go's runtime does; and the folded text of flamegraph.pl and speedscope.
 * The caller has symbolized everything: this layer only encodes what it is
 * given.
 */
#ifndef TALLY_PPROF_H
#define TALLY_PPROF_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/prof.h"

/* The gzip-compressed profile.proto in a malloc'd buffer: 0 or -errno
 * (-EINVAL for an index out of range). */
int pprof_encode(const struct prof *p, uint8_t **out, size_t *len);
/* The same, written to f: 0 or -errno. */
int pprof_write(FILE *f, const struct prof *p);
/* What a folded line counts: bytes in use at the end, or allocated over
 * the whole profile. */
enum folded_value { FOLDED_INUSE, FOLDED_ALLOC, FOLDED_PEAK };
/* "root;...;leaf BYTES" lines of the value's bytes, one per distinct stack
 * (equal stacks summed, sites with none left out); a frame is its function,
 * or "module+0xOFFSET" when not known; inlined lines are frames of their
 * own, outermost first. *lines (when not NULL): the lines written. 0 or
 * -errno. */
int folded_write(FILE *f, const struct prof *p, enum folded_value value, size_t *lines);

#endif /* TALLY_PPROF_H */
