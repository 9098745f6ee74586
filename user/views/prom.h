/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Prometheus text exposition (format 0.0.4) of a session's figures, for
 * `tally serve`'s /metrics. Pure code: figures in (figures.h, the ones the
 * snapshot shows), text out.
 *
 * Names follow Prometheus's conventions: a tally_ prefix, base units
 * (_bytes, _seconds), _total on counters, every family with its HELP and
 * TYPE lines. Per-group families carry the labels id="N" and group="NAME";
 * process-wide families have no labels, so a sum over groups never counts a
 * process figure twice. A figure that is not known (glibc mode knows only
 * live, rounding and large mappings) is left out rather than shown as 0.
 */
#ifndef TALLY_PROM_H
#define TALLY_PROM_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/figures.h"

/* Per-process series at most (the processes with the most live bytes); the
 * rest are summed into one series labelled comm="other". */
#define PROM_MAX_PROCESSES 50

/* The exposition of fig to f: the unlabelled families are the tree's sums
 * (the root and the processes still running), the tally_process_ families
 * one series per process (pid, comm). 0, -ENOMEM, or -EIO when a write
 * failed. */
int prom_render(FILE *f, const struct figures *fig);

/* A label value per the format: backslash, double quote and newline
 * escaped; other control characters and bytes that are not UTF-8 become
 * U+FFFD, so the text stays valid UTF-8 whatever the target named things.
 * Also used for HELP text, which escapes only backslash and newline
 * (quote = false). */
void prom_escape(FILE *f, const char *s, size_t n, bool quote);

/* What prom_all.c (serve --all) shares with this file: */
/* # HELP and # TYPE of one family. */
void prom_family(FILE *f, const char *name, const char *type, const char *help);
/* Nanoseconds as exact decimal seconds (no rounding through a double), and
 * a newline. */
void prom_seconds(FILE *f, uint64_t ns);
/* The families of a group's own figures, and one group's value of one; the
 * instance figures follow (FIGURES_INSTANCE_X). */
enum prom_group_field {
	PROM_GF_LIVE,
	PROM_GF_PEAK,
	PROM_GF_CPU,
	PROM_GF_ALLOC_BYTES,
	PROM_GF_DEALLOC_BYTES,
	PROM_GF_ALLOCS,
	PROM_GF_FREES,
	PROM_GF_N
};
struct prom_family_def {
	const char *name, *type, *help;
};
extern const struct prom_family_def prom_group_families[PROM_GF_N];
void prom_group_value(FILE *f, unsigned k, const struct figures_group *fg);
/* Each Stats term's family name and help. */
extern const char *const prom_stat_metric[TALLY_STATS_COUNT];
extern const char *const prom_stat_help[TALLY_STATS_COUNT];

#endif /* TALLY_PROM_H */
