/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The figures of `tally top`, one frame at a time: pure code (docs/STYLE.md rule 8)
 * from a tick's figures (figures.h) and the previous sample, to a header,
 * the byte identity split into its eight terms and one row per group with
 * rates. The two views (top_text.c, top_view.c) only lay it out.
 *
 * Every string that comes from the target (its comm, group and thread names)
 * is sanitized here, once, so that neither view can pass a control byte to a
 * terminal (docs/STYLE.md rule 10).
 */
#ifndef TALLY_TOP_FRAME_H
#define TALLY_TOP_FRAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../model/figures.h"

/* A sanitized name: every byte may become a four-byte "\xNN". */
#define TOP_NAME_MAX (4 * TALLY_GROUP_NAME_MAX + 1)
#define TOP_COMM_MAX (4 * TALLY_COMM_LEN + 1)
#define TOP_TERMS 8
#define TOP_CONTAINER_MAX 13 /* a container's id as docker ps shows it */
/* A command line (figures_target.cmdline: escaped already, cut at 255
 * bytes); in the processes view's label, cut at 63 with "..." */
#define TOP_CMDLINE_MAX SOURCES_CMDLINE_MAX
#define TOP_CMDLINE_LABEL 64

enum top_col {
	TOP_COL_NAME,
	TOP_COL_CPU,
	TOP_COL_LIVE,
	TOP_COL_PEAK,
	TOP_COL_ALLOCS,
	TOP_COL_FREES,
	TOP_COL_KERNELS,
	TOP_COL_DEVICE,
	TOP_COL_PINNED,
	TOP_COL_REJECTS,
	TOP_COL_YIELDS,
	TOP_NCOLS,
};

/* What the rows are: the groups summed over the tree's processes by name,
 * the processes, each process's groups, or the heap profile's call sites
 * (whose frame has the groups' rows as well: the rates' base stays whole). */
enum top_mode {
	TOP_MODE_GROUPS,
	TOP_MODE_PROCS,
	TOP_MODE_PROC_GROUPS,
	TOP_MODE_SITES,
	TOP_MODES,
};
extern const char *const top_mode_names[TOP_MODES]; /* for --view: "groups", ... */
/* A view by its --view name; 0 or -EINVAL. */
int top_mode_parse(const char *name, enum top_mode *out);

/* The counters rates are computed from, as they were at the last frame, for
 * each process and group (key: pid << 32 | group id; sorted), whatever the
 * rows sum: a row's rate is the sum of its pairs'. A pair that was not there
 * counts from zero, but for a forked process, whose counters began as its
 * parent's: its first frame has no rate. Pairs past TOP_PREV_MAX get none. */
#define TOP_PREV_MAX 4096
struct top_prev_row {
	uint64_t key;
	uint64_t cpu_ns, allocs, frees; /* objects */
};
struct top_prev {
	bool valid;
	bool full; /* pairs were left out: a pair not found has no rate */
	uint64_t t_ns;
	uint64_t received;
	unsigned n;
	struct top_prev_row rows[TOP_PREV_MAX];
};

struct top_header {
	char comm[TOP_COMM_MAX]; /* sanitized */
	pid_t pid;
	pid_t ns_pid;			   /* in its own PID namespace */
	char container[TOP_CONTAINER_MAX]; /* its short id (hex digits), or "" */
	bool late;
	bool injected; /* -p --inject */
	enum figures_allocator alloc;
	const char *foreign_alloc; /* alloc none: the malloc it runs on (jemalloc...), or NULL */
	double uptime_s;
	double events_s; /* messages a second since the last frame; < 0: not known yet */
	uint64_t received, lost_msgs, lost_words;
	bool exact;
	/* not exact: the first listed process that is not, its first reason
	 * (figures_why_codes, and in words), and how many more of each */
	pid_t why_pid;
	char why_comm[TOP_COMM_MAX]; /* sanitized */
	const char *why_code, *why_text;
	unsigned why_more, why_procs;
	bool gone;
	int exit_code;
	bool oom_kill;		 /* the OOM killer chose the target */
	unsigned procs, running; /* processes listed, and of them running */
	/* the root's peak of live (docs/DESIGN.md §11); not known: glibc mode,
	 * an allocator not traced, no allocator record yet */
	bool peak_known;
	bool peak_exact;	/* one moment of the process; else shown with a "~" */
	bool peak_since_attach; /* counted from the state read at a late attach */
	int64_t peak_live;
	double peak_at_s; /* since the root's start, as uptime_s */
};

/* The byte identity (docs/DESIGN.md §2): mapped and its eight terms, in the order
 * of top_term_names. A figure whose known bit is clear is shown as "-". */
struct top_identity {
	bool mapped_known;
	int64_t mapped;
	bool known[TOP_TERMS];
	/* signed: records of two threads may come in either order, so a term
	 * can be briefly below zero until the other thread's batch is in */
	int64_t term[TOP_TERMS];
	bool balanced; /* meaningful when mapped_known */
};

/* A figure that may be unknown (the first frame's rates, GPU columns
 * without a GPU source): shown as "-" and sorted below every known one. */
