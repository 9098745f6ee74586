/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * One tracing session, shared by every subcommand: start the command held at
 * the door or find the running process, load and attach the BPF side, read a
 * running target's starting state, feed the model from the ring buffer, and
 * at the end gather what is left (lost counts, CPU, the allocator's own
 * figures).
 */
#ifndef TALLY_SESSION_H
#define TALLY_SESSION_H

#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "../util/clock.h"
#include "../probes/cuda.h"
#include "../probes/nvml.h"
#include "../os/target_lock.h"
#include "../probes/glibc.h"
#include "../probes/loader.h"
#include "../model/figures.h"
#include "../model/model.h"
#include "../model/sources.h"
#include "../model/tree.h"
#include "../os/target.h"
#include "../util/exit_status.h"

struct session_opts {
	pid_t pid;	 /* attach to this process, or 0 */
	char **cmd;	 /* or start this command */
	bool no_preload; /* start CMD as it is, without tally's libraries */
	bool inject;	 /* -p on glibc: libtally_interpose.so loaded into it */
	bool verbose;	 /* say when attached */
	bool follow;	 /* the processes the target starts too (-- CMD, -f) */
	bool no_glibc;	 /* -p on another malloc: no glibc mode (serve --all) */
	/* serve --all: CPU charged by the agent's one loader (loader.h) */
	const struct loader_cpu_share *cpu_share;
	const char *cmd_stdio;	   /* a started CMD's stdin, stdout and stderr, or NULL: tally's */
	bool cmd_stdout_to_stderr; /* a started CMD's stdout is tally's stderr */
	uint64_t ring_bytes;	   /* ring buffer size */
	uint64_t sample_rate;	   /* heap profiles: mean bytes between samples; 0: none */
	const char **rules;	   /* --group NAME=GLOB */
	unsigned nrules;
};

struct symbolizer;

struct session {
	struct model model; /* the root's */
	struct tree tree;   /* the other processes of the tree */
	bool follow;
	uint64_t sample_rate;	/* heap profiles: mean bytes between samples; 0: none */
	struct symbolizer *sym; /* heap profiles' symbols, kept between them (profile.c) */
	/* a profile's recent growth counts blocks sampled at or after this
	 * (CLOCK_MONOTONIC ns; 0: since the start): snapshot --since */
	uint64_t since_ns;
	struct figures_sources psrc;	 /* scratch: one process's sources */
	struct figures_process pscratch; /* scratch: an ended process's figures */
	struct model *pview;		 /* scratch: a running one's, pending records in */
	struct deferred *tree_held, **tree_held_tail;
	struct loader *loader;
	struct glibc_trace *glibc;
	struct cuda_trace *cuda;
	struct nvml *nvml; /* the driver's own figures, when it has them */
	bool nvml_tried;
	bool cupti;	  /* CMD started with libtally_cupti.so injected */
	bool verbose;	  /* -v: say what happens along the way */
	bool gpu_said[2]; /* the root's CUPTI spoke (its driver probes let go), refused */
	int gpu_mode;	  /* TALLY_GPU (session_start.c) */
	bool gpu_follow;  /* a driver loaded is followed: TALLY_GPU=on, or one installed */
	/* the driver's and glibc mode's objects load on threads of their own
	 * while tally.bpf.o does (session_load.c): cuda, glibc and their
	 * errors are those threads' until session_loaded */
	pthread_t load_threads[2];
	bool loading[2];
	int cuda_err, glibc_err;
	pid_t pid;
	bool spawned;
	bool injected;		   /* -p --inject: libtally_interpose.so loaded into it */
	bool no_glibc;		   /* never glibc mode (its probe per call slows the target) */
	const char *foreign_alloc; /* the malloc it runs on, one tally cannot trace; or NULL */
	struct target_child child;
	int pidfd;
	struct target_lock lock; /* one tally per target */
	bool gone;		 /* the target has exited */
	int exit_status;	 /* a started command's wait status, when gone */
	char comm[TALLY_COMM_LEN];
	char cmdline[SOURCES_CMDLINE_MAX]; /* as last read */
	char alloc_path[TARGET_PATH_MAX];
	uint64_t heaps_addr; /* tally_heaps in the target, 0 if unknown */
	uint64_t cut_addr;   /* tally_cut (cut_read.h), 0 if unknown */
	/* ... given to the OOM program (session_oom.c), whose look over the
	 * tree is next due at oom_arm_ns */
	struct oom_arm oom_arm;
	uint64_t oom_arm_ns;
	char sdk_path[TARGET_PATH_MAX];
	uint64_t registry_addr; /* tally_registry in the target, 0 if unknown */
	bool late;		/* attached to a running process */
	bool execed;		/* it exec'd since: its libraries are found anew */
	uint64_t start_ns;	/* CLOCK_MONOTONIC at attach */
	/* what the views' figures take beside the model (session_refresh;
	 * the state reads of session_state.c fill their part) */
	struct figures_sources src;
	/* messages kept aside while a running target's state is read */
	bool deferring;
	bool drain_stop;
	bool drain_caught_up; /* the ring was empty once since the thread began */
	bool reading;	      /* the read has begun: every message is kept */
	pthread_mutex_t deferred_lock;
	struct deferred *deferred, **deferred_tail;
	struct deferred *spare; /* nodes for reuse */
	/* a view's cut (session_cut_begin): messages held back in part */
	struct deferred *held, **held_tail;
	bool cutting; /* taking the ring up to the cut */
	unsigned torn_in_a_row;
	unsigned nspare;
	uint64_t deferred_bytes;
	/* the ring's lost counters when the state read at attach began and at
	 * the cut at the end: only losses between them matter */
	struct tally_lost lost_base, lost_cut;
	bool have_lost_cut;
	/* every message, after the model has it (tally record) */
	void (*observer)(void *ctx, const void *data, size_t len);
	void *observer_ctx;
};

