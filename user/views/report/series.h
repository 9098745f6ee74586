/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally report`'s time series: at each tick, the tree's identity terms
 * (the Stats of the processes alive, summed), and per group (merged by name
 * over the tree) its live bytes, CPU and GPU device bytes, and per process
 * its live bytes. Pure (docs/STYLE.md rule 8): figures in, numbers out.
 *
 * Bounded: at most SERIES_MAX_POINTS points (when full, every second point
 * is dropped and the series goes on at half the resolution: a 100 ms tick
 * keeps 2048 points of a 3-minute run, one every 200 ms of a 6-minute one),
 * SERIES_MAX_GROUPS groups and SERIES_MAX_PROCS processes (the rest summed in
 * one "(other)" line each): at most (11 + 64 * 3 + 33) arrays of 2048
 * 8-byte values, 3.8 MiB, whatever the run's length or tree.
 */
#ifndef TALLY_SERIES_H
#define TALLY_SERIES_H

#include <stdbool.h>
#include <stdint.h>

#include "../../model/figures.h"
#include "../json.h"

#define SERIES_MAX_POINTS 2048
#define SERIES_MAX_GROUPS 64
#define SERIES_MAX_PROCS 32
#define SERIES_OTHER "(other)"

struct series_group {
	char *name;
	int64_t *live, *cpu_ns, *device_bytes; /* SERIES_MAX_POINTS each */
};

struct series_proc {
	int32_t pid; /* -1: the processes past SERIES_MAX_PROCS, summed */
	char *comm;
	int64_t *live;
};

struct series {
	unsigned interval_ms; /* of a tick */
	unsigned stride;      /* ticks a point stands for: doubles at each thinning */
	unsigned n;	      /* points */
	uint64_t ticks;	      /* ticks seen */
	uint64_t start_ns;
	double *t; /* seconds since start_ns */
	int64_t *stat[TALLY_STATS_COUNT];
	unsigned ngroups, nprocs;
	struct series_group groups[SERIES_MAX_GROUPS + 1]; /* + "(other)" */
	struct series_proc procs[SERIES_MAX_PROCS + 1];
};

/* 0 or -ENOMEM (s is then empty, series_free-able). */
int series_init(struct series *s, unsigned interval_ms, uint64_t start_ns);
/* One tick's figures at now_ns; final: the end's, always kept. 0 or
 * -ENOMEM. */
int series_add(struct series *s, const struct figures *f, uint64_t now_ns, bool final);
/* As a JSON object (a value: the caller has written its key, if any). */
void series_write(struct json_writer *w, const struct series *s);
void series_free(struct series *s);

#endif /* TALLY_SERIES_H */
