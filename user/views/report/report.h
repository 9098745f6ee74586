/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally report`'s page: one self-contained HTML file (nothing fetched: it
 * opens on an air-gapped machine) holding the snapshot document of the
 * final figures (snapshot_doc.h, the same bytes `tally snapshot` would
 * print, compact), the time series (series.h), the heap profile's folded
 * stacks (in use and allocated, pprof.h), uPlot and the page's own script,
 * which draws everything in the browser.
 */
#ifndef TALLY_REPORT_H
#define TALLY_REPORT_H

#include <stdio.h>

#include "../../model/figures.h"
#include "../../model/prof.h"
#include "series.h"

/* The page to out, whole or not at all (it is built in memory first):
 * 0 or -errno. sites: the tree's heap profile, largest in use first, or
 * NULL when none was taken. */
int report_write(FILE *out, const struct figures *f, const struct prof *sites,
		 const struct series *s);

/* s as HTML text (element content or a quoted attribute): & < > " ' as
 * entities, invalid UTF-8 and controls but tab and newline as U+FFFD. */
void report_html_text(FILE *out, const char *s);

#endif /* TALLY_REPORT_H */
