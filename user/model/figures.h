/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The figures of one tick, built once (figures_build) from the model and
 * the sources read beside the ring, and rendered by every view: the snapshot
 * document, top's frame, record's counters and serve's exposition. A view
 * reads a struct figures and nothing else, so that no view decides on its
 * own what glibc mode knows, what is exact, or which GPU source counts.
 *
 * Pure code (docs/STYLE.md rule 8): no I/O. The figures hold pointers into the
 * model (names), valid while the model is unchanged.
 *
 * `procs` is the processes of one tree, root first (ended ones as their
 * final figures), and a group's figures are where its heap sites go.
 */
#ifndef TALLY_FIGURES_H
#define TALLY_FIGURES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "model.h"
#include "sources.h"

/*
 * The instance figures (docs/DESIGN.md §4), written once:
 * X(field, type, kind, unit, metric, prom_type, trace_counter, help). The struct,
 * the snapshot's "instance" objects (in this order), the Prometheus families
 * ("tally_" metric for the process, "tally_group_" metric per group) and the
 * trace's counters (when trace_counter is not NULL) expand this list. kind:
 * SDK (the app's reports), GPU (a GPU source; per group only once one spoke)
 * or OS.
 */
#define FIGURES_INSTANCE_X(X)                                                                      \
	X(kernels_launched, uint64_t, GPU, "count", "gpu_kernels_launched_total", "counter",       \
	  "gpu.kernels_launched", "Kernel launches the driver accepted")                           \
	X(bytes_pinned, int64_t, GPU, "bytes", "gpu_image_bytes", "gauge", "gpu.image_bytes",      \
	  "Image bytes (PTX, cubin, fatbin) of loaded modules and libraries (bytes_pinned)")       \
	X(back_pressure_rejections, uint64_t, SDK, "count", "back_pressure_rejections_total",      \
	  "counter", "sdk.back_pressure_rejections",                                               \
	  "Launches the driver refused plus rejections the application reported")                  \
	X(yield_count, uint64_t, SDK, "count", "yields_total", "counter", "sdk.yields",            \
	  "Cooperative yields the application reported")                                           \
	X(device_bytes_allocated, int64_t, GPU, "bytes", "gpu_device_bytes", "gauge",              \
	  "gpu.device_bytes", "Device memory allocated and not freed")                             \
	X(graph_launches, uint64_t, GPU, "count", "gpu_graph_launches_total", "counter", NULL,     \
	  "Graph launches the driver accepted")                                                    \
	X(failed_launches, uint64_t, GPU, "count", "gpu_failed_launches_total", "counter", NULL,   \
	  "Launches the driver refused")                                                           \
	X(host_pinned_bytes, int64_t, GPU, "bytes", "gpu_host_pinned_bytes", "gauge",              \
	  "gpu.host_pinned_bytes", "Pinned host memory")                                           \
	X(os_yields, uint64_t, OS, "count", "os_yields_total", "counter", NULL,                    \
	  "sched_yield calls outside the driver's synchronize")

struct figures_instance {
#define FIGURES_INSTANCE_FIELD(field, type, kind, unit, metric, ptype, counter, help) type field;
	FIGURES_INSTANCE_X(FIGURES_INSTANCE_FIELD)
#undef FIGURES_INSTANCE_FIELD
};

enum figures_kind { FIGURES_SDK, FIGURES_GPU, FIGURES_OS };

/* One instance figure, for the views that walk them all. */
struct figures_instance_field {
	const char *name, *unit, *metric, *prom_type, *counter, *help;
	enum figures_kind kind;
	bool is_signed;
	size_t offset; /* in struct figures_instance */
};
enum {
#define FIGURES_INSTANCE_INDEX(field, type, kind, unit, metric, ptype, counter, help)              \
	FIGURES_IN_##field,
	FIGURES_INSTANCE_X(FIGURES_INSTANCE_INDEX)
#undef FIGURES_INSTANCE_INDEX
		FIGURES_INSTANCE_COUNT
};
extern const struct figures_instance_field figures_instance_fields[FIGURES_INSTANCE_COUNT];
/* A figure's value; a signed one as its int64_t bits. */
uint64_t figures_instance_get(const struct figures_instance *in, unsigned i);

