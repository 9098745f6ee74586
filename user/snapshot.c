// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The snapshot document of DESIGN.md §6, and `tally snapshot`. The document
 * is built in memory and written in one piece, so that a failure never
 * leaves half of it on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "cli.h"
#include "figures.h"
#include "outfile.h"
#include "snapshot.h"

struct snapshot_opts {
	struct cli_target target;
	const char *out; /* -o FILE, or NULL: stdout */
};

/* Signed: a rebuild that lost records can take a term below zero, which
 * must read as negative, not as 2^64 - x (the allocator's own never are). */
static void write_stats11(struct json_writer *w, const uint64_t v[TALLY_STATS_FIELDS])
{
	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++)
		json_kv_i64(w, figures_stat_names[i], (int64_t)v[i]);
}

/* The instance figures (DESIGN.md §4) of one group, or of the process when
 * g is MODEL_PROCESS: the five of the contract, then tally's own. */
static void write_instance(struct json_writer *w, const struct session *s, uint32_t g)
{
	struct model_instance in;

	model_instance(&s->model, g, &in);
	json_kv_u64(w, "kernels_launched", in.kernels_launched);
	json_kv_i64(w, "bytes_pinned", in.bytes_pinned);
	json_kv_u64(w, "back_pressure_rejections", in.back_pressure_rejections);
	json_kv_u64(w, "yield_count", in.yield_count);
	json_kv_i64(w, "device_bytes_allocated", in.device_bytes_allocated);
	json_kv_u64(w, "graph_launches", in.graph_launches);
	json_kv_u64(w, "failed_launches", in.failed_launches);
	json_kv_i64(w, "host_pinned_bytes", in.host_pinned_bytes);
	json_kv_u64(w, "os_yields", in.os_yields);
	if (g == MODEL_PROCESS)
		json_kv_bool(w, "scheduler", in.yield_count > 0);
}

static void write_stats(struct json_writer *w, const struct session *s)
{
	struct tally_stats st;
	uint64_t v[TALLY_STATS_FIELDS];
	unsigned known = figures_stats(s, v);

	json_key(w, "stats");
	json_begin_object(w);
	if (s->allocator == SESSION_ALLOC_TALLY) {
		model_stats(&s->model, &st);
		write_stats11(w, v);
		json_kv_i64(w, "accounted", (int64_t)tally_stats_accounted(&st));
		json_kv_bool(w, "balanced", tally_stats_balanced(&st));
		json_kv_i64(w, "predicted_resident", (int64_t)tally_stats_predicted_resident(&st));
		if (s->have_resident)
			json_kv_u64(w, "measured_resident", s->resident);
		else
			json_kv_null(w, "measured_resident");
	} else {
		/* glibc can say what is live, its rounding and its mmapped
		 * chunks; the other terms have no glibc meaning */
		for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++) {
			if (known & (1u << i))
				json_kv_i64(w, figures_stat_names[i], (int64_t)v[i]);
			else
				json_kv_null(w, figures_stat_names[i]);
		}
		json_kv_null(w, "accounted");
		json_kv_null(w, "balanced");
		json_kv_null(w, "predicted_resident");
		json_kv_null(w, "measured_resident");
	}
	json_end_object(w);
	json_key(w, "stats_inprocess");
	if (s->allocator == SESSION_ALLOC_TALLY && s->have_final_inprocess) {
		figures_stats_array(&s->final_inprocess, v);
		json_begin_object(w);
		write_stats11(w, v);
		json_end_object(w);
	} else if (s->allocator == SESSION_ALLOC_TALLY && s->model.have_inprocess) {
		json_begin_object(w);
		write_stats11(w, s->model.inprocess);
		json_end_object(w);
	} else {
		json_null(w);
	}
}

