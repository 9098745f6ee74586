// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The page's files (assets.h), taken in by the assembler's .incbin at build
 * time: the Makefile names the uPlot directory (REPORT_UPLOT_DIR, where
 * scripts/setup.sh's `npm ci` put it) and makes this object depend on every
 * file, so that an edit of page.js rebuilds tally. Paths are relative to the
 * repository's root, where make runs the compiler.
 */
#include "assets.h"

#ifndef REPORT_UPLOT_DIR
#error "REPORT_UPLOT_DIR: the Makefile names where npm put uPlot (node_modules/uplot)"
#endif

#define REPORT_STR(x) REPORT_STR_(x)
#define REPORT_STR_(x) #x
/* a symbol, the file's bytes, and a NUL: the views use them as strings */
#define REPORT_ASSET(sym, path)                                                                    \
	".section .rodata\n"                                                                       \
	".global " #sym "\n"                                                                       \
	".type " #sym ", @object\n" #sym ":\n"                                                     \
	".incbin \"" path "\"\n"                                                                   \
	".byte 0\n"                                                                                \
	".size " #sym ", . - " #sym "\n"                                                           \
	".previous\n"

__asm__(REPORT_ASSET(report_uplot_js, REPORT_STR(REPORT_UPLOT_DIR) "/dist/uPlot.iife.min.js")
		REPORT_ASSET(report_uplot_css, REPORT_STR(REPORT_UPLOT_DIR) "/dist/uPlot.min.css")
			REPORT_ASSET(report_uplot_license, REPORT_STR(REPORT_UPLOT_DIR) "/LICENSE")
				REPORT_ASSET(report_page_js, "user/views/report/page.js")
					REPORT_ASSET(report_page_css,
						     "user/views/report/page.css"));
