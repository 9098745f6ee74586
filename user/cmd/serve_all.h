/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * `tally serve --all`: one agent per machine (docs/DESIGN.md §15). It finds
 * every process that runs on libtally_alloc, libtally or the CUDA driver
 * (serve_all_scan.c), whether it started before the agent or after and in
 * whatever container, follows each (and what it starts) in a session of its
 * own, ends that session when the process ends, and serves them all on one
 * /metrics (views/prom_all.c) and /debug/pprof/ (serve_all_pprof.c).
 */
#ifndef TALLY_SERVE_ALL_H
#define TALLY_SERVE_ALL_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "../views/prom_all.h"
#include "cli.h"
#include "serve_http.h"

#define SERVE_ALL_MAX_GLOBS 16
/* Defaults: followed at once; per-process series; the age a process is
 * followed at; each session's BPF ring. The ring is the memory: the kernel
 * allocates it whole and maps it twice into the agent (RSS: twice its size
 * a process, and 1 MiB more). At 4 MiB a thread allocating flat out (50 M
 * allocations a second, tracer_workload churn 1) loses records, counted and
 * flagged; at 32 MiB none (one target's default is 64: cli.h). */
#define SERVE_ALL_MAX_PROCS 16
#define SERVE_ALL_TOP 50
#define SERVE_ALL_MIN_AGE_MS 1000
#define SERVE_ALL_RING_MB 4

struct serve_opts {
	struct cli_target target;
	const char *listen;
	int interval_ms;
	struct sockaddr_storage addr;
	socklen_t addr_len;
	/* --all */
	const char *comm[SERVE_ALL_MAX_GLOBS]; /* --comm GLOB: any of them */
	unsigned ncomm;
	const char *cgroup[SERVE_ALL_MAX_GLOBS]; /* --cgroup GLOB: any of them */
	unsigned ncgroup;
	unsigned max_procs;  /* followed at once */
	unsigned top;	     /* per-process series */
	unsigned min_age_ms; /* younger processes wait */
};

/* One followed root and its tree. */
struct agent_proc {
	struct agent_proc *next;
	pid_t pid;
	uint64_t start; /* its start time: pid reuse */
	struct session s;
	struct figures fig; /* as of the last cut shown */
	bool have_fig;
};

/* What the HTTP thread asks of the agent's thread: one heap profile at a
 * time (serve_all_pprof.c). */
struct agent_pprof {
	pthread_mutex_t lock;
	pthread_cond_t cond;
	bool wanted, busy; /* a request waits; one is being answered */
	bool posted;	   /* its answer waits for its asker */
	bool abandoned;	   /* ... who gave up waiting: thrown away */
	pid_t pid;	   /* its process, or 0: all */
	bool allocs;
	uint64_t gen; /* answers so far */
	uint8_t *buf; /* the answer (taken by the asker), or NULL: err */
	size_t len;
	int err;
	uint64_t start_ns;
	bool failed; /* said once */
};

struct agent {
	const struct serve_opts *o;
	/* the one loader whose sched_switch program charges every session's
	 * CPU (loader.h, loader_cpu_follow), and what the sessions share */
	struct loader *cpu;
	struct loader_cpu_share cpu_share;
	struct agent_proc *procs; /* the agent's thread's alone */
	struct scan *scan;
	struct prom_all_health h, health_now;
	struct serve_text text;
	struct agent_pprof pp;
	bool said_limit, render_failed;
};

/* serve_all_pprof.c */
void agent_pprof_init(struct agent *a);
void agent_pprof_destroy(struct agent *a);
/* The HTTP thread: /debug/pprof/heap or /allocs, ?pid=PID or all. */
enum MHD_Result agent_pprof_reply(struct agent *a, struct MHD_Connection *c, bool allocs);
/* The agent's thread: answer a request waiting, if one does. */
void agent_pprof_tick(struct agent *a);

/* TALLY_EXIT_OK after SIGINT, SIGTERM or -d; another status after one line. */
int serve_all_run(struct serve_opts *o);

/* The processes worth following (serve_all_scan.c). */
struct scan;
struct scan_candidate {
	pid_t pid;
	uint64_t start; /* its start time (clock ticks since boot): pid reuse */
};
/* Whether pid belongs to a process the agent follows already (a root, or
 * in a root's tree). */
typedef bool (*scan_known_fn)(void *ctx, pid_t pid);
struct scan *scan_new(const struct serve_opts *o);
void scan_free(struct scan *sc);
/* One look over /proc: the processes to follow now, at most max of them
 * into out[]; how many. Processes that do not qualify are remembered (by
 * pid and start time) and looked at again now and then, as a process may
 * load the CUDA driver late. */
unsigned scan_run(struct scan *sc, scan_known_fn known, void *ctx, struct scan_candidate *out,
		  unsigned max);
/* An attach of pid failed or was refused: not tried again for a while. */
void scan_refused(struct scan *sc, pid_t pid, uint64_t start, uint64_t retry_ms);
/* Processes looked at in the last scan, and remembered. */
void scan_counts(const struct scan *sc, uint64_t *seen, uint64_t *remembered);

#endif /* TALLY_SERVE_ALL_H */
