/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally top -b`: frames as plain text, for scripts and tests. Figures are
 * whole numbers of bytes and rates with one decimal (a script compares them);
 * a figure that is not known is "-".
 */
#ifndef TALLY_TOP_TEXT_H
#define TALLY_TOP_TEXT_H

#include <stdbool.h>
#include <stdio.h>

#include "top_frame.h"

#define TOP_TEXT_BAR 64 /* cells of the identity bar */

/*
 * Frame number k (from 1) to out: a line "--- frame K ---", the header (its
 * last line the root's peak, "peak: live BYTES at S s" or "peak: -"), the
 * identity and its bar, the group table in the frame's row order (the sites
 * table in the sites view), the thread table when threads is set, and a
 * blank line. Flushed. 0 or -errno.
 */
int top_text_frame(FILE *out, const struct top_frame *f, unsigned long k, bool threads);

#endif /* TALLY_TOP_TEXT_H */
