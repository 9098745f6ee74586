/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A heap profile by call site, as the views write it (docs/DESIGN.md §7): pprof's
 * profile.proto, gzip-compressed, hand-encoded as Go's runtime does; and the
 * folded text of flamegraph.pl and speedscope. The caller has symbolized
 * everything: this layer only encodes what it is given.
 */
#ifndef TALLY_PPROF_H
#define TALLY_PPROF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

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

/* One site: a stack, leaf first, with its estimated figures and labels. */
struct prof_sample {
	const size_t *locs; /* indices into prof.locs */
	size_t nlocs;
	int64_t alloc_objects, alloc_space, inuse_objects, inuse_space;
	const char *group; /* label "group"; NULL: none */
	int64_t pid;	   /* label "pid" (numeric); 0: none */
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
};

/* The gzip-compressed profile.proto in a malloc'd buffer: 0 or -errno
 * (-EINVAL for an index out of range). */
int pprof_encode(const struct prof *p, uint8_t **out, size_t *len);
/* The same, written to f: 0 or -errno. */
int pprof_write(FILE *f, const struct prof *p);
/* What a folded line counts: bytes in use at the end, or allocated over
 * the whole profile. */
enum folded_value { FOLDED_INUSE, FOLDED_ALLOC };
/* "root;...;leaf BYTES" lines of the value's bytes, one per distinct stack
 * (equal stacks summed, sites with none left out); a frame is its function,
 * or "module+0xOFFSET" when not known; inlined lines are frames of their
 * own, outermost first. *lines (when not NULL): the lines written. 0 or
 * -errno. */
int folded_write(FILE *f, const struct prof *p, enum folded_value value, size_t *lines);

#endif /* TALLY_PPROF_H */