/* The Stats fields' names, units and help (TALLY_STATS_X), by index. */
extern const char *const figures_stat_names[TALLY_STATS_COUNT];
extern const char *const figures_stat_units[TALLY_STATS_COUNT];

enum figures_cuda { FIGURES_CUDA_NONE, FIGURES_CUDA_DRIVER, FIGURES_CUDA_CUPTI };
const char *figures_allocator_name(enum figures_allocator a); /* "tally", "glibc", "none" */
const char *figures_cuda_name(enum figures_cuda c);	      /* "none", "driver", "cupti" */

struct figures_target {
	pid_t pid;
	pid_t ns_pid; /* in its own PID namespace */
	pid_t ppid;
	const char *comm;      /* from the target: unescaped */
	const char *cmdline;   /* as ps shows it: escaped, cut; "" or NULL: not known */
	const char *cgroup;    /* its cgroup v2 path, or NULL */
	const char *container; /* the container id its cgroup names, or NULL */
	enum figures_allocator allocator;
	enum figures_cuda cuda;
	const char *cuda_why;	   /* why not CUPTI, when it refused (NULL: it did not) */
	bool late;		   /* attached to a running process */
	bool injected;		   /* ... with --inject (libtally_interpose.so) */
	const char *foreign_alloc; /* allocator none: the malloc it runs on, untraced, or NULL */
	bool read_known;	   /* late, with libtally_alloc: its state was read... */
	bool read_consistent;	   /* ... while no heap moved */
	bool gone;		   /* the target has exited */
	bool ended;		   /* ... and how is known: */
	int exit_code, signal;	   /* exit status or terminating signal (-1 / 0 when not) */
};

/* The allocator as the views name it: one tally cannot trace by its own
 * name ("jemalloc", ...), else figures_allocator_name's. */
const char *figures_target_allocator(const struct figures_target *t);

struct figures_events {
	uint64_t received, lost, lost_record_words, lost_outside_read, malformed, records;
	uint64_t in_place; /* of received: read from the heaps' shared rings */
};

/* The Stats as tally rebuilt them. Signed: a rebuild that lost records can
 * take a term below zero. Glibc mode knows only some terms (known). */
struct figures_stats {
	uint32_t known; /* bit i: v[i] is known */
	int64_t v[TALLY_STATS_COUNT];
	bool identity; /* libtally_alloc: the derived figures below are known */
	int64_t accounted, predicted_resident;
	bool balanced;
	bool have_resident;
	uint64_t resident; /* measured */
};

struct figures_group {
	uint32_t id;
	const char *name; /* the model's, unescaped; NULL when it has none */
	bool shown;	  /* named, or charged something: the groups a view lists */
	uint64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs; /* lifetime, requested */
	int64_t live_bytes;
	int64_t peak_live; /* at the process's peak (when peak.known) */
	uint64_t cpu_ns;
	struct figures_instance instance;
};

/* A peak of live or of mapped (docs/DESIGN.md §11): the whole identity at
 * the record that reached it, in the window of the batch that held it. */
struct figures_peak {
	bool known;		 /* libtally_alloc's records: the replay keeps it */
	bool exact;		 /* one moment of the process (struct model_peak) */
	bool since_attach;	 /* counted from a state read at the attach */
	uint64_t at_ns, from_ns; /* CLOCK_MONOTONIC: at or before at, after from */
	int64_t v[TALLY_STATS_COUNT];
};

struct figures_thread {
	uint32_t tid;
	uint32_t group;
	const char *comm; /* the model's, unescaped */
};

#define FIGURES_MAX_WHY 24

/* What a process did over its life, for the tree's lifetime totals: a
 * forked child's own (session_figures takes off what it inherited). */
struct figures_lifetime {
	uint64_t cpu_ns;
	uint64_t alloc_bytes, alloc_objs, dealloc_bytes, dealloc_objs; /* requested */
	uint64_t kernels_launched, graph_launches;
	uint64_t received, records, in_place; /* events */
};

/*
 * Why a process's figures are not exact: a fixed set of codes beside the
 * sentences, so that a view can name the reason in a bounded label (serve's
 * `reason`, the snapshot's inexact_codes) as well as say it in words
 * (inexact_why, stderr, top's header). X(ENUM, "code"); README lists them.
 */
