/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The files of `tally report`'s page, built into the binary (assets.c) so
 * that the page is written whole with nothing read or fetched at run time:
 * uPlot's script, style and license (the npm package pinned in
 * package.json; MIT, whose notice goes with every copy: the page's),
 * and the page's own script and style (page.js, page.css beside this file).
 * Each is NUL-terminated text.
 */
#ifndef TALLY_REPORT_ASSETS_H
#define TALLY_REPORT_ASSETS_H

extern const char report_uplot_js[], report_uplot_css[], report_uplot_license[];
extern const char report_page_js[], report_page_css[];

#endif /* TALLY_REPORT_ASSETS_H */