static void write_groups(struct json_writer *w, const struct session *s)
{
	json_key(w, "groups");
	json_begin_array(w);
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		const struct model_group *mg = &s->model.groups[g];
		struct figures_group fg;

		figures_group(s, g, &fg);
		if (!fg.shown)
			continue;
		json_begin_object(w);
		json_kv_u64(w, "id", g);
		if (mg->name[0])
			json_kv_str(w, "name", mg->name);
		else
			json_kv_null(w, "name");
		json_kv_u64(w, "allocated_bytes", fg.alloc_bytes);
		json_kv_u64(w, "allocated_objects", fg.alloc_objs);
		json_kv_u64(w, "deallocated_bytes", fg.dealloc_bytes);
		json_kv_u64(w, "deallocated_objects", fg.dealloc_objs);
		json_kv_i64(w, "live_bytes", fg.live_bytes);
		json_kv_u64(w, "cpu_ns", fg.cpu_ns);
		json_key(w, "instance");
		json_begin_object(w);
		write_instance(w, s, g);
		json_end_object(w);
		json_end_object(w);
	}
	json_end_array(w);
}

/* How the target ended: "exit_code" (null when killed or still running) and
 * "signal" (null unless killed). */
static void write_end(struct json_writer *w, const struct session *s)
{
	char sig[16];
	int st;

	if (!session_exit_status(s, &st)) {
		json_kv_null(w, "exit_code");
		json_kv_null(w, "signal");
	} else if (WIFSIGNALED(st)) {
		json_kv_null(w, "exit_code");
		snprintf(sig, sizeof(sig), "SIG%s",
			 sigabbrev_np(WTERMSIG(st)) ? sigabbrev_np(WTERMSIG(st)) : "?");
		json_kv_str(w, "signal", sig);
	} else {
		json_kv_i64(w, "exit_code", WEXITSTATUS(st));
		json_kv_null(w, "signal");
	}
}

/* Why the figures are not exact (none: they are); at most SNAPSHOT_MAX_WHY. */
unsigned snapshot_inexact_why(const struct session *s, const char *why[SNAPSHOT_MAX_WHY])
{
	unsigned n = 0;

	if (s->model.lost_msgs || s->model.lost_words)
		why[n++] = "events lost: the ring was full";
	if (s->model.malformed || s->model.malformed_bpf)
		why[n++] = "malformed records refused";
	if (s->deferred_dropped)
		why[n++] = "records that came while the state was read at attach were more than "
			   "tally keeps aside (64 MiB): some dropped";
	if (s->late && !s->late_consistent && s->allocator == SESSION_ALLOC_TALLY)
		why[n++] = "the allocator's state moved while it was read at attach";
	if (s->have_final_inprocess && s->allocator == SESSION_ALLOC_TALLY) {
		/* a target still running at the end: its own figures were read
		 * while its threads ran; a heap caught in the middle of an
		 * operation makes the two disagree, and then neither is exact */
		struct tally_stats st;
		model_stats(&s->model, &st);
		if (!s->final_consistent)
			why[n++] = "the allocator's state moved while it was read at the end";
		else if (memcmp(&st, &s->final_inprocess, sizeof(st)))
			why[n++] =
				"the target was running: tally's figures and the allocator's own, "
				"read as its threads ran, differ";
	}
	/* ended without the allocator's exit hand-over (killed, or _exit): what
	 * its threads held and had not handed over may be missing */
	if (s->gone && s->allocator == SESSION_ALLOC_TALLY && !s->model.have_inprocess)
		why[n++] = "ended without the allocator's exit hand-over";
	if (s->allocator == SESSION_ALLOC_TALLY && s->model.have_inprocess &&
	    s->model.inprocess_threads_held)
		why[n++] = "exit() while other threads held records they never handed over";
	if (s->model.collided_id)
		why[n++] =
			"an SDK group got the id of a --group rule's group: their figures merged";
	if (s->cut_torn && s->allocator == SESSION_ALLOC_TALLY)
		why[n++] = "a thread's records from before this moment were still on their way";
	if (s->allocator == SESSION_ALLOC_TALLY) {
		/* a view's tick while threads run: one thread's records (a
		 * foreign free) may be in before another's (the allocation) */
		struct tally_stats cut;
		model_stats(&s->model, &cut);
		if (!tally_stats_balanced(&cut))
			why[n++] = "the identity does not balance at this moment: records of "
				   "other threads still on their way";
	}
	if (s->late && s->model.registry_threads_dropped)
		why[n++] = "more threads in groups than the SDK's registry holds (4096) at attach: "
			   "some threads' groups unknown, their CPU charged to root";
	if (s->allocator == SESSION_ALLOC_GLIBC &&
	    !(s->glibc_fig && glibc_figures_exact(s->glibc_fig) && !s->late))
		why[n++] = "glibc mode: not every call was seen";
	return n;
}

