/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A heap profile by call site, symbolized (docs/DESIGN.md §7): what the
 * session builds (user/session/profile.c) and every writer takes (pprof,
 * folded, the snapshot's sites, top's sites view). Plain data: whoever
 * builds it owns the arrays it points into.
 */
#ifndef TALLY_PROF_H
#define TALLY_PROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One source line of a location; function NULL: not known (the location
 * then shows as its mapping's name and offset). */
struct prof_line {
	const char *function; /* demangled */
	const char *file;     /* NULL: not known */
	int64_t line;	      /* 0: not known */
};

/* A code address of a traced process; several lines when functions were
 * inlined there, innermost first (profile.proto's order). */
struct prof_loc {
	uint64_t addr; /* as in the process */
	int mapping;   /* index into prof.maps; -1: in no known mapping */
	const struct prof_line *lines;
	size_t nlines; /* 0: not symbolized */
};

/* A file mapped executable in a traced process. */
struct prof_mapping {
	uint64_t start, limit, offset; /* memory range and its file offset */
	const char *file;	       /* path, or a name such as "[vdso]" */
	const char *build_id;	       /* hex; NULL: none */
	bool has_functions, has_filenames, has_lines;
};

#define PROF_LIFE_BUCKETS 6

/* One site: a stack, leaf first, with its estimated figures and labels. */
struct prof_sample {
	const size_t *locs; /* indices into prof.locs */
	size_t nlocs;
	int64_t alloc_objects, alloc_space, inuse_objects, inuse_space;
	const char *group; /* label "group"; NULL: none */
	int64_t pid;	   /* label "pid" (numeric); 0: none */
	/* in use at its process's peak of live (docs/DESIGN.md §11) */
	int64_t peak_objects, peak_space;
	/* objects freed after each lifetime (model/sites.h's buckets: below
	 * 1 ms, 10 ms, 100 ms, 1 s, 10 s, longer), estimated */
	int64_t life[PROF_LIFE_BUCKETS];
	/* allocated since the profile's `since` and still in use (a running
	 * process's growth; an ended one's none) */
	int64_t recent_objects, recent_space;
};

struct prof {
	const struct prof_mapping *maps;
	size_t nmaps;
	const struct prof_loc *locs;
	size_t nlocs;
	const struct prof_sample *samples;
	size_t nsamples;
	uint64_t period;	  /* the sampling rate, bytes (period_type space/bytes) */
	int64_t time_nanos;	  /* when the profile was taken (CLOCK_REALTIME) */
	int64_t duration_nanos;	  /* how long it covers */
	const char *default_type; /* sample type shown first: "inuse_space" or "alloc_space" */
	/* each sample's labels "comm" and "container" (serve --all's profile
	 * of every process): NULL, or nsamples of them (NULL or "": none) */
	const char *const *comm, *const *container;
};

#endif /* TALLY_PROF_H */
