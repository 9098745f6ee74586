/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The Prometheus text exposition (format 0.0.4) of a session's figures, for
 * `tally serve`'s /metrics. Pure code: figures in, text out; the caller
 * (serve.c) gathers the figures the way the snapshot does, so that a scrape
 * shows the snapshot's numbers.
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

#include "model.h"

struct prom_group {
	bool shown;			 /* the snapshot lists this group */
	char name[TALLY_GROUP_NAME_MAX]; /* from the target: escaped on output; "" if unnamed */
	int64_t live_bytes;
	uint64_t alloc_bytes, alloc_objs, dealloc_bytes,
		dealloc_objs; /* lifetime, requested sizes */
	uint64_t cpu_ns;
	struct model_instance in; /* GPU and SDK figures */
};

struct prom_figures {
	uint32_t pid;
	char comm[TALLY_COMM_LEN]; /* from the target */
	const char *allocator;	   /* "tally", "glibc", "none" */
	const char *cuda;	   /* "cupti", "driver", "none" */
	bool running;		   /* the target has not exited */
	bool exact;		   /* as the snapshot's "exact" */
	uint64_t received, lost_msgs, lost_words;
	uint32_t stats_known;		    /* bit i: stats[i] is known */
	uint64_t stats[TALLY_STATS_FIELDS]; /* struct tally_stats's order */
	bool identity; /* libtally_alloc: the identity's derived figures are known */
	bool have_resident;
	uint64_t resident; /* measured resident bytes of the allocator's mappings */
	struct model_instance process;
	bool gpu_groups; /* a GPU source spoke: per-group GPU families too */
	struct prom_group groups[TALLY_MAX_GROUPS];
};

/* The exposition of p to f: 0, or -EIO when a write failed. */
int prom_render(FILE *f, const struct prom_figures *p);

/* A label value per the format: backslash, double quote and newline
 * escaped; other control characters and bytes that are not UTF-8 become
 * U+FFFD, so the text stays valid UTF-8 whatever the target named things.
 * Also used for HELP text, which escapes only backslash and newline
 * (quote = false). */
void prom_escape(FILE *f, const char *s, size_t n, bool quote);

#endif /* TALLY_PROM_H */
