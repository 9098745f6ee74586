/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally diff`: two snapshots side by side. What its files share: the rows
 * matched across the two documents (diff_match.c) and their renderings
 * (diff_out.c); the command, its inputs and its refusals are in diff.c.
 *
 * Matching (pids and addresses differ between runs, names do not):
 * - groups by name (the k-th of a name with the k-th: a document may repeat one);
 * - processes by comm and rank among the processes of that comm, in the
 *   tree's order (root first, then by birth): the second "worker" before
 *   with the second "worker" after;
 * - sites by group and stack, a frame as its function, or "[module]" when it
 *   has none (its address moves with the module's load address); sites of
 *   one key on one side (several processes) are summed.
 * A row found on one side only counts as 0 on the other for its deltas (a
 * group that did not exist held nothing); a figure its document lacks
 * (peak, from a tally that did not write it) is absent, and so its delta.
 */
#ifndef TALLY_DIFF_H
#define TALLY_DIFF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/figures.h"
#include "../util/json_read.h"

/* One figure on both sides; has_* false where that side lacks it. */
struct diff_fig {
	int64_t b, a;
	bool has_b, has_a;
};

enum diff_fig_index {
	DIFF_LIVE,	/* bytes: a group's live_bytes, a process's stats.live */
	DIFF_PEAK,	/* bytes: peak_live, peak.live (absent before tally wrote them) */
	DIFF_CPU,	/* ns: cpu_ns; a process's, the sum of its groups' */
	DIFF_ALLOCATED, /* bytes allocated over the run */
	DIFF_MAPPED,	/* bytes: a process's stats.mapped */
	DIFF_NFIGS,
};
extern const char *const diff_fig_names[DIFF_NFIGS];

struct diff_rows;

/* A group or a process, matched. */
struct diff_row {
	const char *name; /* the group's name or the process's comm (in a document) */
	unsigned rank;	  /* the rank-th of its name on each side, from 0 */
	bool in_b, in_a;
	int64_t pid_b, pid_a; /* processes only; -1 when not known */
	struct diff_fig figs[DIFF_NFIGS];
	struct diff_fig inst[FIGURES_INSTANCE_COUNT]; /* the "instance" figures */
	struct diff_rows *groups;		      /* a process's groups, or NULL */
	const struct jread_value *src[2];	      /* its object before, after, or NULL */
	size_t order; /* where people read it: the before side's first */
};

struct diff_rows {
	struct diff_row *v;
	size_t n, cap;
};

struct diff_site {
	char *key; /* group and frames, each length-prefixed (malloc'd) */
	const char *group;
	const struct jread_value *frames; /* the first side's that has it */
	bool in_b, in_a;
	/* inuse_bytes, alloc_bytes, peak_bytes (at its process's peak), summed */
	struct diff_fig live, alloc, peak;
	bool live_broken[2], alloc_broken[2], peak_broken[2]; /* a side's sum lost a term */
};

struct diff_sites {
	struct diff_site *v;
	size_t n, cap;
};

/* One side's document, as diff.c has checked it: a snapshot, or a profile
 * turned into a document of its shape (diff_pprof.c). */
struct diff_side {
	const char *path;
	const struct jread_value *root;
};

struct diff {
	struct diff_side b, a;
	struct diff_rows groups; /* the root process's (the document's top level) */
	struct diff_rows procs;
	struct diff_sites sites; /* sorted by |live delta|, largest first */
	struct diff_fig tree_peak, tree_cpu;
	unsigned top; /* sites shown: 0 for all */
};

/* Rows and sites of d->b and d->a matched: 0 or -ENOMEM. */
int diff_build(struct diff *d);
void diff_free(struct diff *d);
/* The delta (a - b) of f in a row on sides in_b, in_a: false when a side
 * that has the row lacks the figure, or it overflows. */
bool diff_delta(const struct diff_fig *f, bool in_b, bool in_a, int64_t *out);
/* The side is a profile read by diff_pprof.c (its document says "kind"). */
bool diff_is_profile(const struct diff_side *s);
/* A frame's label: its function, "[module]", or "?". */
const char *diff_frame_label(const struct jread_value *frame, char *buf, size_t size);

/*
 * A pprof profile, inflated (pb[0 .. n)), as a document of a snapshot's
 * shape (diff_pprof.c), into *json (malloc'd, *len bytes): 0, -EINVAL
 * (corrupt, or a reference to a location it lacks), -ENOMSG (no
 * inuse_space or alloc_space), -E2BIG (past a bound), -ENOMEM. diff.c
 * inflates it first, to at most DIFF_PPROF_MAX_BYTES (-EFBIG past it).
 */
#define DIFF_PPROF_MAX_BYTES (256u << 20)
int diff_pprof_decode(const uint8_t *pb, size_t n, char **json, size_t *len);

/* Text for people, JSON for scripts: 0 or -EIO. */
int diff_print_text(FILE *f, const struct diff *d);
int diff_print_json(FILE *f, const struct diff *d);

#endif /* TALLY_DIFF_H */
