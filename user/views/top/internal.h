/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the files of tally top share and its callers do not need: the rows
 * over a tree (top_tree.c for top_rows.c), the ordering's steps, and the
 * helpers both renderers use (top_text.c, top_view.c). The module's face is
 * top_frame.h, with top_sites.h, top_text.h and top_view.h.
 */
#ifndef TALLY_TOP_INTERNAL_H
#define TALLY_TOP_INTERNAL_H

#include "top_frame.h"

/* The ID column's title: "PID" in the processes view, else "ID". */
const char *top_id_title(enum top_mode mode);

/* top_tree.c, for top_rows.c: the rows of a mode with their rates since prev
 * (dt_s before), and each pair's counters (f->pairs); whether a process of
 * fig is listed (prev: the last frame, or not valid). */
int top_rows_collect(struct top_frame *f, const struct figures *fig, const struct top_prev *prev,
		     double dt_s, enum top_mode mode);
bool top_proc_listed(const struct figures *fig, unsigned i, const struct top_prev *prev);

/* The column a key sorts by (top_col_keys); -1 for any other key. */
int top_col_of_key(int ch);

/* A column's key: col in its default direction, or the other direction
 * when it is the column already. */
void top_order_pick(struct top_order *o, enum top_col col);
/* The next (step 1) or previous (step -1) column, in its default direction. */
void top_order_step(struct top_order *o, int step);

/* The bar of width cells split between the eight terms in proportion to
 * mapped, by largest remainder (the cells add up to width). All 0 when
 * mapped is not known or 0. */
void top_bar_cells(const struct top_identity *id, unsigned width, unsigned cells[TOP_TERMS]);

/* Bytes as "999B", "1.5K" .. "12.0T" (binary units), at most 6 bytes. */
void top_fmt_bytes(char *buf, size_t size, int64_t v);

/* The header's peak: "live 47290368 at 2.1 s" (whole: a text frame's) or
 * "45.1M at 2.1s" (the live view's); a "~" before the bytes when they are
 * not of one moment of the process (figures_peak.exact), " since attach"
 * after them when they count from a late attach; "-" when not known. */
void top_fmt_peak(char *buf, size_t size, const struct top_header *h, bool whole);

/* The line a sites table shows in place of rows ("no sites sampled yet",
 * ...) into buf, or NULL when it has rows. */
const char *top_sites_empty(const struct top_frame *f, char *buf, size_t size);

#endif /* TALLY_TOP_INTERNAL_H */
