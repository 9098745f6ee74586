// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally top`: the live view (docs/DESIGN.md §6). The session collects, figures.c
 * builds each tick's figures, top_rows.c turns them into frames (top_sites.c
 * the heap profile, for the sites view), and either top_view.c (curses) or
 * top_text.c (batch: plain text) shows them. This file holds the command line
 * and the loops that tie them together.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "../session/profile.h"
#include "../views/snapshot_doc.h"
#include "../views/top/top_frame.h"
#include "../views/top/top_sites.h"
#include "../views/top/top_text.h"
#include "../views/top/top_view.h"

#define TOP_INTERVAL_MS 1000
#define TOP_INTERVAL_MIN 10
#define TOP_INTERVAL_MAX 3600000
#define TOP_IDLE_WAIT_MS 100 /* key wait once the target is gone: nothing else to poll */

enum { OPT_FINAL_SNAPSHOT = 2000, OPT_VIEW };

struct top_opts {
	struct cli_target t;
	int interval_ms;
	bool batch;
	unsigned long frames; /* 0: until the target exits, q or a signal */
	struct top_order order;
	bool threads;
	bool final_snapshot; /* batch: the snapshot document after the last frame (tally demo) */
	enum top_mode mode;
	bool mode_set; /* --view; else groups live, each process's groups in batch */
};

struct top_run {
	struct session s;
	const struct top_opts *o;
	struct figures fig; /* each tick's, reused */
	struct top_prev prev;
	struct top_frame frame;
	unsigned long shown; /* frames built at a tick */
	int err;	     /* batch: the first write error */
};

static const struct argp_option top_options[] = {
	{ "interval", 'i', "MS", 0,
	  "Refresh every MS milliseconds, " CLI_STR(TOP_INTERVAL_MIN) " to " CLI_STR(
		  TOP_INTERVAL_MAX) " (default " CLI_STR(TOP_INTERVAL_MS) ")",
	  0 },
	{ "batch", 'b', NULL, 0,
	  "Plain-text frames on stdout, without curses (default when stdin or stdout is not a "
	  "terminal)",
	  0 },
	{ "frames", 'n', "N", 0,
	  "Stop after N frames (default: when the target exits; the live view: on q)", 0 },
	{ "sort", 's', "COLUMN", 0,
	  "Sort by COLUMN: name, cpu, live, peak, allocs, frees, kernels, device, pinned, "
	  "rejects or yields (default cpu; names A to Z, figures largest first; peak: the sites "
	  "view too, by bytes in use at the peak)",
	  0 },
	{ "threads", 't', NULL, 0,
	  "The live view starts with the thread table; batch frames add it after the groups", 0 },
	{ "view", OPT_VIEW, "ROWS", 0,
	  "Rows: groups (summed over the processes of the tree, the live view's default), "
	  "processes, process-groups (each process's groups, the batch default), or sites (the "
	  "heap profile by call site)",
	  0 },
	{ "final-snapshot", OPT_FINAL_SNAPSHOT, NULL, OPTION_HIDDEN, NULL, 0 },
	{ 0 },
};