/* The most tally keeps aside while a running target's state is read (the
 * read takes milliseconds; a busy target hands over ~1 GB/s of records). */
#define SESSION_DEFER_MAX ((uint64_t)SOURCES_DEFER_MAX_MB << 20)

extern volatile sig_atomic_t session_exiting;
void session_install_signals(void);

/* Returns TALLY_EXIT_OK or another status, after one line on stderr. */
int session_start(struct session *s, const struct session_opts *o);
/* Drain the ring and look at the target; waits up to timeout_ms. Returns 1
 * when the target is gone, 0 otherwise, -errno on a failure. */
int session_poll(struct session *s, int timeout_ms);
/* What the figures take beside the ring (lost counts, CPU per group, the GPU
 * and glibc probes' counters, the target's end) into s->src: at every tick
 * of a view, and at the end. */
void session_refresh(struct session *s);
/* A view's tick: the figures as of one moment (session_state.c says how),
 * the records its threads have not handed over yet included, so that a view
 * of an idle target is exact; then what came past that moment, once the
 * view has its figures. */
void session_cut_begin(struct session *s);
void session_cut_end(struct session *s);
/* Whether the view shows this tick: a torn cut (one thread's records in
 * before another's it depends on) is skipped, up to a few in a row. */
bool session_cut_shown(struct session *s);
/* The model of a process of the tree (the root's for pid 0, or one the
 * tree no longer holds). */
const struct model *session_model_of(struct session *s, pid_t pid);
/* The figures of every process of the tree, root first (after
 * session_refresh): 0 or -ENOMEM. */
int session_figures(struct session *s, struct figures *f);
/* Sampling as asked in a running process tally's allocator serves (its
 * rate, and a new epoch: its objects announced again); quiet otherwise. */
void session_sample_attach(const struct session *s, pid_t pid);
/* A running process of the tree: its CUDA driver's probes, when it has one
 * loaded already (said on stderr: its GPU figures count from now). */
void session_cuda_running(struct session *s, pid_t pid);
/* What pid's GPU records say, once each (said[]: already): CUPTI spoke
 * (its driver probes go), or refused tally (one line on stderr). */
void session_gpu_news(struct session *s, pid_t pid, const struct model *m, bool said[2]);
/* The driver's own figure of pid's device memory (NVML), when it has one. */
void session_nvml(struct session *s, pid_t pid, struct cuda_figures *f);
/* Everything that is still to be had, for the final figures. */
void session_finish(struct session *s);
/* How the target ended: false while it runs (or nobody knows); else its wait
 * status (waitpid's for a started CMD, the kernel's for an attached one). */
bool session_exit_status(const struct session *s, int *status);
/* One line on stderr when the target was killed by a signal. */
void session_report_end(const struct session *s, const char *who);
void session_close(struct session *s);

#endif /* TALLY_SESSION_H */
