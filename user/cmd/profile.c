// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally profile`: trace until the end, then the heap profile by call site
 * (docs/DESIGN.md §7) as pprof's gzip-compressed profile.proto, or as folded
 * stacks for flamegraph.pl and speedscope.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli.h"
#include "../util/clock.h"
#include "outfile.h"
#include "../session/profile.h"
#include "../views/pprof.h"

enum profile_format { FORMAT_PPROF, FORMAT_FOLDED };

struct profile_opts {
	struct cli_target target;
	const char *out; /* -o FILE, or NULL: stdout */
	enum profile_format format;
	enum folded_value value; /* --value: folded's lines, pprof's first sample type */
};

static const char profile_doc[] =
	"Trace a process and write its heap profile by call site: which code holds the bytes "
	"(in use at the end) and which allocated them (over the whole trace), per resource group "
	"and process.\v"
	"Allocations are sampled as jemalloc, tcmalloc and Go do: one per BYTES allocated on "
	"average (--rate, default 512 KiB), each with its whole stack, unwound in the process "
	"from its unwind tables (no frame pointers needed); a sample of S bytes stands for "
	"S / (1 - exp(-S/BYTES)) bytes, so that the figures are unbiased estimates (--rate 1: "
	"every allocation, exact and slow). Frames are symbolized from ELF symbols and DWARF "
	"line information, C++ names demangled. Needs tally's allocator (preloaded into CMD).\n\n"
	"--format pprof (default): gzip-compressed profile.proto, sample types alloc_objects, "
	"alloc_space, inuse_objects, inuse_space, peak_objects, peak_space; labels group and "
	"pid; mappings with build IDs. --format folded: one 'frame;frame;frame BYTES' line per "
	"stack, outermost frame first, of the bytes --value says: inuse (default), in use at "
	"the end; alloc, allocated over the whole trace; or peak, in use at the moment its "
	"process's live bytes were highest (a program that frees everything before it exits "
	"holds nothing at the end: its folded file of inuse is empty, which tally says on "
	"stderr); "
	"for pprof, --value picks the sample type pprof shows first. Blocks allocated "
	"before a late attach carry no stack: they are one site, " PROFILE_BEFORE_ATTACH ".\n\n"
	"EXAMPLES:\n"
	"  tally profile -o heap.pb.gz -- ./server      then: pprof -top heap.pb.gz\n"
	"  tally profile -p 1234 -d 10 -o heap.pb.gz    a running process, for 10 seconds\n"
	"  tally profile --format folded -- ./app | flamegraph.pl > heap.svg\n"
	"  tally profile --format folded --value alloc -o alloc.folded -- ./app\n"
	"  tally profile --rate 1 -o exact.pb.gz -- ./test   every allocation\n"
	"\nEXIT STATUS: 0 profile written, 2 usage, 3 no permission, 4 no BTF, 5 no such "
	"process, 6 PID already traced, 7 CMD could not start, 1 other failures.";

/* The profile to f; a folded file with no line is said on stderr (rc 0:
 * nothing failed, but an empty file reads as a broken run). */
static int write_profile(FILE *f, struct profile *pr, const struct profile_opts *po)
{
	size_t lines;
	int err;

	if (po->format != FORMAT_FOLDED) {
		pr->p.default_type = po->value == FOLDED_ALLOC ? "alloc_space" :
				     po->value == FOLDED_PEAK  ? "peak_space" :
								 "inuse_space";
		return pprof_write(f, &pr->p);
	}
	err = folded_write(f, &pr->p, po->value, &lines);
	if (!err && !lines)
		fprintf(stderr, "tally: %s is empty: %s\n",
			po->out ? po->out : "the profile on stdout",
			po->value == FOLDED_INUSE ?
				"no bytes in use at the end (try --value peak or alloc)" :
				"no allocation was sampled");
	return err;
}

static int run_profile(struct profile_opts *po)
{
	struct cli_target *c = &po->target;
	struct outfile of = { 0 };
	struct profile pr;
	struct session s;
	int rc, err;

	rc = cli_doc_start("tally profile", po->out, &of, &s, c);
	if (rc)
		return rc;
	struct timespec now;
	clock_gettime(CLOCK_REALTIME, &now);
	uint64_t start_ns = clock_now_ns();
	cli_run(&s, c, 0, NULL, NULL);
	session_finish(&s);
	err = profile_build(&s, &pr);
	if (!err) {
		pr.p.time_nanos = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
		pr.p.duration_nanos = (int64_t)(clock_now_ns() - start_ns);
		err = write_profile(po->out ? of.f : stdout, &pr, po);
		if (!err && !po->out)
			err = fflush(stdout) ? -errno : 0;
	}
	err = cli_doc_end("tally profile", "profile", po->out, &of, err);
	if (!err && !s.model.saw_alloc && !s.injected)
		fprintf(stderr,
			"tally profile: %d does not use tally's allocator: the profile is "
			"empty\n",
			s.pid);
	session_report_end(&s, "tally profile");
	profile_free(&pr);
	session_close(&s);
	return err ? TALLY_EXIT_FAIL : TALLY_EXIT_OK;
}

enum { OPT_FORMAT = 1100, OPT_VALUE };

static const struct argp_option profile_options[] = {
	{ "output", 'o', "FILE", 0,
	  "Write the profile to FILE (default: stdout; CMD's stdout then goes to stderr)", 0 },
	{ "format", OPT_FORMAT, "FORMAT", 0, "pprof (default) or folded", 0 },
	{ "value", OPT_VALUE, "VALUE", 0,
	  "inuse (default: bytes in use at the end), alloc (bytes allocated over the trace) or "
	  "peak (bytes in use at the peak of live): "
	  "folded's lines, pprof's first sample type",
	  0 },
	{ 0 },
};

static error_t parse_profile_opt(int key, char *arg, struct argp_state *state)
{
	struct profile_opts *o = state->input;

	switch (key) {
	case ARGP_KEY_INIT:
		state->child_inputs[0] = &o->target;
		break;
	case 'o':
		o->out = cli_out_arg(state, arg);
		break;
	case OPT_FORMAT:
		if (!strcmp(arg, "pprof"))
			o->format = FORMAT_PPROF;
		else if (!strcmp(arg, "folded"))
			o->format = FORMAT_FOLDED;
		else
			cli_usage_error(state, "bad --format '%s': want pprof or folded", arg);
		break;
	case OPT_VALUE:
		if (!strcmp(arg, "inuse"))
			o->value = FOLDED_INUSE;
		else if (!strcmp(arg, "alloc"))
			o->value = FOLDED_ALLOC;
		else if (!strcmp(arg, "peak"))
			o->value = FOLDED_PEAK;
		else
			cli_usage_error(state, "bad --value '%s': want inuse, alloc or peak", arg);
		break;
	case ARGP_KEY_END:
		if (o->target.no_sample)
			cli_usage_error(state, "a profile needs samples: drop --no-sample");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_profile(int argc, char **argv)
{
	struct profile_opts o = { 0 };

	cli_target_init(&o.target);
	if (cli_parse_command("tally profile", profile_options, parse_profile_opt,
			      "(-p PID | -- CMD [ARGS...])", profile_doc, argc, argv, &o))
		return TALLY_EXIT_USAGE;
	return run_profile(&o);
}