#define FIGURES_WHY_X(X)                                                                           \
	X(LOST, "lost_events")                                                                     \
	X(MALFORMED, "malformed_records")                                                          \
	X(DEFERRED, "attach_deferred_dropped")                                                     \
	X(ATTACH_MOVED, "state_moved_at_attach")                                                   \
	X(END_MOVED, "state_moved_at_end")                                                         \
	X(END_DIFFERS, "running_at_end_differs")                                                   \
	X(EXIT_DIFFERS, "exit_figures_differ")                                                     \
	X(NO_HANDOVER, "no_exit_handover")                                                         \
	X(EXIT_HELD, "exit_with_records_held")                                                     \
	X(FORK_THREADS, "forked_while_threads_ran")                                                \
	X(GROUP_COLLIDED, "group_id_collided")                                                     \
	X(CUT_TORN, "cut_torn")                                                                    \
	X(UNBALANCED, "identity_unbalanced")                                                       \
	X(UNFOLLOWED, "processes_not_followed")                                                    \
	X(CPU_LOST, "cpu_not_charged")                                                             \
	X(STRAYS, "messages_dropped")                                                              \
	X(NOT_READ, "not_read_at_attach")                                                          \
	X(HELD_UNREAD, "held_records_unread")                                                      \
	X(REGISTRY, "registry_full")                                                               \
	X(NOT_INJECTED, "not_injected")                                                            \
	X(INJECT_TABLE, "inject_table_full")                                                       \
	X(INJECT_UNSEEN, "inject_frees_not_seen")                                                  \
	X(INJECT_EXEC, "inject_exec")                                                              \
	X(INJECT_UNCUT, "inject_end_uncut")                                                        \
	X(INJECT_TORN, "inject_records_in_flight")                                                 \
	X(GLIBC_UNSEEN, "glibc_calls_not_seen")                                                    \
	X(ALLOC_UNTRACED, "allocator_not_traced")                                                  \
	X(GPU_BEFORE, "gpu_before_attach")                                                         \
	X(GPU_LATE, "gpu_probes_late")                                                             \
	X(GPU_FAILED, "gpu_probes_failed")                                                         \
	X(GPU_LOST, "gpu_records_lost")

enum figures_why {
#define FIGURES_WHY_ENUM(e, code) FIGURES_WHY_##e,
	FIGURES_WHY_X(FIGURES_WHY_ENUM)
#undef FIGURES_WHY_ENUM
		FIGURES_WHY_COUNT
};
extern const char *const figures_why_codes[FIGURES_WHY_COUNT]; /* "lost_events", ... */

struct figures_process {
	struct figures_target target;
	bool exact;
	unsigned nwhy;
	const char *why[FIGURES_MAX_WHY];  /* why not exact, in words */
	uint8_t why_code[FIGURES_MAX_WHY]; /* ... and as enum figures_why */
	struct figures_events events;
	struct figures_stats stats;
	struct figures_peak peak, peak_mapped;
	bool have_inprocess; /* the allocator's own Stats (its exit hand-over or a final read) */
	/* --inject: glibc's own totals (mallinfo2, the last the interposer
	 * sent), and the frees of blocks it had not seen allocated */
	bool injected, have_glibc_info;
	uint64_t glibc_info[TALLY_GLIBC_INFO_WORDS];
	uint64_t glibc_table_bytes, unknown_frees, unknown_free_bytes;
	uint64_t inprocess[TALLY_STATS_COUNT];
	struct figures_instance instance; /* the process's: the sum over groups */
	/* the GPU figures are exact (every group's too), else why not */
	bool instance_exact;
	unsigned ninstance_why;
	const char *instance_why[4];
	bool have_device_memory_used;
	uint64_t device_memory_used; /* the driver's own figure (NVML) */
	bool gpu_attached;	     /* a GPU source is attached, even if silent */
	bool gpu_spoke;		     /* ... and has spoken */
	uint64_t start_ns, now_ns;
	unsigned ngroups;	      /* the groups a view lists (named, or charged */
	struct figures_group *groups; /* something), by id */
	size_t nthreads;	      /* live threads, by tid */
	struct figures_thread *threads;
	/* a process of the tree: when it began (CLOCK_MONOTONIC) and ended */
	uint64_t born_ns, ended_ns;
	struct figures_lifetime life; /* what it did: its own, once session_figures has
					 taken off what a forked child inherited */
	bool borrowed;	/* groups and strings belong to whoever kept them (figures_keep) */
	bool inherited; /* forked: its counters began as its parent's (no exec since) */
	/* the OOM killer chose it (oom.killed): what it saw */
	struct model_oom oom;
};