bool snapshot_exact(const struct session *s)
{
	const char *why[SNAPSHOT_MAX_WHY];

	return snapshot_inexact_why(s, why) == 0;
}

void snapshot_write(struct json_writer *w, const struct session *s)
{
	json_begin_object(w);
	json_key(w, "target");
	json_begin_object(w);
	json_kv_i64(w, "pid", s->pid);
	json_kv_str(w, "comm", s->comm);
	json_kv_str(w, "allocator", figures_allocator(s));
	json_kv_str(w, "cuda", figures_cuda(s));
	json_kv_str(w, "attach", s->late ? "running" : "start");
	/* a late attach to a busy allocator may find heaps moving while it reads
	 * them: then the figures are not exact, and this says why */
	if (s->late && s->allocator == SESSION_ALLOC_TALLY)
		json_kv_bool(w, "state_read_consistent", s->late_consistent);
	write_end(w, s);
	json_end_object(w);
	const char *why[SNAPSHOT_MAX_WHY];
	unsigned nwhy = snapshot_inexact_why(s, why);
	json_kv_bool(w, "exact", nwhy == 0);
	if (nwhy) {
		json_key(w, "inexact_why");
		json_begin_array(w);
		for (unsigned i = 0; i < nwhy; i++)
			json_string(w, why[i]);
		json_end_array(w);
	}
	json_key(w, "events");
	json_begin_object(w);
	json_kv_u64(w, "received", s->model.received);
	json_kv_u64(w, "lost", s->model.lost_msgs);
	json_kv_u64(w, "lost_record_words", s->model.lost_words);
	/* lost before the state read at a late attach, or after the final
	 * cut: their records are in the state read, or past the snapshot */
	json_kv_u64(w, "lost_outside_read", s->lost_ignored);
	json_kv_u64(w, "malformed", s->model.malformed + s->model.malformed_bpf);
	json_kv_u64(w, "records", s->model.records);
	json_end_object(w);
	write_stats(w, s);
	json_key(w, "instance");
	json_begin_object(w);
	write_instance(w, s, MODEL_PROCESS);
	json_end_object(w);
	write_groups(w, s);
	json_end_object(w);
}

int snapshot_print(FILE *out, const struct session *s)
{
	struct json_writer w;
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int err;

	if (!mem)
		return -errno;
	json_init(&w, mem, true);
	snapshot_write(&w, s);
	err = json_finish(&w);
	if (fclose(mem) && !err)
		err = -EIO;
	if (!err && (fwrite(buf, 1, len, out) != len || fflush(out)))
		err = -EIO;
	free(buf);
	return err;
}

static const char snapshot_doc[] =
	"Trace a process and write one JSON snapshot (on stdout, or to -o FILE): the byte "
	"identity, the allocator's own figures, CPU and memory per resource group.\v"
	"The snapshot is written when the target exits, after -d SECS, or on SIGINT/SIGTERM. "
	"With -- CMD, tally starts CMD with libtally_alloc.so and libtally.so preloaded and "
	"attached before its first instruction. Without -o, stdout carries nothing but the "
	"snapshot: CMD's stdout goes to tally's stderr; with -o, CMD's stdout is tally's "
	"stdout. CMD keeps tally's stdin and stderr. FILE is written beside itself and renamed "
	"when complete, never half-written. \"target\" says how CMD ended (exit_code, or the "
	"signal that killed it); a target killed by a signal is also one line on stderr. A "
	"process "
	"without libtally_alloc is traced in glibc mode: a probe on every malloc call, which is "
	"slow (microseconds a call), and only the live bytes, rounding and mmapped chunks are "
	"known.\n\n"
	"EXAMPLES:\n"
	"  tally snapshot -- ./server --port 8080     start and trace until it exits\n"
	"  tally snapshot -o s.json -- make -j2       the snapshot to s.json, make's output as usual\n"
	"  tally snapshot -p 1234 -d 5                attach to PID 1234 for 5 seconds\n"
	"  tally snapshot --group io='io-*' -- ./app  threads named io-* form group io\n"
	"\nEXIT STATUS: 0 snapshot printed, 2 usage, 3 no permission, 4 no BTF, 5 no such "
	"process, 6 PID already traced, 7 CMD could not start, 1 other failures.";

