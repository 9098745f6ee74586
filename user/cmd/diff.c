// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally diff [--json] BEFORE AFTER`: two snapshots, or two heap
 * profiles, side by side (diff.h says how they are matched). This file
 * holds the command: its argp, the two files read and checked, and the
 * refusals, each one line on stderr and exit 1: a file that cannot be
 * read, one that is not JSON or not a snapshot, a gzip'd file that is not
 * a heap profile, and a snapshot beside a profile.
 */
#include <argp.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cli.h"
#include "diff.h"
#include "../views/snapshot_doc.h"
#include "../util/grow.h"

/* The sites shown by default: a screen's worth */
#define DIFF_TOP_DEFAULT 10

struct diff_opts {
	const char *paths[2];
	unsigned npaths;
	bool json;
	unsigned top;
};

enum input_kind { INPUT_JSON, INPUT_GZIP };

struct input {
	const char *path;
	char *text;
	size_t len;
	enum input_kind kind;
	struct jread_doc doc;
};

static const char diff_doc[] =
	"Compare two snapshots (tally snapshot's JSON) of two runs: each group's and process's "
	"live bytes, peak, CPU and GPU figures before, after and the change, and the call sites "
	"whose live bytes moved most. Or two heap profiles (tally profile's gzip'd pprof, or "
	"another program's with inuse_space or alloc_space): their sites, and their groups as "
	"the sums of their samples' group labels over every process.\v"
	"Pids and addresses differ between runs, names do not, so: groups are matched by name; "
	"processes by comm and rank among the processes of that comm in the tree's order (root "
	"first, then by birth: the second 'worker' before with the second 'worker' after); "
	"sites by group and stack, a frame by its function (or its module when it has no "
	"symbol), a stack's sites in several processes summed. A group, process or site on one "
	"side only counts as 0 on the other for its delta and is marked so ('in': 'before' or "
	"'after'); a figure a snapshot lacks (peak, from an older tally) is '-' in text and null "
	"in JSON, never 0. Live bytes per group and process are exact when the snapshot is; "
	"a site's are sampled estimates (tally snapshot --rate 1 samples every allocation), "
	"and a snapshot lists only its " CLI_STR(
		SNAPSHOT_SITES) " largest sites. A profile has every site, each an "
				"estimate, no process (its pids differ between runs), and a frame without a symbol as "
				"[module+0xOFFSET], its offset in the file.\n\n"
				"--json: {\"before\": {file, kind, comm, pid, exact}, \"after\": {...}, \"groups\": [{name, "
				"rank, in, live_before, live_after, delta, peak_before, peak_after, peak_delta, "
				"cpu_ns_before, ..., allocated_bytes_before, ..., instance: {FIELD: {before, after, "
				"delta}}}], \"processes\": [{comm, rank, in, pid_before, pid_after, the same figures, "
				"mapped_*, groups: [...]}], \"tree\": {peak_*, cpu_ns_*}, \"sites_matched\", \"sites\": "
				"[{frames: [label, ...], group, in, live_before, live_after, delta, alloc_before, "
				"alloc_after, alloc_delta, peak_* (at its process's peak)}]}.\n\n"
				"EXAMPLES:\n"
				"  tally snapshot -o before.json -- ./app\n"
				"  tally snapshot -o after.json -- ./app --new-cache\n"
				"  tally diff before.json after.json\n"
				"  tally diff --json before.json after.json | jq '.groups[] | {name, delta}'\n"
				"  tally diff before.pb.gz after.pb.gz        two profiles (tally profile -o)\n"
				"\nEXIT STATUS: 0 compared, 2 usage, 1 an input that cannot be read or is not a "
				"snapshot or a heap profile, or a snapshot beside a profile.";

/* FILE whole, up to JREAD_MAX_BYTES (a FIFO too: <(tally snapshot ...)). */
static int read_whole(const char *path, char **text, size_t *len)
{
	FILE *f = fopen(path, "rb");
	size_t cap = 0, n = 0, got;
	char *buf = NULL, *p;
	int err = 0;

	if (!f)
		return -errno;
	do {
		if (n == cap) {
			cap = cap ? cap * 2 : 65536;
			p = cap > (size_t)JREAD_MAX_BYTES + 1 ? NULL : realloc(buf, cap);
			if (!p) {
				err = cap > (size_t)JREAD_MAX_BYTES + 1 ? -EFBIG : -ENOMEM;
				break;
			}
			buf = p;
		}
		errno = 0;
		got = fread(buf + n, 1, cap - n, f);
		n += got;
	} while (got && n <= JREAD_MAX_BYTES);
	if (!err && ferror(f))
		err = errno ? -errno : -EIO; /* EISDIR for a directory */
	if (!err && n > JREAD_MAX_BYTES)
		err = -EFBIG;
	fclose(f);
	if (err) {
		free(buf);
		return err;
	}
	*text = buf;
	*len = n;
	return 0;
}