static error_t parse_top_opt(int key, char *arg, struct argp_state *state)
{
	struct top_opts *o = state->input;
	enum top_col col;
	double v;

	switch (key) {
	case ARGP_KEY_INIT:
		/* the target's options are the child's: hand it its part */
		state->child_inputs[0] = &o->t;
		break;
	case 'i':
		o->interval_ms = cli_interval_ms(state, arg, TOP_INTERVAL_MIN, TOP_INTERVAL_MAX);
		break;
	case 'b':
		o->batch = true;
		break;
	case 'n':
		if (cli_number(arg, 1, 1e9, &v) || v != (double)(unsigned long)v)
			cli_usage_error(state, "bad frame count '%s': want a whole number >= 1",
					arg);
		o->frames = (unsigned long)v;
		break;
	case 's':
		if (top_col_parse(arg, &col))
			cli_usage_error(state,
					"bad sort column '%s': want name, cpu, live, peak, allocs, "
					"frees, kernels, device, pinned, rejects or yields",
					arg);
		o->order.col = col;
		o->order.desc = top_col_default_desc(col);
		break;
	case 't':
		o->threads = true;
		break;
	case OPT_FINAL_SNAPSHOT:
		o->final_snapshot = true;
		break;
	case OPT_VIEW:
		if (top_mode_parse(arg, &o->mode))
			cli_usage_error(
				state,
				"bad view '%s': want groups, processes, process-groups or sites",
				arg);
		o->mode_set = true;
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

/*
 * The sites view's rows: the tree's heap profile as of now. Built for this
 * view alone, once a frame: it symbolizes every site. A failure is said by
 * the frame, not on stderr, which would write over the live view.
 */
static void build_sites(struct top_run *r, const struct top_order *order)
{
	bool by_peak = order->col == TOP_COL_PEAK;
	struct profile pr;
	int err;

	if (!r->s.sample_rate) {
		top_sites_build(&r->frame, NULL, by_peak);
		return;
	}
	err = profile_build(&r->s, &pr);
	if (err)
		top_sites_failed(&r->frame, err);
	else
		top_sites_build(&r->frame, &pr.p, by_peak);
	profile_free(&pr);
}

/* A frame of r->fig, its rates since prev, sorted by order. An -ENOMEM on
 * the way leaves what it could not build empty: the rest is still worth
 * showing. */
static void frame_of(struct top_run *r, struct top_prev *prev, const struct top_order *order,
		     enum top_mode mode)
{
	top_frame_build(&r->frame, &r->fig, prev, mode);
	top_sort(r->frame.rows, r->frame.nrows, order->col, order->desc);
	if (mode == TOP_MODE_SITES)
		build_sites(r, order);
}

/* A frame of the figures now. */
static void build(struct top_run *r, struct top_prev *prev, const struct top_order *order,
		  enum top_mode mode)
{
	if (!session_figures(&r->s, &r->fig))
		frame_of(r, prev, order, mode);
}

static int batch_frame(struct top_run *r)
{
	build(r, &r->prev, &r->o->order, r->o->mode);
	r->shown++;
	r->err = top_text_frame(stdout, &r->frame, r->shown, r->o->threads);
	if (r->err)
		return 1;
	return r->o->frames && r->shown >= r->o->frames;
}

static int batch_tick(struct session *s, void *ctx)
{
	(void)s;
	return batch_frame(ctx);
}

/*
 * Batch: a frame every interval. When the target exits first, one last frame
 * with its final figures (and "target exited"), then the end, even if fewer
 * than -n frames were printed: there is nothing more to count.
 */
static int run_batch(struct top_run *r)
{
	cli_run(&r->s, &r->o->t, r->o->interval_ms, batch_tick, r);
	if (!r->err && r->s.gone && !session_exiting &&
	    (!r->o->frames || r->shown < r->o->frames)) {
		session_finish(&r->s);
		batch_frame(r);
	}
	if (!r->err && r->o->final_snapshot) {
		if (!r->s.gone || session_exiting)
			session_finish(&r->s);
		r->err = session_figures(&r->s, &r->fig);
		struct profile pr;
		const struct prof *sites = profile_for_snapshot(&r->s, &pr);
		if (!r->err)
			r->err = snapshot_print(stdout, &r->fig, sites);
		profile_free(&pr);
	}
	if (r->err == -EPIPE)
		return TALLY_EXIT_OK; /* the reader had enough (| head): not a failure */
	if (r->err) {
		fprintf(stderr, "tally top: cannot write a frame: %s\n", strerror(-r->err));
		return TALLY_EXIT_FAIL;
	}
	return TALLY_EXIT_OK;
}

/*
 * The live view, cli_run's loop with the keyboard in it: poll the ring every
 * 2 ms, read keys between polls, and build a frame every interval. Paused,
 * the screen keeps its frame while the rates' base moves on, so that the
 * first frame after a pause shows rates of its own interval. When the target
 * exits, its final figures stay on the screen until q.
 */
/* A tick of the live view: the figures at the cut, into a frame, or only
 * into the rates' base while paused. Returns true when the frame is new. */
static bool live_tick(struct top_run *r, struct top_ui *ui)
{
	struct session *s = &r->s;
	bool shown;

	session_cut_begin(s);
	session_refresh(s);
	shown = session_cut_shown(s); /* a torn cut: the next tick */
	if (shown && ui->paused) {
		if (!session_figures(s, &r->fig))
			top_prev_take(&r->prev, &r->fig, ui->mode);
	} else if (shown) {
		build(r, &r->prev, &ui->order, ui->mode);
		r->shown++;
	}
	/* the frame has its figures: what came past the cut, now */
	session_cut_end(s);
	if (shown && !ui->paused && s->spawned)
		top_view_repaint();
	return shown && !ui->paused;
}

/* The target is gone: its final figures, on a clean screen. */
static void live_final(struct top_run *r, struct top_ui *ui)
{
	session_finish(&r->s);
	build(r, &r->prev, &ui->order, ui->mode);
	top_view_repaint();
	top_view_draw(&r->frame, ui);
}

/* A frame of another kind of rows (or the first): the figures of the last
 * tick, their rates unknown until the next. */
static void remode(struct top_run *r, struct top_ui *ui)
{
	struct top_prev *none = calloc(1, sizeof(*none));

	if (!none)
		return;
	frame_of(r, none, &ui->order, ui->mode);
	free(none);
}

/* A new order: the rows sorted; the sites, by the peak when it is the
 * column, chosen again from the profile now (the sites most in use at the
 * peak are not the most in use now), or while paused, the rows shown
 * sorted, so that the screen keeps its moment. */
static void resort(struct top_run *r, const struct top_ui *ui)
{
	bool by_peak = ui->order.col == TOP_COL_PEAK;

	top_sort(r->frame.rows, r->frame.nrows, ui->order.col, ui->order.desc);
	if (ui->mode != TOP_MODE_SITES || by_peak == r->frame.sites_by_peak)
		return;
	if (ui->paused)
		top_sites_sort(&r->frame, by_peak);
	else
		build_sites(r, &ui->order);
}

static int run_live(struct top_run *r)
{
	struct session *s = &r->s;
	uint64_t interval = (uint64_t)r->o->interval_ms * NSEC_PER_MSEC;
	uint64_t next = clock_now_ns() + interval;
	uint64_t deadline = cli_deadline(s, &r->o->t);
	struct top_ui ui = { .order = r->o->order, .threads = r->o->threads, .mode = r->o->mode };
	bool final = false;
	int err = 0;

	/* a first frame at once, its rates unknown, rather than an empty screen */
	remode(r, &ui);
	top_view_draw(&r->frame, &ui);
	while (!session_exiting) {
		enum top_view_event ev;
		uint64_t now;

		err = s->gone ? 0 : session_poll(s, 2);
		if (err < 0)
			break;
		err = 0;
		if (s->gone && !final) {
			live_final(r, &ui);
			final = true;
		}
		ev = top_view_input(&ui, s->gone ? TOP_IDLE_WAIT_MS : 0);
		if (ev == TOP_VIEW_QUIT)
			break;
		now = clock_now_ns();
		if (!final && now >= next) {
			next = now + interval;
			if (live_tick(r, &ui))
				ev = TOP_VIEW_REDRAW;
		}
		if (ev == TOP_VIEW_REMODE)
			remode(r, &ui);
		if (ev == TOP_VIEW_RESORT)
			resort(r, &ui);
		if (ev != TOP_VIEW_IDLE)
			top_view_draw(&r->frame, &ui);
		if ((r->o->frames && r->shown >= r->o->frames) || (deadline && now >= deadline))
			break;
	}
	top_view_close();
	if (err) {
		fprintf(stderr, "tally top: lost the target's events: %s\n", strerror(-err));
		return TALLY_EXIT_FAIL;
	}
	return TALLY_EXIT_OK;
}

static bool colors_off(void)
{
	const char *v = getenv("NO_COLOR");

	/* no-color.org: present and not empty */
	return v && v[0];
}

static int run_top(struct top_opts *o)
{
	struct top_run *r = calloc(1, sizeof(*r));
	bool batch = o->batch;
	int rc;

	if (!r) {
		fprintf(stderr, "tally top: out of memory\n");
		return TALLY_EXIT_FAIL;
	}
	r->o = o;
	session_install_signals();
	if (!batch && (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)))
		batch = true; /* a pipe or a file: frames a script can read */
	/* a started CMD would write over the live view; in batch mode stdout
	 * carries the frames, and CMD's stdout goes to tally's stderr */
	if (!batch)
		o->t.o.cmd_stdio = "/dev/null";
	else
		o->t.o.cmd_stdout_to_stderr = true;
	rc = session_start(&r->s, &o->t.o);
	if (rc)
		goto out;
	/* the base of the first frame's rates: the counters at attach */
	session_refresh(&r->s);
	if (!o->mode_set)
		o->mode = batch ? TOP_MODE_PROC_GROUPS : TOP_MODE_GROUPS;
	if (!session_figures(&r->s, &r->fig))
		top_prev_take(&r->prev, &r->fig, o->mode);
	if (!batch && top_view_open(colors_off())) {
		const char *term = getenv("TERM");
		fprintf(stderr, "tally top: cannot drive the terminal (TERM=%s): batch mode\n",
			term ? term : "unset");
		batch = true;
	}
	rc = batch ? run_batch(r) : run_live(r);
	top_view_close();
	session_report_end(&r->s, "tally top");
out:
	top_view_close();
	session_close(&r->s);
	top_frame_free(&r->frame);
	figures_free(&r->fig);
	free(r);
	return rc;
}

static const char top_doc[] =
	"A live view of a traced process: a header (target, uptime, its peak of live bytes "
	"and when, events a second, lost events, whether the figures are exact), the byte "
	"identity as one bar split into its eight terms with their bytes, and a row per "
	"resource group: CPU % (of one CPU), live bytes, PEAK (live bytes at the process's "
	"peak), allocations and frees a second, kernels launched, device bytes, pinned host "
	"bytes, back-pressure rejections, yields. A figure shown as - is not known: rates "
	"before an interval has passed, GPU columns without a GPU source, Stats terms glibc "
	"has no name for, the peak where no allocator's records keep it (glibc mode, an "
	"allocator tally does not trace).\v"
	"The peak is the highest live the records reached, since the "
	"start or the attach ('since attach'); the header's is the root's, 'peak 45.1M at "
	"2.1s' (a text frame: 'peak: live 47290368 at 2.1 s'; seconds after its start), "
	"with a ~ before the bytes when it is not one moment of the "
	"process (other threads moved live bytes within the batch that reached it: over or "
	"under by what they moved). A group row's PEAK is its live at its process's peak; in "
	"the groups view, the sum over the processes of each one's group at that process's "
	"own peak (not one moment of the tree; a process whose peak is not known adds "
	"nothing). A process row's PEAK is its peak of live.\n\n"
	"A traced tree (the processes CMD starts; -p PID -f): the header counts its "
	"processes, the identity sums those running, and the rows are, v to switch (--view): "
	"the groups summed over the tree by name (the live view's default), one row per "
	"process, or each process's groups (batch frames' default, each process under a "
	"'process PID COMM: running' line); a process that ends stays one refresh, with how it "
	"ended.\n\n"
	"The sites view (--view sites, or h) is the heap profile by call site, of the root and "
	"the processes running: a row per site, most bytes in use first (the first 200; with -s "
	"peak or m, most in use at the peak first: what held memory then, freed since or not), "
	"with its bytes in use, in use at its process's peak (PEAK), its objects in use, the "
	"bytes it allocated, its group, its process and its "
	"stack, leaf first ('leaf < caller < ...'; a frame without a function is MODULE+0xOFFSET "
	"or its address). Its figures are estimates from samples; with --no-sample it has none. "
	"The live view cuts a stack at the terminal's edge.\n\n"
	"KEYS: q quit; p pause (tracing goes on); v view (groups, processes, process-groups, "
	"sites); h heap sites, or back to the groups; t thread table (tid, name, current group) or "
	"groups; s or > next sort column, < previous; r reverse; n c l m a f k d i e y sort by "
	"name, cpu, live, peak, allocs, frees, kernels, device, pinned, rejects, yields (the "
	"same key again reverses; in the sites view l and m choose in use or at the peak); arrows, PgUp, PgDn scroll; ^L redraw.\n\n"
	"When stdin or stdout is not a terminal, or with -b, frames are plain text, each "
	"beginning with a line '--- frame K ---' and ending with a blank line, one every -i "
	"MS; -n N stops after N frames. When the target exits, batch mode prints one last "
	"frame with its final figures and stops, even if fewer than N frames were printed; "
	"the live view says 'target exited' and keeps the last figures until q. In batch mode "
	"stdout carries nothing but the frames: a started CMD's stdout goes to tally's stderr. "
	"In the live "
	"view a started CMD's stdin, stdout and stderr are /dev/null, so that it cannot write "
	"over the screen. Quitting leaves CMD running, as tally snapshot does. Names from the target are shown with "
	"control and non-ASCII bytes as \\xNN and '\\' as '\\\\'. NO_COLOR turns colors "
	"off.\n\n"
	"EXAMPLES:\n"
	"  tally top -- ./server --port 8080     start ./server and watch it\n"
	"  tally top -p 1234 -s live             attach to 1234, most live bytes first\n"
	"  tally top --view sites -s peak -- ./app  what held memory at ./app's peak\n"
	"  tally top -b -n 3 -i 500 -- ./app     three text frames, 0.5 s apart\n"
	"  tally top -b -t -p 1234 > top.txt     frames with their thread tables\n"
	"  tally top --view sites -p 1234        where 1234's heap was allocated\n"
	"\nEXIT STATUS: 0 done, 2 usage, 3 no permission, 4 no BTF, 5 no such process, 6 PID "
	"already traced, 7 CMD could not start, 1 other failures.";

int cmd_top(int argc, char **argv)
{
	struct top_opts o;

	memset(&o, 0, sizeof(o));
	cli_target_init(&o.t);
	o.interval_ms = TOP_INTERVAL_MS;
	o.order.col = TOP_COL_CPU;
	o.order.desc = top_col_default_desc(TOP_COL_CPU);
	if (cli_parse_command("tally top", top_options, parse_top_opt,
			      "(-p PID | -- CMD [ARGS...])", top_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	return run_top(&o);
}
