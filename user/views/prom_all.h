/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The exposition of `tally serve --all` (format 0.0.4): every followed
 * process's figures in one scrape, each series labelled by pid, comm and
 * container, and the agent's own health. Pure code, as prom.c: figures in,
 * text out.
 *
 * Cardinality is bounded whatever the machine runs: per-process series
 * (Stats terms, groups, CPU) for the `top` processes with the most live
 * bytes; the rest summed into gauges labelled comm="other" (no counter:
 * a sum over a changing set of processes is not monotonic); per-container
 * sums, one series per container followed; the agent's families fixed.
 * A process that ends leaves the exposition at the next render, so that
 * Prometheus marks its series stale.
 */
#ifndef TALLY_PROM_ALL_H
#define TALLY_PROM_ALL_H

#include <stdint.h>
#include <stdio.h>

#include "../model/figures.h"

/* Why an attach did not happen (tally_agent_attach_failures_total{reason}). */
enum prom_all_fail {
	PROM_ALL_FAIL_PERMISSION, /* no permission (capabilities, ptrace scope) */
	PROM_ALL_FAIL_BUSY,	  /* another tally traces it */
	PROM_ALL_FAIL_GONE,	  /* it ended during the attach */
	PROM_ALL_FAIL_LIMIT,	  /* --max-procs followed already */
	PROM_ALL_FAIL_OTHER,
	PROM_ALL_FAIL_COUNT
};
/* Their label values. */
extern const char *const prom_all_fail_names[PROM_ALL_FAIL_COUNT];

/* The agent's own figures. */
struct prom_all_health {
	uint64_t sessions; /* processes followed as roots now */
	uint64_t attached; /* roots attached since the agent started */
	uint64_t ended;	   /* ... and ended since */
	uint64_t fail[PROM_ALL_FAIL_COUNT];
	uint64_t lost, lost_words; /* ring messages lost, ended sessions' included */
	uint64_t torn;		   /* ticks a session's figures were not taken (torn cut) */
	uint64_t cpu_lost;	   /* CPU intervals or processes the charging loader missed */
	uint64_t scanned;	   /* processes the last scan looked at */
	uint64_t scan_ns;	   /* how long it took */
	uint64_t resident;	   /* the agent's resident bytes */
	uint64_t cpu_ns;	   /* the agent's CPU time */
	uint64_t start_time;	   /* the agent's start, seconds since the epoch */
};

/* figs[i]: the figures of the i-th followed root's tree (root first); top:
 * per-process series at most. 0, -ENOMEM, or -EIO when a write failed. */
int prom_all_render(FILE *f, const struct figures *const *figs, unsigned n, unsigned top,
		    const struct prom_all_health *h);

#endif /* TALLY_PROM_ALL_H */