static int run_snapshot(struct snapshot_opts *so)
{
	struct cli_target *c = &so->target;
	struct outfile of = { 0 };
	struct session s;
	int rc, err;

	/* before anything starts: a path that cannot be written is a usage error */
	if (so->out) {
		err = outfile_open(&of, so->out);
		if (err) {
			fprintf(stderr,
				"tally snapshot: cannot write %s: %s (see tally snapshot --help)\n",
				so->out, strerror(-err));
			return TALLY_EXIT_USAGE;
		}
	}
	c->o.cmd_stdout_to_stderr = !so->out;
	session_install_signals();
	rc = session_start(&s, &c->o);
	if (rc) {
		outfile_abort(&of);
		session_close(&s);
		return rc;
	}
	cli_run(&s, c, 0, NULL, NULL);
	session_finish(&s);
	err = snapshot_print(so->out ? of.f : stdout, &s);
	if (so->out && !err)
		err = outfile_commit(&of);
	else
		outfile_abort(&of);
	if (err)
		fprintf(stderr, "tally snapshot: cannot write the snapshot%s%s: %s\n",
			so->out ? " to " : "", so->out ? so->out : "", strerror(-err));
	int st;
	session_report_end(&s, "tally snapshot");
	if (!snapshot_exact(&s) && (s.model.lost_msgs || s.model.lost_words))
		fprintf(stderr,
			"tally: %llu messages (%llu words of allocator records) lost: the ring was full; "
			"try a larger --ring-mb\n",
			(unsigned long long)s.model.lost_msgs,
			(unsigned long long)s.model.lost_words);
	else if (s.gone && s.allocator == SESSION_ALLOC_TALLY && !s.model.have_inprocess &&
		 !(session_exit_status(&s, &st) && WIFSIGNALED(st))) /* said with the signal */
		fprintf(stderr, "tally: the target ended without the allocator's exit hand-over "
				"(_exit?): records its threads held may be missing\n");
	if (s.model.collided_id)
		/* no names here: the SDK's come from the target, unescaped */
		fprintf(stderr,
			"tally: an SDK group took id %u, a --group rule's (255 groups in all): "
			"their figures are merged\n",
			s.model.collided_id);
	if (s.allocator == SESSION_ALLOC_TALLY && s.model.inprocess_threads_held)
		fprintf(stderr, "tally: the target called exit() while other threads held records "
				"they never handed over: the figures are not exact\n");
	session_close(&s);
	return err ? TALLY_EXIT_FAIL : TALLY_EXIT_OK;
}

static const struct argp_option snapshot_options[] = {
	{ "output", 'o', "FILE", 0,
	  "Write the snapshot to FILE (default: stdout; CMD's stdout then goes to stderr)", 0 },
	{ 0 },
};

static error_t parse_snapshot_opt(int key, char *arg, struct argp_state *state)
{
	struct snapshot_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'o':
		if (!*arg)
			cli_usage_error(state, "-o wants a file name");
		o->out = arg;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_snapshot(int argc, char **argv)
{
	static const struct argp_child children[] = { { &cli_target_argp, 0, NULL, 0 }, { 0 } };
	struct argp argp = { snapshot_options,
			     parse_snapshot_opt,
			     "(-p PID | -- CMD [ARGS...])",
			     snapshot_doc,
			     children,
			     NULL,
			     NULL };
	struct snapshot_opts o = { 0 };

	cli_target_init(&o.target);
	argv[0] = "tally snapshot";
	if (argp_parse(&argp, argc, argv, ARGP_IN_ORDER, NULL, &o))
		return TALLY_EXIT_USAGE;
	return run_snapshot(&o);
}