struct top_row {
	uint32_t id;  /* the group's id; the process's pid in the processes view */
	pid_t pid;    /* the process of a process view's row; 0: summed over the tree */
	uint64_t key; /* matches the row of the last frame, for rates */
	/* sanitized; "#ID" for a group without a name; in the process x group
	 * view "COMM[PID]/GROUP", the group's name from group_at */
	char name[TOP_COMM_MAX + 16 + TOP_NAME_MAX];
	unsigned group_at;
	bool rates_known; /* cpu_pct, allocs_s, frees_s */
	double cpu_pct;	  /* of one CPU: a group on two busy threads shows 200 */
	double allocs_s, frees_s;
	int64_t live; /* requested bytes allocated in the group and not freed */
	/* live at the peak: a process's peak of live; a group's live at its
	 * process's peak, summed over the processes whose peak is known (in the
	 * groups view each at its own process's peak, not one moment of the
	 * tree); not known when none of them knows its peak */
	bool peak_known;
	int64_t peak;
	bool gpu_known;
	uint64_t kernels;
	int64_t device, pinned; /* device bytes, pinned host bytes */
	uint64_t rejects, yields;
};

/* A process a frame lists: the root, those running, and those that ended
 * since the last frame (shown once with how they ended). */
struct top_proc {
	pid_t pid;
	char comm[TOP_COMM_MAX];       /* sanitized */
	char cmdline[TOP_CMDLINE_MAX]; /* as ps shows it, or "" */
	bool gone;
	int exit_code;	 /* 128 + the signal when killed; -1 not known */
	bool oom_kill;	 /* ... by the OOM killer */
	bool peak_known; /* its sites' figures at the peak are then known */
};

struct top_thread {
	uint32_t tid;
	char name[TOP_COMM_MAX]; /* sanitized */
	uint32_t group;
	char group_name[TOP_NAME_MAX]; /* sanitized */
};

/* The sites view: at most TOP_SITES_MAX sites, each stack's text cut (with
 * a "~") at TOP_STACK_MAX - 1 bytes, a deep C++ stack's dozens of frames. */
#define TOP_SITES_MAX 200
#define TOP_STACK_MAX 2048

/* One call site of the heap profile; its figures are the profile's
 * estimates from samples, not counts. */
struct top_site_row {
	int64_t inuse;		  /* bytes in use */
	int64_t peak;		  /* bytes in use at its process's peak of live */
	bool peak_known;	  /* its process is listed and knows its peak */
	int64_t objects;	  /* objects in use */
	int64_t allocated;	  /* bytes allocated since the trace began, freed or not */
	pid_t pid;		  /* its process; 0: not known */
	char group[TOP_NAME_MAX]; /* sanitized; "-" when the site has none */
	/* sanitized frames, leaf first, "leaf < caller < ...": a function, or
	 * "module+0xOFFSET" (its file's base name), or "0xADDRESS" */
	char stack[TOP_STACK_MAX];
};

enum top_sites_state {
	TOP_SITES_SHOWN,  /* the rows are the profile's (none: nothing sampled yet) */
	TOP_SITES_OFF,	  /* sampling is off (--no-sample) */
	TOP_SITES_FAILED, /* the profile could not be built: sites_err */
};

struct top_frame {
	struct top_header hdr;
	struct top_identity id;
	enum top_mode mode;
	unsigned nrows, caprows;
	struct top_row *rows;
	unsigned nprocs, capprocs;
	struct top_proc *procs;
	unsigned npairs, cappairs; /* each listed process's groups' counters */
	struct top_prev_row *pairs;
	size_t nthreads; /* live threads, by tid */
	struct top_thread *threads;
	/* the sites view's (top_sites.h), built only for it */
	enum top_sites_state sites_state;
	int sites_err; /* TOP_SITES_FAILED: the negative errno */
	unsigned nsites, capsites;
	struct top_site_row *sites; /* largest in use (sites_by_peak: at the peak) first */
	bool sites_by_peak;
	size_t sites_total;    /* sites in the profile, shown or not */
	uint64_t sites_period; /* mean bytes between samples; 0: not known */
};

extern const char *const *const top_term_names; /* TOP_TERMS of figures_stat_names */
extern const char top_term_letters[TOP_TERMS];
extern const char *const top_col_names[TOP_NCOLS]; /* for -s */
extern const char *const top_col_titles[TOP_NCOLS];
extern const char top_col_keys[TOP_NCOLS];

/*
 * Build a frame of fig at the root's now_ns and move prev to it: the header
 * counts the processes listed, the identity is summed over those running (the
 * root's alone in a tree of one), the rows are those of `mode`, their rates
 * over the time since prev (unknown when prev is not valid, or a counter
 * went back, which happens when the figures switch source), in group-id (or
 * process) order. 0, or -ENOMEM (then the frame has what could be built).
 */
int top_frame_build(struct top_frame *f, const struct figures *fig, struct top_prev *prev,
		    enum top_mode mode);
void top_frame_free(struct top_frame *f);
/* The counters of fig, at its now_ns, as the base of the next frame's rates. */
void top_prev_take(struct top_prev *prev, const struct figures *fig, enum top_mode mode);

/* Stable sort of rows by col; desc: largest first (names: Z first). */
void top_sort(struct top_row *rows, unsigned n, enum top_col col, bool desc);
/* The direction a column sorts in when first chosen: numbers largest first. */
bool top_col_default_desc(enum top_col col);
/* A column by its -s name ("cpu", "live", ...); 0 or -EINVAL. */
int top_col_parse(const char *name, enum top_col *out);

/* How the rows are ordered: a column's key picks it in its default
 * direction, or reverses it when it is the column already (internal.h:
 * top_order_pick, top_order_step). */
struct top_order {
	enum top_col col;
	bool desc;
};

#endif /* TALLY_TOP_FRAME_H */