/* The tree's peak of live (docs/DESIGN.md §11): the highest sum of its
 * running processes' live, each as its records stood after a message (or
 * at a process's own peak within it), with the largest of them then. */
#define FIGURES_PEAK_PROCS 16
#define FIGURES_PEAK_GROUPS 16
struct figures_tree_peak {
	bool known;
	bool exact; /* one process held live bytes then, its own peak exact */
	int64_t live, mapped;
	uint64_t at_ns;
	int32_t pid;	       /* the process whose records brought it */
	unsigned nprocs, more; /* listed, largest first; and those not listed */
	struct {
		int32_t pid;
		int64_t live;
	} procs[FIGURES_PEAK_PROCS];
	/* the groups then, summed by name over the processes: the first
	 * FIGURES_PEAK_GROUPS names met, the others counted */
	unsigned ngroups, groups_more;
	struct {
		char name[TALLY_GROUP_NAME_MAX];
		int64_t live;
	} groups[FIGURES_PEAK_GROUPS];
};

/* Sums over the tree: live, mapped, cpu_ns and instance over the processes
 * alive at the end (or at this tick); life over every process it had, ended
 * ones included; exact when every process's figures are. */
struct figures_tree {
	unsigned processes, alive;
	int64_t live, mapped; /* of the processes whose allocator is known */
	uint64_t cpu_ns;
	struct figures_lifetime life;
	bool exact;
	uint64_t inexact; /* processes whose figures are not (folded ones too) */
	struct figures_instance instance;
	bool instance_exact; /* every process's GPU figures are exact */
	bool have_device_memory_used;
	uint64_t device_memory_used;   /* NVML's, over the processes it knows */
	struct figures_tree_peak peak; /* the session's (tree.h), copied in */
};

struct figures {
	unsigned nprocs; /* root first, then the tree's other processes by birth */
	unsigned cap;	 /* of procs */
	struct figures_process *procs;
	struct figures_tree tree;
	/* ended processes whose figures were folded into `folded` (more of
	 * them than tally keeps one by one) */
	uint64_t folded;
	struct figures_lifetime folded_life; /* ... what they did */
	uint64_t folded_inexact;	     /* ... and those not exact */
	uint64_t strays;		     /* messages of processes the tree did not know */
};

/* The peaks of m into p, and each listed group's live at the peak
 * (model/peak.c); after its groups are built. */
void figures_build_peak(struct figures_process *p, const struct model *m,
			const struct figures_sources *src);

/* The group with this id, or NULL when the process lists none. */
const struct figures_group *figures_group_of(const struct figures_process *p, uint32_t id);

/* The figures of this tick: 0, or -ENOMEM (then f is empty). f starts
 * zeroed; a later build reuses what the last one allocated. */
int figures_build(struct figures *f, const struct model *m, const struct figures_sources *src);
void figures_free(struct figures *f);
/* One process's figures into p (zeroed, or reused from an earlier call). */
int figures_build_process(struct figures_process *p, const struct model *m,
			  const struct figures_sources *src);
/* p's figures, self-contained (names and strings copied into one block that
 * `out` owns), for a process that has ended: small, kept for the snapshot. */
int figures_keep(struct figures_process *out, const struct figures_process *p);
void figures_process_free(struct figures_process *p);
/* figures_tree.c: the tree's sums over f->procs (figures_tree). */
void figures_sum_tree(struct figures *f);
/* to += what; to -= what (a forked child's inheritance, not below zero). */
void figures_life_add(struct figures_lifetime *to, const struct figures_lifetime *what);
void figures_life_sub(struct figures_lifetime *to, const struct figures_lifetime *what);
/* What a model's counters say it did (at a fork: what the child inherits). */
void figures_life_of_model(struct figures_lifetime *out, const struct model *m);
/* One process standing for the tree: the root's figures (its final ones once
 * it has gone) plus those of every other process still running, groups
 * merged by name; the root's alone in a tree of one. out owns its groups
 * (figures_process_free); their names are fig's. 0 or -ENOMEM. */
int figures_sum(const struct figures *fig, struct figures_process *out);

#endif /* TALLY_FIGURES_H */