/* One line on stderr, and the command's failure. */
static int refuse(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int refuse(const char *fmt, ...)
{
	va_list ap;

	fputs("tally diff: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return TALLY_EXIT_FAIL;
}

static int load(struct input *in)
{
	int err = read_whole(in->path, &in->text, &in->len);

	if (err == -EFBIG)
		return refuse("%s: larger than %u MiB: not a snapshot", in->path,
			      JREAD_MAX_BYTES >> 20);
	if (err)
		return refuse("cannot read %s: %s", in->path, strerror(-err));
	if (!in->len)
		return refuse("%s is empty: not a snapshot", in->path);
	/* gzip's magic: what tally profile writes (pprof's profile.proto) */
	in->kind = in->len >= 2 && (unsigned char)in->text[0] == 0x1f &&
				   (unsigned char)in->text[1] == 0x8b ?
			   INPUT_GZIP :
			   INPUT_JSON;
	return 0;
}

/* A snapshot's top level: "target" an object, "groups", "processes" arrays. */
static int parse_snapshot(struct input *in)
{
	size_t at = 0;
	int err = jread_parse(in->text, in->len, &in->doc, &at);
	const struct jread_value *r = &in->doc.root;

	if (err)
		return refuse("%s is not a snapshot: %s at byte %zu", in->path, jread_strerror(err),
			      at);
	if (!jread_object(jread_get(r, "target")) || !jread_array(jread_get(r, "groups")) ||
	    !jread_array(jread_get(r, "processes")))
		return refuse(
			"%s is JSON but not a tally snapshot (it has no \"target\", \"groups\" "
			"and \"processes\"; tally snapshot writes one)",
			in->path);
	return 0;
}

/* The gzip'd profile in[0 .. n), inflated: 0, -EINVAL (not gzip, or
 * corrupt), -EFBIG (past DIFF_PPROF_MAX_BYTES) or -ENOMEM. */
static int gunzip(const uint8_t *in, size_t n, uint8_t **out, size_t *len)
{
	z_stream zs = { 0 };
	size_t cap = 0, used = 0;
	uint8_t *buf = NULL;
	int zerr = Z_OK, err = 0;

	if (n > UINT32_MAX || inflateInit2(&zs, 31) != Z_OK) /* 31: a gzip header */
		return -EINVAL;
	zs.next_in = (uint8_t *)in;
	zs.avail_in = (uInt)n;
	while (zerr != Z_STREAM_END && !err) {
		if (used == cap) {
			err = cap >= DIFF_PPROF_MAX_BYTES		       ? -EFBIG :
			      grow((void **)&buf, &cap, used + 1, 1, 1u << 20) ? -ENOMEM :
										 0;
			if (err)
				break;
		}
		zs.next_out = buf + used;
		zs.avail_out = (uInt)(cap - used);
		zerr = inflate(&zs, Z_NO_FLUSH);
		used = cap - zs.avail_out;
		if (zerr != Z_OK && zerr != Z_STREAM_END)
			err = zerr == Z_MEM_ERROR ? -ENOMEM : -EINVAL; /* Z_BUF_ERROR: cut short */
	}
	inflateEnd(&zs);
	if (err) {
		free(buf);
		return err;
	}
	*out = buf;
	*len = used;
	return 0;
}

/* A gzip'd profile as diff_pprof_decode's document: its errors, and gunzip's. */
static int pprof_doc(const uint8_t *gz, size_t n, char **json, size_t *len)
{
	uint8_t *pb;
	size_t pblen;
	int err = gunzip(gz, n, &pb, &pblen);

	if (err)
		return err;
	err = diff_pprof_decode(pb, pblen, json, len);
	free(pb);
	return err;
}

/* A profile's text replaced by the document diff_pprof.c writes of it. */
static int profile_to_doc(struct input *in)
{
	char *doc;
	size_t len;
	int err = pprof_doc((const uint8_t *)in->text, in->len, &doc, &len);

	if (err == -ENOMSG)
		return refuse("%s is a profile without inuse_space or alloc_space: not a heap "
			      "profile",
			      in->path);
	if (err == -EFBIG || err == -E2BIG)
		return refuse("%s: the profile is too large (past %u MiB inflated, or its stacks "
			      "past %u MiB written out)",
			      in->path, DIFF_PPROF_MAX_BYTES >> 20, JREAD_MAX_BYTES >> 20);
	if (err)
		return refuse("%s is not a profile tally diff can read: %s", in->path,
			      err == -EINVAL ? "not gzip'd profile.proto, or corrupt" :
					       strerror(-err));
	free(in->text);
	in->text = doc;
	in->len = len;
	return 0;
}

static int compare(const struct diff_opts *o, struct input in[2])
{
	struct diff d = { .b = { in[0].path, &in[0].doc.root },
			  .a = { in[1].path, &in[1].doc.root },
			  .top = o->top };
	int err = diff_build(&d);

	if (err) {
		diff_free(&d);
		return refuse("cannot compare: %s", strerror(-err));
	}
	err = o->json ? diff_print_json(stdout, &d) : diff_print_text(stdout, &d);
	diff_free(&d);
	if (err)
		return refuse("cannot write the comparison: %s", strerror(-err));
	return TALLY_EXIT_OK;
}

static int run_diff(const struct diff_opts *o)
{
	struct input in[2] = { { .path = o->paths[0] }, { .path = o->paths[1] } };
	int rc = load(&in[0]);

	if (!rc)
		rc = load(&in[1]);
	if (!rc && in[0].kind != in[1].kind)
		rc = refuse("cannot compare a snapshot with a profile (%s is a gzip'd profile, %s "
			    "JSON): give two snapshots",
			    in[0].kind == INPUT_GZIP ? in[0].path : in[1].path,
			    in[0].kind == INPUT_GZIP ? in[1].path : in[0].path);
	for (int i = 0; i < 2 && !rc && in[0].kind == INPUT_GZIP; i++)
		rc = profile_to_doc(&in[i]);
	for (int i = 0; i < 2 && !rc; i++)
		rc = parse_snapshot(&in[i]);
	if (!rc)
		rc = compare(o, in);
	for (int i = 0; i < 2; i++) {
		jread_free(&in[i].doc);
		free(in[i].text);
	}
	return rc;
}

enum { OPT_JSON = 1200, OPT_TOP };

static const struct argp_option diff_options[] = {
	{ "json", OPT_JSON, NULL, 0, "JSON for scripts instead of the text table", 0 },
	{ "top", OPT_TOP, "N", 0,
	  "Show the N sites whose live bytes moved most (default " CLI_STR(
		  DIFF_TOP_DEFAULT) "; 0: all)",
	  0 },
	{ 0 },
};

static error_t parse_diff_opt(int key, char *arg, struct argp_state *state)
{
	struct diff_opts *o = state->input;
	uint64_t n;

	switch (key) {
	case OPT_JSON:
		o->json = true;
		break;
	case OPT_TOP:
		if (cli_uint(arg, 0, 1000000, &n))
			cli_usage_error(state, "bad --top '%s': want a whole number, 0 to 1000000",
					arg);
		o->top = (unsigned)n;
		break;
	case ARGP_KEY_ARG:
		if (o->npaths == 2)
			cli_usage_error(state, "too many files: want BEFORE AFTER");
		o->paths[o->npaths++] = arg;
		break;
	case ARGP_KEY_END:
		if (o->npaths != 2)
			cli_usage_error(state, "want two files, BEFORE AFTER");
		break;
	default:
		return ARGP_ERR_UNKNOWN;
	}
	return 0;
}

int cmd_diff(int argc, char **argv)
{
	const struct argp argp = { diff_options, parse_diff_opt, "BEFORE AFTER",
				   diff_doc,	 NULL,		 NULL,
				   NULL };
	struct diff_opts o = { .top = DIFF_TOP_DEFAULT };

	argv[0] = (char *)"tally diff";
	if (argp_parse(&argp, argc, argv, 0, NULL, &o))
		return TALLY_EXIT_USAGE;
	return run_diff(&o);
}
