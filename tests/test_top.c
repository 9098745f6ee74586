// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The figures of `tally top` (user/views/top/top_rows.c) and its batch frames
 * (user/views/top/top_text.c) on a model filled by hand: rates between two samples,
 * the order on every column, the identity's split and bar, which groups are
 * shown, and names from a hostile target reaching the output harmlessly; the
 * sites view's rows (user/views/top/top_sites.c) from a heap profile made by hand.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "../user/views/top/top_frame.h"
#include "../user/views/top/top_sites.h"
#include "../user/views/top/top_text.h"
#include "../user/views/top/internal.h"
#include "../user/util/text.h"

#define SEC 1000000000ULL

/* Every byte printable ASCII, or a newline where newline_ok. */
static bool harmless(const char *s, size_t len, bool newline_ok)
{
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		if ((c < 0x20 || c > 0x7e) && !(newline_ok && c == '\n'))
			return false;
	}
	return true;
}

static size_t san(char *out, size_t size, const char *in)
{
	return text_sanitize_terminal(out, size, in, strlen(in) + 1);
}

static void sanitize__printable_ascii__kept_as_is(void **state)
{
	char out[64];
	(void)state;
	assert_int_equal(san(out, sizeof(out), "decode-2 \"q\" ~x"), 15);
	assert_string_equal(out, "decode-2 \"q\" ~x");
}

static void sanitize__escape_sequences__shown_as_hex(void **state)
{
	char out[128];
	(void)state;
	san(out, sizeof(out), "\x1b[2J\x1b[31mred\x1b]0;title\x07\r\n\t\x7f");
	assert_string_equal(out, "\\x1b[2J\\x1b[31mred\\x1b]0;title\\x07\\x0d\\x0a\\x09\\x7f");
	assert_true(harmless(out, strlen(out), false));
}

static void sanitize__backslash__doubled_so_escapes_are_unambiguous(void **state)
{
	char out[64];
	(void)state;
	san(out, sizeof(out), "a\\x1b\"b");
	assert_string_equal(out, "a\\\\x1b\"b");
}

static void sanitize__non_ascii__escaped_valid_or_not(void **state)
{
	char out[64];
	(void)state;
	/* invalid UTF-8, a C1 CSI in UTF-8, an RLO override, a valid e-acute */
	san(out, sizeof(out), "\xff\xc3\x28\xc2\x9b\xe2\x80\xae\xc3\xa9");
	assert_string_equal(out, "\\xff\\xc3(\\xc2\\x9b\\xe2\\x80\\xae\\xc3\\xa9");
}

static void sanitize__unterminated_input__stops_at_inlen(void **state)
{
	char name[TALLY_GROUP_NAME_MAX], out[TOP_NAME_MAX];
	(void)state;
	memset(name, 'x', sizeof(name)); /* no NUL at all */
	assert_int_equal(text_sanitize_terminal(out, sizeof(out), name, sizeof(name)),
			 sizeof(name));
	assert_int_equal(strlen(out), sizeof(name));
}

static void sanitize__worst_case_name__fits_top_name_max(void **state)
{
	char name[TALLY_GROUP_NAME_MAX], out[TOP_NAME_MAX];
	(void)state;
	memset(name, 0x1b, sizeof(name));
	assert_int_equal(text_sanitize_terminal(out, sizeof(out), name, sizeof(name)),
			 4 * TALLY_GROUP_NAME_MAX);
	assert_true(harmless(out, strlen(out), false));
}

static void sanitize__small_buffer__never_cuts_an_escape(void **state)
{
	char out[8];
	(void)state;
	/* "ab" fits, "\x1b" (4) would leave no room for the NUL: "~" marks the cut */
	assert_int_equal(san(out, 6, "ab\x1b\x1b"), 3);
	assert_string_equal(out, "ab~");
	assert_int_equal(san(out, 8, "ab\x1b\x1b"), 7);
	assert_string_equal(out, "ab\\x1b~");
	/* room for the first escape and the NUL, none for the mark */
	assert_int_equal(san(out, 7, "ab\x1b\x1b"), 6);
	assert_string_equal(out, "ab\\x1b");
	assert_int_equal(san(out, 1, "abc"), 0);
	assert_string_equal(out, "");
	assert_int_equal(text_sanitize_terminal(out, 0, "abc", 3), 0);
	assert_int_equal(san(out, 2, "\x1b"), 1);
	assert_string_equal(out, "~");
}

/* What the figures take beside the model, set by each test: CPU and
 * sched_yield calls per group. */
static uint64_t cpu[TALLY_MAX_GROUPS], osy[TALLY_MAX_GROUPS];

/* A model with groups 0 (root), 1 "ingest", 2 "decode" and 7 charged
 * without a name; group 9 known by nothing. */
static void fill(struct model *m)
{
	memset(cpu, 0, sizeof(cpu));
	memset(osy, 0, sizeof(osy));
	model_init(m);
	strcpy(m->groups[1].name, "ingest");
	m->groups[1].known = true;
	strcpy(m->groups[2].name, "decode");
	m->groups[2].known = true;
	m->replay.groups[7].alloc_objs = 3;
	m->replay.groups[7].alloc_bytes = 300;
}

/* A tick's input: the model and the sources, through figures_build as in
 * tally itself. */
struct top_in {
	const struct model *m;
	struct figures_sources src;
	const struct glibc_figures *glibc; /* glibc mode's, or NULL */
};

static void input(struct top_in *in, const struct model *m, uint64_t now)
{
	memset(in, 0, sizeof(*in));
	in->m = m;
	in->src.allocator = FIGURES_ALLOC_TALLY;
	in->src.now_ns = now;
	in->src.start_ns = 10 * SEC;
	in->src.pid = 42;
	strcpy(in->src.comm, "app");
}

static void figures_of(struct figures *fig, struct top_in *in)
{
	memcpy(in->src.cpu_ns, cpu, sizeof(cpu));
	memcpy(in->src.cuda.os_yields, osy, sizeof(osy));
	in->src.have_glibc = in->glibc != NULL;
	if (in->glibc)
		in->src.glibc = *in->glibc;
	assert_int_equal(figures_build(fig, in->m, &in->src), 0);
}

static int build_mode(struct top_frame *f, struct top_in *in, struct top_prev *prev,
		      enum top_mode mode)
{
	struct figures fig = { 0 };

	figures_of(&fig, in);
	int err = top_frame_build(f, &fig, prev, mode);
	figures_free(&fig);
	return err;
}

static int build(struct top_frame *f, struct top_in *in, struct top_prev *prev)
{
	return build_mode(f, in, prev, TOP_MODE_GROUPS);
}

static void take(struct top_prev *prev, struct top_in *in)
{
	struct figures fig = { 0 };

	figures_of(&fig, in);
	top_prev_take(prev, &fig, TOP_MODE_GROUPS);
	figures_free(&fig);
}

static const struct top_row *row(const struct top_frame *f, uint32_t id)
{
	for (unsigned i = 0; i < f->nrows; i++)
		if (f->rows[i].id == id)
			return &f->rows[i];
	return NULL;
}

static void frame__without_previous_sample__rates_unknown(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	input(&in, &m, 11 * SEC);
	assert_int_equal(build(&f, &in, &prev), 0);
	assert_false(f.rows[0].rates_known);
	assert_true(f.hdr.events_s < 0);
	assert_true(prev.valid); /* the next frame has a base */
	top_frame_free(&f);
	model_free(&m);
}

static void frame__two_samples__cpu_percent_and_rates_per_second(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	cpu[1] = 1 * SEC;
	m.replay.groups[1].alloc_objs = 100;
	m.replay.groups[1].dealloc_objs = 40;
	m.received = 1000;
	input(&in, &m, 12 * SEC);
	take(&prev, &in);
	/* half a second later: 250 ms of CPU, 500 allocations, 100 frees */
	cpu[1] += SEC / 4;
	m.replay.groups[1].alloc_objs += 500;
	m.replay.groups[1].dealloc_objs += 100;
	m.replay.groups[1].alloc_bytes = 5000;
	m.replay.groups[1].dealloc_bytes = 1000;
	m.received += 2000;
	input(&in, &m, 12 * SEC + SEC / 2);
	assert_int_equal(build(&f, &in, &prev), 0);
	const struct top_row *r = row(&f, 1);
	assert_non_null(r);
	assert_true(r->rates_known);
	assert_true(r->cpu_pct > 49.999 && r->cpu_pct < 50.001);
	assert_true(r->allocs_s > 999.999 && r->allocs_s < 1000.001);
	assert_true(r->frees_s > 199.999 && r->frees_s < 200.001);
	assert_int_equal(r->live, 4000);
	assert_true(f.hdr.events_s > 3999.99 && f.hdr.events_s < 4000.01);
	assert_true(f.hdr.uptime_s > 2.499 && f.hdr.uptime_s < 2.501);
	assert_string_equal(f.hdr.comm, "app");
	top_frame_free(&f);
	model_free(&m);
}

static void frame__counter_goes_back__rates_unknown_not_huge(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	m.replay.groups[1].alloc_objs = 100;
	input(&in, &m, 12 * SEC);
	take(&prev, &in);
	m.replay.groups[1].alloc_objs = 10; /* the figures switched source */
	input(&in, &m, 13 * SEC);
	build(&f, &in, &prev);
	assert_false(row(&f, 1)->rates_known);
	top_frame_free(&f);
	model_free(&m);
}

static void frame__glibc_mode__group_counts_from_glibc(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct glibc_figures g;
	static struct top_frame f;
	(void)state;
	fill(&m);
	g.alloc_objs[2] = 10;
	g.alloc_bytes[2] = 1000;
	g.dealloc_bytes[2] = 400;
	input(&in, &m, 12 * SEC);
	in.src.allocator = FIGURES_ALLOC_GLIBC;
	in.glibc = &g;
	take(&prev, &in);
	g.alloc_objs[2] = 30;
	g.dealloc_objs[2] = 5;
	in.src.now_ns = 14 * SEC;
	build(&f, &in, &prev);
	assert_int_equal(row(&f, 2)->live, 600);
	/* glibc mode keeps no peak: not known, in the rows and the header */
	assert_false(row(&f, 2)->peak_known);
	assert_false(f.hdr.peak_known);
	assert_true(row(&f, 2)->allocs_s > 9.999 && row(&f, 2)->allocs_s < 10.001);
	assert_true(row(&f, 2)->frees_s > 2.499 && row(&f, 2)->frees_s < 2.501);
	top_frame_free(&f);
	model_free(&m);
}

static void frame__groups_shown__known_or_charged_only(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	m.replay.groups[9].alloc_bytes = 0; /* nothing: not shown */
	osy[11] = 2;			    /* charged sched_yield calls: shown */
	input(&in, &m, 12 * SEC);
	build(&f, &in, &prev);
	assert_int_equal(f.nrows, 5);
	assert_non_null(row(&f, 0));
	assert_string_equal(row(&f, 1)->name, "ingest");
	assert_string_equal(row(&f, 7)->name, "#7");
	assert_null(row(&f, 9));
	assert_non_null(row(&f, 11));
	for (unsigned i = 1; i < f.nrows; i++)
		assert_true(f.rows[i - 1].id < f.rows[i].id);
	top_frame_free(&f);
	model_free(&m);
}

static void frame__gpu_figures_per_group__and_dash_without_source(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	m.groups[2].yields = 5;
	m.groups[2].rejects = 2;
	input(&in, &m, 12 * SEC);
	build(&f, &in, &prev);
	assert_false(row(&f, 2)->gpu_known);
	assert_int_equal(row(&f, 2)->yields, 5);
	assert_int_equal(row(&f, 2)->rejects, 2);
	m.gpu.seen[GPU_SRC_DRIVER] = true;
	m.gpu.groups[GPU_SRC_DRIVER][2].kernels_launched = 7;
	m.gpu.groups[GPU_SRC_DRIVER][2].device_bytes = 1 << 20;
	m.gpu.groups[GPU_SRC_DRIVER][2].host_pinned = 4096;
	m.gpu.groups[GPU_SRC_DRIVER][2].failed_launches = 1;
	build(&f, &in, &prev);
	const struct top_row *r = row(&f, 2);
	assert_true(r->gpu_known);
	assert_int_equal(r->kernels, 7);
	assert_int_equal(r->device, 1 << 20);
	assert_int_equal(r->pinned, 4096);
	assert_int_equal(r->rejects, 3); /* the application's and the failed launch */
	top_frame_free(&f);
	model_free(&m);
}

static void frame__threads__alive_by_tid_with_group_names(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	struct model_thread *t;
	(void)state;
	fill(&m);
	t = model_thread(&m, 300, true);
	strcpy(t->comm, "\x1b[2Jev\"\\");
	t->group = 1;
	t = model_thread(&m, 200, true);
	strcpy(t->comm, "main");
	t = model_thread(&m, 250, true);
	t->alive = false;
	input(&in, &m, 12 * SEC);
	assert_int_equal(build(&f, &in, &prev), 0);
	assert_int_equal(f.nthreads, 2);
	assert_int_equal(f.threads[0].tid, 200);
	assert_string_equal(f.threads[0].group_name, "root");
	assert_int_equal(f.threads[1].tid, 300);
	assert_string_equal(f.threads[1].name, "\\x1b[2Jev\"\\\\");
	assert_string_equal(f.threads[1].group_name, "ingest");
	top_frame_free(&f);
	model_free(&m);
}

/* Rows whose figure in every column is 10 * (their position in want). */
static void sort_rows(struct top_row *rows)
{
	static const char *const names[3] = { "b", "c", "a" };
	static const int rank[3] = { 1, 2, 0 }; /* ascending position of each row */

	memset(rows, 0, 4 * sizeof(*rows));
	for (int i = 0; i < 3; i++) {
		struct top_row *r = &rows[i];
		double v = 10.0 * rank[i];

		r->id = (uint32_t)i;
		strcpy(r->name, names[i]);
		r->rates_known = r->gpu_known = true;
		r->cpu_pct = r->allocs_s = r->frees_s = v;
		r->peak_known = true;
		r->live = r->peak = r->device = r->pinned = (int64_t)v - 5; /* negatives too */
		r->kernels = r->rejects = r->yields = (uint64_t)v;
	}
}

static void sort__every_column__both_directions(void **state)
{
	struct top_row rows[4];
	(void)state;
	for (unsigned c = 0; c < TOP_NCOLS; c++) {
		sort_rows(rows);
		top_sort(rows, 3, (enum top_col)c, false);
		assert_int_equal(rows[0].id, 2);
		assert_int_equal(rows[1].id, 0);
		assert_int_equal(rows[2].id, 1);
		top_sort(rows, 3, (enum top_col)c, true);
		assert_int_equal(rows[0].id, 1);
		assert_int_equal(rows[1].id, 0);
		assert_int_equal(rows[2].id, 2);
	}
}

static void sort__ties__keep_their_order(void **state)
{
	struct top_row rows[4];
	(void)state;
	for (unsigned c = TOP_COL_CPU; c < TOP_NCOLS; c++) {
		sort_rows(rows);
		rows[3] = rows[1];
		rows[3].id = 3;
		rows[1].id = 1;
		/* rows 1 and 3 tie: 1 stays before 3 in both directions */
		top_sort(rows, 4, (enum top_col)c, c % 2);
		for (int i = 0; i < 3; i++)
			if (rows[i].id == 3)
				fail_msg("column %u: row 3 before row 1", c);
			else if (rows[i].id == 1)
				break;
	}
}

static void sort__unknown_figures__last_in_both_directions(void **state)
{
	static const enum top_col cols[] = { TOP_COL_CPU,   TOP_COL_PEAK,    TOP_COL_ALLOCS,
					     TOP_COL_FREES, TOP_COL_KERNELS, TOP_COL_DEVICE,
					     TOP_COL_PINNED };
	struct top_row rows[4];
	(void)state;
	for (unsigned i = 0; i < sizeof(cols) / sizeof(cols[0]); i++) {
		for (int desc = 0; desc < 2; desc++) {
			sort_rows(rows);
			/* the smallest, the largest */
			rows[2].rates_known = rows[2].gpu_known = rows[2].peak_known = false;
			rows[1].rates_known = rows[1].gpu_known = rows[1].peak_known = false;
			top_sort(rows, 3, cols[i], desc);
			assert_int_equal(rows[0].id, 0);
			assert_int_equal(rows[1].id, 1); /* unknown ones in their order */
			assert_int_equal(rows[2].id, 2);
		}
	}
}

static void order__keys_parse_pick_and_step(void **state)
{
	struct top_order o = { TOP_COL_CPU, true };
	enum top_col c;
	(void)state;
	for (unsigned i = 0; i < TOP_NCOLS; i++) {
		assert_int_equal(top_col_parse(top_col_names[i], &c), 0);
		assert_int_equal(c, i);
		assert_int_equal(top_col_of_key(top_col_keys[i]), (int)i);
	}
	assert_int_equal(top_col_parse("peak", &c), 0);
	assert_int_equal(c, TOP_COL_PEAK);
	assert_int_equal(TOP_COL_PEAK, TOP_COL_LIVE + 1); /* right after LIVE */
	assert_int_equal(top_col_of_key('m'), TOP_COL_PEAK);
	/* no column takes a key the live view keeps (top_view.c: key) */
	for (const char *k = "qQpstrvh<> "; *k; k++)
		assert_int_equal(top_col_of_key(*k), -1);
	assert_int_equal(top_col_parse("bogus", &c), -EINVAL);
	assert_int_equal(top_col_parse("", &c), -EINVAL);
	assert_int_equal(top_col_of_key('q'), -1);
	assert_int_equal(top_col_of_key('p'), -1);
	top_order_pick(&o, TOP_COL_CPU);
	assert_false(o.desc); /* the same column again: reversed */
	top_order_pick(&o, TOP_COL_NAME);
	assert_int_equal(o.col, TOP_COL_NAME);
	assert_false(o.desc);
	top_order_step(&o, -1);
	assert_int_equal(o.col, TOP_COL_YIELDS);
	assert_true(o.desc);
	top_order_step(&o, 1);
	assert_int_equal(o.col, TOP_COL_NAME);
}

static void identity__tally__eight_terms_and_balance(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	fill(&m);
	m.replay.live = 100;
	m.replay.rounding = 20;
	m.replay.cache = 30;
	m.replay.span_free = 40;
	m.replay.returned = 50;
	m.replay.virgin = 60;
	m.replay.hysteresis = 70;
	m.replay.segment_overhead = 80;
	m.replay.mapped = 450;
	input(&in, &m, 12 * SEC);
	build(&f, &in, &prev);
	assert_true(f.id.mapped_known);
	assert_int_equal(f.id.mapped, 450);
	for (unsigned i = 0; i < TOP_TERMS; i++) {
		assert_true(f.id.known[i]);
		assert_int_equal(f.id.term[i], i == 0 ? 100 : 10 * (i + 1));
	}
	assert_true(f.id.balanced);
	m.replay.mapped = 451;
	build(&f, &in, &prev);
	assert_false(f.id.balanced);
	top_frame_free(&f);
	model_free(&m);
}

static void identity__glibc__live_and_rounding_known_rest_unknown(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct glibc_figures g;
	static struct top_frame f;
	unsigned cells[TOP_TERMS];
	(void)state;
	fill(&m);
	g.live = 1000;
	g.rounding = 24;
	input(&in, &m, 12 * SEC);
	in.src.allocator = FIGURES_ALLOC_GLIBC;
	in.glibc = &g;
	build(&f, &in, &prev);
	assert_false(f.id.mapped_known);
	assert_true(f.id.known[0] && f.id.known[1]);
	assert_int_equal(f.id.term[0], 1000);
	assert_int_equal(f.id.term[1], 24);
	for (unsigned i = 2; i < TOP_TERMS; i++)
		assert_false(f.id.known[i]);
	top_bar_cells(&f.id, 50, cells);
	for (unsigned i = 0; i < TOP_TERMS; i++)
		assert_int_equal(cells[i], 0); /* no bar without mapped */
	in.src.allocator = FIGURES_ALLOC_NONE;
	build(&f, &in, &prev);
	for (unsigned i = 0; i < TOP_TERMS; i++)
		assert_false(f.id.known[i]);
	top_frame_free(&f);
	model_free(&m);
}

static void bar__cells_in_proportion_adding_up_to_width(void **state)
{
	struct top_identity id = { .mapped_known = true, .mapped = 1000 };
	unsigned cells[TOP_TERMS], sum = 0;
	(void)state;
	for (unsigned i = 0; i < TOP_TERMS; i++)
		id.known[i] = true;
	id.term[0] = 500; /* half */
	id.term[5] = 333;
	id.term[7] = 167;
	id.term[2] = -40; /* briefly below zero: no cells */
	top_bar_cells(&id, 60, cells);
	for (unsigned i = 0; i < TOP_TERMS; i++)
		sum += cells[i];
	assert_int_equal(sum, 60);
	assert_int_equal(cells[0], 30);
	assert_int_equal(cells[5], 20);
	assert_int_equal(cells[7], 10);
	assert_int_equal(cells[2], 0);
	/* remainders: 1 cell each to the two largest */
	memset(id.term, 0, sizeof(id.term));
	id.term[1] = id.term[3] = id.term[4] = 1;
	top_bar_cells(&id, 2, cells);
	assert_int_equal(cells[1] + cells[3] + cells[4], 2);
	assert_int_equal(cells[1], 1);
	assert_int_equal(cells[3], 1);
	/* huge terms: no overflow */
	id.term[1] = INT64_MAX / 2;
	id.term[3] = INT64_MAX / 2;
	id.term[4] = 0;
	top_bar_cells(&id, 1000, cells);
	assert_int_equal(cells[1], 500);
	assert_int_equal(cells[3], 500);
	top_bar_cells(&id, 0, cells);
	assert_int_equal(cells[1], 0);
}

static void fmt_bytes__units(void **state)
{
	char b[16];
	(void)state;
	top_fmt_bytes(b, sizeof(b), 0);
	assert_string_equal(b, "0B");
	top_fmt_bytes(b, sizeof(b), 999);
	assert_string_equal(b, "999B");
	top_fmt_bytes(b, sizeof(b), 1536);
	assert_string_equal(b, "1.50K");
	top_fmt_bytes(b, sizeof(b), 36 << 20);
	assert_string_equal(b, "36.0M");
	top_fmt_bytes(b, sizeof(b), -(600 << 10));
	assert_string_equal(b, "-600K");
	top_fmt_bytes(b, sizeof(b), INT64_MIN);
	assert_string_equal(b, "-8.00E");
}

static void text__hostile_names__no_control_bytes_reach_the_output(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	struct model_thread *t;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;
	fill(&m);
	strcpy(m.groups[3].name, "\x1b]0;pwned\x07\x1b[31m\"\\\r\n\xc2\x9b\xff");
	m.groups[3].known = true;
	t = model_thread(&m, 77, true);
	strcpy(t->comm, "\x1b[2J\x1b[31mev\"\\n");
	t->group = 3;
	input(&in, &m, 12 * SEC);
	strcpy(in.src.comm, "\x1b[H\x9b");
	build(&f, &in, &prev);
	out = open_memstream(&buf, &len);
	assert_non_null(out);
	assert_int_equal(top_text_frame(out, &f, 1, true), 0);
	fclose(out);
	assert_true(harmless(buf, len, true));
	assert_non_null(strstr(buf, "--- frame 1 ---\n"));
	assert_non_null(strstr(buf, "\\x1b]0;pwned\\x07\\x1b[31m\"\\\\\\x0d\\x0a\\xc2\\x9b\\xff"));
	assert_non_null(strstr(buf, "\\x1b[2J\\x1b[31mev\"\\\\n"));
	assert_non_null(strstr(buf, "target: \\x1b[H\\x9b,"));
	assert_int_equal(buf[len - 1], '\n');
	assert_int_equal(buf[len - 2], '\n'); /* frames end with a blank line */
	free(buf);
	top_frame_free(&f);
	model_free(&m);
}

static void text__exited_target_and_unknown_rates__said_plainly(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;
	fill(&m);
	input(&in, &m, 12 * SEC);
	in.src.gone = true;
	in.src.have_exit = true;
	in.src.exit_status = 3 << 8; /* exit(3) */
	build(&f, &in, &prev);
	out = open_memstream(&buf, &len);
	assert_int_equal(top_text_frame(out, &f, 7, false), 0);
	fclose(out);
	assert_non_null(strstr(buf, "--- frame 7 ---"));
	assert_non_null(strstr(buf, "target exited (status 3)"));
	assert_non_null(strstr(buf, "NOT exact"));
	assert_non_null(strstr(buf, "events: -/s"));
	assert_null(strstr(buf, "threads:"));
	free(buf);
	top_frame_free(&f);
	model_free(&m);
}

/* A heap profile by hand: two mappings, locations with inlined lines, one
 * without a known function, one in no mapping; sites in no particular order. */
static const struct prof_mapping maps[] = {
	{ .start = 0x400000, .limit = 0x500000, .offset = 0, .file = "/opt/app/bin/server" },
	{ .start = 0x7f0000000000,
	  .limit = 0x7f0000100000,
	  .offset = 0x2000,
	  .file = "/usr/lib/libz.so.1" },
};
static const struct prof_line lines[] = {
	{ "lz_inlined", "z.c", 10 },	     /* 0: inlined into 1 */
	{ "lz_alloc_state", "z.c", 20 },     /* 1 */
	{ "handle_request", "server.c", 5 }, /* 2 */
	{ "main", "server.c", 1 },	     /* 3 */
	{ NULL, NULL, 0 },		     /* 4: a line without a function */
	{ "evil\x1b[2J\x9b", NULL, 0 },	     /* 5 */
};
static const struct prof_loc locs[] = {
	{ 0x7f0000000123, 1, &lines[0], 2 }, /* 0: two lines, inlined first */
	{ 0x401000, 0, &lines[2], 1 },	     /* 1 */
	{ 0x400100, 0, &lines[3], 1 },	     /* 2 */
	{ 0x7f0000000456, 1, NULL, 0 },	     /* 3: not symbolized */
	{ 0xdeadbeef, -1, NULL, 0 },	     /* 4: in no mapping */
	{ 0x402000, 0, &lines[4], 1 },	     /* 5: a line, no function */
	{ 0x403000, 0, &lines[5], 1 },	     /* 6: the target's name */
};
static const size_t stack_inlined[] = { 0, 1, 2 };
static const size_t stack_unknown[] = { 3, 4, 5, 2 };
static const size_t stack_evil[] = { 6, 2 };

static void prof_of(struct prof *p, const struct prof_sample *samples, size_t n)
{
	memset(p, 0, sizeof(*p));
	p->maps = maps;
	p->nmaps = sizeof(maps) / sizeof(maps[0]);
	p->locs = locs;
	p->nlocs = sizeof(locs) / sizeof(locs[0]);
	p->samples = samples;
	p->nsamples = n;
	p->period = 524288;
}

static void sites__inlined_lines__innermost_first_then_callers(void **state)
{
	const struct prof_sample s = { stack_inlined, 3, 10, 4096, 2, 1024, "ingest", 42, 0, 0,
				       { 0 },	      0, 0 };
	static struct top_frame f;
	struct prof p;
	(void)state;
	prof_of(&p, &s, 1);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_int_equal(f.sites_state, TOP_SITES_SHOWN);
	assert_int_equal(f.nsites, 1);
	assert_int_equal(f.sites_total, 1);
	assert_int_equal(f.sites_period, 524288);
	assert_string_equal(f.sites[0].stack,
			    "lz_inlined < lz_alloc_state < handle_request < main");
	assert_int_equal(f.sites[0].inuse, 1024);
	assert_int_equal(f.sites[0].objects, 2);
	assert_int_equal(f.sites[0].allocated, 4096);
	assert_string_equal(f.sites[0].group, "ingest");
	assert_int_equal(f.sites[0].pid, 42);
	top_frame_free(&f);
}

static void sites__unknown_function__module_offset_or_address(void **state)
{
	const struct prof_sample s[] = {
		{ stack_unknown, 4, 1, 64, 1, 64, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ NULL,
		  0,
		  1,
		  32,
		  1,
		  32,
		  "",
		  -5,
		  0,
		  0,
		  { 0 },
		  0,
		  0 }, /* no stack, no group, a bad pid */
	};
	static struct top_frame f;
	struct prof p;
	(void)state;
	prof_of(&p, s, 2);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_int_equal(f.nsites, 2);
	/* its file's base name and the offset in the file; an address alone;
	 * a line without a function is not a name */
	assert_string_equal(f.sites[0].stack,
			    "libz.so.1+0x2456 < 0xdeadbeef < server+0x2000 < main");
	assert_string_equal(f.sites[0].group, "-");
	assert_int_equal(f.sites[0].pid, 0);
	assert_string_equal(f.sites[1].stack, "[unknown]");
	assert_string_equal(f.sites[1].group, "-");
	assert_int_equal(f.sites[1].pid, 0);
	top_frame_free(&f);
}

static void sites__target_strings__sanitized(void **state)
{
	static const struct prof_mapping evil_map = { .start = 0x1000,
						      .limit = 0x2000,
						      .file = "/tmp/\x1b]0;pwned\x07" };
	static const struct prof_loc evil_loc = { 0x1010, 0, NULL, 0 };
	static const size_t evil_ix[] = { 0 };
	const struct prof_sample s[] = {
		{ stack_evil, 2, 1, 8, 1, 8, "grp\x1b[31m\\\r\n", 7, 0, 0, { 0 }, 0, 0 },
	};
	static struct top_frame f;
	struct prof p;
	(void)state;
	prof_of(&p, s, 1);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_string_equal(f.sites[0].stack, "evil\\x1b[2J\\x9b < main");
	assert_string_equal(f.sites[0].group, "grp\\x1b[31m\\\\\\x0d\\x0a");
	/* a module's path is the target's too */
	const struct prof_sample m = { evil_ix, 1, 1, 8, 1, 8, "g", 7, 0, 0, { 0 }, 0, 0 };
	memset(&p, 0, sizeof(p));
	p.maps = &evil_map;
	p.nmaps = 1;
	p.locs = &evil_loc;
	p.nlocs = 1;
	p.samples = &m;
	p.nsamples = 1;
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_string_equal(f.sites[0].stack, "\\x1b]0;pwned\\x07+0x10");
	top_frame_free(&f);
}

static void sites__order__most_in_use_first_then_allocated_then_profile_order(void **state)
{
	const struct prof_sample s[] = {
		{ stack_inlined, 3, 1, 100, 1, 10, "a", 1, 0, 0, { 0 }, 0, 0 },
		{ stack_inlined, 3, 1, 900, 0, 0, "b", 1, 0, 0, { 0 }, 0, 0 },
		{ stack_inlined, 3, 1, 500, 1, 50, "c", 1, 0, 0, { 0 }, 0, 0 },
		{ stack_inlined, 3, 1, 200, 1, 10, "d", 1, 0, 0, { 0 }, 0, 0 },
		{ stack_inlined, 3, 1, 100, 1, 10, "e", 1, 0, 0, { 0 }, 0, 0 },
	};
	static struct top_frame f;
	struct prof p;
	(void)state;
	prof_of(&p, s, 5);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_int_equal(f.nsites, 5);
	const char *want[] = { "c", "d", "a", "e", "b" };
	for (unsigned i = 0; i < 5; i++)
		assert_string_equal(f.sites[i].group, want[i]);
	top_frame_free(&f);
}

static void sites__more_than_max__largest_kept_and_counted(void **state)
{
	enum { N = TOP_SITES_MAX + 50 };
	static struct prof_sample s[N];
	static struct top_frame f;
	struct prof p;
	(void)state;
	for (unsigned i = 0; i < N; i++)
		s[i] = (struct prof_sample){ stack_inlined, 3, 1, 1, 1, (int64_t)i, "g", 1, 0, 0,
					     { 0 },	    0, 0 };
	prof_of(&p, s, N);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_int_equal(f.nsites, TOP_SITES_MAX);
	assert_int_equal(f.sites_total, N);
	assert_int_equal(f.sites[0].inuse, N - 1);
	assert_int_equal(f.sites[TOP_SITES_MAX - 1].inuse, N - TOP_SITES_MAX);
	/* the next frame's profile is smaller: the rows are its own */
	prof_of(&p, s, 3);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_int_equal(f.nsites, 3);
	assert_int_equal(f.sites[0].inuse, 2);
	top_frame_free(&f);
}

static void sites__deep_stack__cut_with_a_tilde_never_inside_an_escape(void **state)
{
	enum { DEPTH = 400 };
	static struct prof_line deep_lines[DEPTH];
	static struct prof_loc deep_locs[DEPTH];
	static size_t deep_ix[DEPTH];
	static struct top_frame f;
	const struct prof_sample s = { deep_ix, DEPTH, 1, 8, 1, 8, "g", 1, 0, 0, { 0 }, 0, 0 };
	struct prof p = { 0 };
	(void)state;
	for (unsigned i = 0; i < DEPTH; i++) {
		/* names of escapes only: a cut in the middle of one would show */
		deep_lines[i].function = "\x1b\x1b\x1b";
		deep_locs[i] = (struct prof_loc){ 0x1000 + i, -1, &deep_lines[i], 1 };
		deep_ix[i] = i;
	}
	p.locs = deep_locs;
	p.nlocs = DEPTH;
	p.samples = &s;
	p.nsamples = 1;
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	size_t len = strlen(f.sites[0].stack);
	assert_true(len < TOP_STACK_MAX);
	assert_true(len > TOP_STACK_MAX - 16);
	assert_int_equal(f.sites[0].stack[len - 1], '~');
	assert_true(harmless(f.sites[0].stack, len, false));
	/* before the mark, whole escapes and separators only */
	for (size_t i = 0; i < len - 1;) {
		if (!strncmp(f.sites[0].stack + i, "\\x1b", 4))
			i += 4;
		else if (!strncmp(f.sites[0].stack + i, " < ", 3))
			i += 3;
		else
			fail_msg("cut inside an escape at %zu: %s", i, f.sites[0].stack + i);
	}
	top_frame_free(&f);
}

static void sites__no_profile_none_sampled_or_failed__one_line(void **state)
{
	static struct top_frame f;
	const struct prof_sample bad = {
		(const size_t[]){ 99 }, 1, 1, 8, 1, 8, "g", 1, 0, 0, { 0 }, 0, 0
	};
	struct prof p;
	char buf[128];
	(void)state;
	assert_int_equal(top_sites_build(&f, NULL, false), 0);
	assert_int_equal(f.sites_state, TOP_SITES_OFF);
	assert_string_equal(top_sites_empty(&f, buf, sizeof(buf)),
			    "no sites: sampling is off (--no-sample)");
	prof_of(&p, NULL, 0);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_string_equal(top_sites_empty(&f, buf, sizeof(buf)), "no sites sampled yet");
	prof_of(&p, &bad, 1); /* a location index out of range */
	assert_int_equal(top_sites_build(&f, &p, false), -EINVAL);
	assert_int_equal(f.sites_state, TOP_SITES_FAILED);
	assert_int_equal(f.nsites, 0);
	assert_non_null(strstr(top_sites_empty(&f, buf, sizeof(buf)),
			       "no sites: cannot build the heap profile: "));
	top_sites_failed(&f, -ENOMEM);
	assert_non_null(strstr(top_sites_empty(&f, buf, sizeof(buf)), strerror(ENOMEM)));
	prof_of(&p,
		(const struct prof_sample[]){
			{ stack_inlined, 3, 1, 8, 1, 8, "g", 1, 0, 0, { 0 }, 0, 0 } },
		1);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_null(top_sites_empty(&f, buf, sizeof(buf)));
	top_frame_free(&f);
}

static void mode__sites__parsed_and_its_frame_keeps_the_groups_rows(void **state)
{
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	enum top_mode mode;
	(void)state;
	assert_int_equal(top_mode_parse("sites", &mode), 0);
	assert_int_equal(mode, TOP_MODE_SITES);
	assert_int_equal(TOP_MODE_SITES + 1, TOP_MODES); /* v: sites, then groups again */
	fill(&m);
	input(&in, &m, 11 * SEC);
	assert_int_equal(build_mode(&f, &in, &prev, TOP_MODE_SITES), 0);
	assert_int_equal(f.mode, TOP_MODE_SITES);
	/* the rates' base of the view after it: the groups' pairs */
	assert_non_null(row(&f, 1));
	assert_true(f.npairs > 0);
	assert_true(prev.valid && prev.n == f.npairs);
	top_frame_free(&f);
	model_free(&m);
}

static void text__sites_view__table_instead_of_groups(void **state)
{
	const struct prof_sample s[] = {
		{ stack_inlined, 3, 10, 4096, 2, 1024, "ingest", 42, 0, 0, { 0 }, 0, 0 },
		{ stack_evil, 2, 1, 8, 1, 8, "grp\x1b[31m", 42, 0, 0, { 0 }, 0, 0 },
	};
	struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	struct prof p;
	char *buf = NULL;
	size_t len = 0;
	FILE *out;
	(void)state;
	fill(&m);
	input(&in, &m, 11 * SEC);
	build_mode(&f, &in, &prev, TOP_MODE_SITES);
	prof_of(&p, s, 2);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	out = open_memstream(&buf, &len);
	assert_non_null(out);
	assert_int_equal(top_text_frame(out, &f, 3, false), 0);
	fclose(out);
	assert_true(harmless(buf, len, true));
	assert_non_null(strstr(buf, "--- frame 3 ---\ntarget: app, pid 42,"));
	assert_non_null(strstr(buf, "\nidentity: "));
	assert_non_null(strstr(buf, "\nsites: 2 of 2, most bytes in use first (estimates: a sample "
				    "every 524288 bytes on average)\n"));
	/* GROUP as wide as the longest, sanitized */
	assert_non_null(strstr(
		buf,
		"\n      IN USE         PEAK    OBJECTS    ALLOCATED GROUP           PID STACK\n"));
	/* pid 42's peak is not known (no allocator record): "-" */
	assert_non_null(strstr(buf,
			       "\n        1024            -          2         4096 ingest    "
			       "       42 lz_inlined < lz_alloc_state < handle_request < main\n"));
	assert_non_null(strstr(buf, " grp\\x1b[31m      42 evil\\x1b[2J\\x9b < main\n"));
	assert_null(strstr(buf, "CPU%")); /* not the groups' table */
	free(buf);
	buf = NULL;
	top_sites_build(&f, NULL, false);
	out = open_memstream(&buf, &len);
	assert_int_equal(top_text_frame(out, &f, 4, false), 0);
	fclose(out);
	assert_non_null(strstr(buf, "\nno sites: sampling is off (--no-sample)\n\n"));
	free(buf);
	top_frame_free(&f);
	model_free(&m);
}

/* A peak of live at at_ns (docs/DESIGN.md §11), as the replay keeps it: the
 * whole figures there, and its moment. */
static void peak_of_model(struct model *m, int64_t live, uint64_t at_ns)
{
	m->saw_alloc = true;
	m->replay.peak = (struct tally_replay_mark){ .mapped = 1 << 20, .live = live, .seq = 3 };
	m->peak = (struct model_peak){ .at_ns = at_ns, .from_ns = at_ns - SEC / 2, .heap = 1 };
	m->replay.peak_mapped = m->replay.peak;
	m->peak_mapped = m->peak;
}

/* Group g's live at the peak, taken when it changed after it; live now. */
static void group_peak(struct model *m, uint32_t g, int64_t at_peak, int64_t now)
{
	m->replay.groups[g].peak_live = at_peak;
	m->replay.groups[g].changed = 4;
	m->replay.groups[g].alloc_bytes = now;
}

/* The root's peak 1800 at 12.5 s (2.5 s after its start): ingest 1000 then
 * (400 now), decode 500 (0 now), #7 its 300 (unchanged since). */
static void peak_fill(struct model *m, struct top_in *in)
{
	fill(m);
	peak_of_model(m, 1800, 12 * SEC + SEC / 2);
	group_peak(m, 1, 1000, 400);
	group_peak(m, 2, 500, 0);
	input(in, m, 14 * SEC);
}

static void peak__rows_and_header__live_at_the_root_peak_in_every_view(void **state)
{
	static struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	(void)state;
	peak_fill(&m, &in);
	build(&f, &in, &prev);
	assert_true(f.hdr.peak_known && f.hdr.peak_exact && !f.hdr.peak_since_attach);
	assert_int_equal(f.hdr.peak_live, 1800);
	assert_true(f.hdr.peak_at_s > 2.499 && f.hdr.peak_at_s < 2.501);
	const int64_t want[][3] = { { 1, 400, 1000 }, { 2, 0, 500 }, { 7, 300, 300 }, { 0, 0, 0 } };
	for (unsigned i = 0; i < 4; i++) {
		const struct top_row *r = row(&f, (uint32_t)want[i][0]);
		assert_non_null(r);
		assert_true(r->peak_known);
		assert_int_equal(r->live, want[i][1]);
		assert_int_equal(r->peak, want[i][2]);
	}
	/* sorted like LIVE: most at the peak first, and back */
	top_sort(f.rows, f.nrows, TOP_COL_PEAK, true);
	for (unsigned i = 0; i < 4; i++)
		assert_int_equal(f.rows[i].id, want[i][0]);
	top_sort(f.rows, f.nrows, TOP_COL_PEAK, false);
	assert_int_equal(f.rows[0].id, 0);
	assert_int_equal(f.rows[3].id, 1);
	/* a process's row: its peak of live; a process x group row: the group's */
	build_mode(&f, &in, &prev, TOP_MODE_PROCS);
	assert_int_equal(f.nrows, 1);
	assert_true(f.rows[0].peak_known);
	assert_int_equal(f.rows[0].peak, 1800);
	build_mode(&f, &in, &prev, TOP_MODE_PROC_GROUPS);
	assert_int_equal(row(&f, 1)->peak, 1000);
	assert_int_equal(row(&f, 2)->peak, 500);
	top_frame_free(&f);
	model_free(&m);
}

static void peak__not_one_moment_or_since_attach__said_in_the_header(void **state)
{
	static struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	char b[64];
	(void)state;
	peak_fill(&m, &in);
	build(&f, &in, &prev);
	top_fmt_peak(b, sizeof(b), &f.hdr, true);
	assert_string_equal(b, "live 1800 at 2.5 s");
	top_fmt_peak(b, sizeof(b), &f.hdr, false);
	assert_string_equal(b, "1.76K at 2.5s");
	m.peak.crossed = true; /* another heap moved live in its window */
	m.peak_seeded = true;  /* counted from a late attach's state */
	build(&f, &in, &prev);
	assert_false(f.hdr.peak_exact);
	assert_true(f.hdr.peak_since_attach);
	top_fmt_peak(b, sizeof(b), &f.hdr, true);
	assert_string_equal(b, "live ~1800 at 2.5 s since attach");
	top_fmt_peak(b, sizeof(b), &f.hdr, false);
	assert_string_equal(b, "~1.76K at 2.5s since attach");
	f.hdr.peak_known = false;
	top_fmt_peak(b, sizeof(b), &f.hdr, false);
	assert_string_equal(b, "-");
	top_frame_free(&f);
	model_free(&m);
}

/* A tree: the root (42, peak known: ingest 1000 at it), a child 43 (ingest
 * 700 at its own peak) and a child 44 in glibc mode (ingest and "gl", no
 * peak). The groups view sums each process's group at its own peak; one
 * that does not know it adds nothing, and a row none knows shows "-". */
static void peak__groups_view__summed_over_the_processes_each_at_its_own(void **state)
{
	static struct model ma, mb, mc;
	static struct top_in ia, ib, ic;
	static struct glibc_figures g;
	static struct figures fa, fb, fc;
	static struct top_frame f;
	struct top_prev prev = { 0 };
	(void)state;
	fill(&mb);
	peak_of_model(&mb, 700, 13 * SEC);
	group_peak(&mb, 1, 700, 100);
	input(&ib, &mb, 14 * SEC);
	ib.src.pid = 43;
	fill(&mc);
	strcpy(mc.groups[3].name, "gl");
	mc.groups[3].known = true;
	g.alloc_bytes[1] = 900;
	g.alloc_bytes[3] = 50;
	input(&ic, &mc, 14 * SEC);
	ic.src.pid = 44;
	ic.src.allocator = FIGURES_ALLOC_GLIBC;
	ic.glibc = &g;
	peak_fill(&ma, &ia); /* (fill resets the CPU figures: the root's last) */
	figures_of(&fa, &ia);
	figures_of(&fb, &ib);
	figures_of(&fc, &ic);
	struct figures_process procs[3] = { fa.procs[0], fb.procs[0], fc.procs[0] };
	const struct figures tree = { .nprocs = 3, .procs = procs };
	assert_int_equal(top_frame_build(&f, &tree, &prev, TOP_MODE_GROUPS), 0);
	const struct top_row *r = row(&f, 1);
	assert_string_equal(r->name, "ingest");
	assert_int_equal(r->live, 400 + 100 + 900);
	assert_true(r->peak_known);
	assert_int_equal(r->peak, 1000 + 700);
	r = row(&f, 3);
	assert_string_equal(r->name, "gl");
	assert_false(r->peak_known);
	/* the header's peak is the root's */
	assert_int_equal(f.hdr.peak_live, 1800);
	/* the processes view: each its own, "-" where not known */
	assert_int_equal(top_frame_build(&f, &tree, &prev, TOP_MODE_PROCS), 0);
	assert_int_equal(f.nrows, 3);
	assert_int_equal(f.rows[0].peak, 1800);
	assert_int_equal(f.rows[1].peak, 700);
	assert_false(f.rows[2].peak_known);
	assert_true(f.procs[0].peak_known && f.procs[1].peak_known && !f.procs[2].peak_known);
	top_frame_free(&f);
	figures_free(&fa);
	figures_free(&fb);
	figures_free(&fc);
	model_free(&ma);
	model_free(&mb);
	model_free(&mc);
}

/* What a text frame prints of the peak: the header's line, the column. */
static char *text_of(const struct top_frame *f)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);

	assert_non_null(out);
	assert_int_equal(top_text_frame(out, f, 1, false), 0);
	fclose(out);
	assert_true(harmless(buf, len, true));
	return buf;
}

static void text__peak__header_line_and_column_or_dash(void **state)
{
	static struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	char *buf;
	(void)state;
	peak_fill(&m, &in);
	build(&f, &in, &prev);
	top_sort(f.rows, f.nrows, TOP_COL_PEAK, true);
	buf = text_of(&f);
	assert_non_null(
		strstr(buf, "\nprocesses: 1 listed, 1 running\npeak: live 1800 at 2.5 s\n"));
	assert_non_null(strstr(buf, "\n  ID NAME        CPU%         LIVE         PEAK     ALLOC/s "
				    "     FREE/s   KERNELS       DEVICE       PINNED   REJECTS    "
				    "YIELDS\n"));
	assert_non_null(strstr(buf, "\n   1 ingest         -          400         1000           - "
				    "          -         -            -            -         0    "
				    "     0\n   2 decode         -            0          500 "));
	free(buf);
	m.peak.crossed = true;
	build(&f, &in, &prev);
	buf = text_of(&f);
	assert_non_null(strstr(buf, "\npeak: live ~1800 at 2.5 s (~: not one moment: "));
	free(buf);
	/* no allocator record: no peak, "-" in the header and the column */
	fill(&m);
	input(&in, &m, 14 * SEC);
	build(&f, &in, &prev);
	buf = text_of(&f);
	assert_non_null(strstr(buf, "\npeak: - (not known: "));
	assert_non_null(strstr(buf, "\n   1 ingest         -            0            - "));
	free(buf);
	top_frame_free(&f);
	model_free(&m);
}

/* Sites of the root (42, its peak known) and of a process not listed (99):
 * a, most in use now, held nothing at the peak; d, freed since, held 3000. */
static const struct prof_sample peak_sites[] = {
	{ .locs = stack_inlined,
	  .nlocs = 3,
	  .alloc_space = 900,
	  .inuse_space = 900,
	  .group = "a",
	  .pid = 42 },
	{ .locs = stack_inlined,
	  .nlocs = 3,
	  .alloc_space = 5000,
	  .inuse_space = 100,
	  .group = "b",
	  .pid = 42,
	  .peak_space = 5000 },
	{ .locs = stack_inlined,
	  .nlocs = 3,
	  .alloc_space = 50,
	  .inuse_space = 50,
	  .group = "c",
	  .pid = 99,
	  .peak_space = 9000 },
	{ .locs = stack_inlined,
	  .nlocs = 3,
	  .alloc_space = 3000,
	  .group = "d",
	  .pid = 42,
	  .peak_space = 3000 },
};

static void sites_order_is(const struct top_frame *f, const char *groups)
{
	char got[16] = "";

	for (unsigned i = 0; i < f->nsites && i < sizeof(got) - 1; i++)
		got[i] = f->sites[i].group[0];
	assert_string_equal(got, groups);
}

static void sites__peak__in_use_at_the_peak_and_ordered_by_it(void **state)
{
	static struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	struct prof p;
	(void)state;
	peak_fill(&m, &in);
	build_mode(&f, &in, &prev, TOP_MODE_SITES);
	prof_of(&p, peak_sites, 4);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	assert_false(f.sites_by_peak);
	sites_order_is(&f, "abcd");
	assert_true(f.sites[0].peak_known);
	assert_int_equal(f.sites[0].peak, 0);
	assert_int_equal(f.sites[1].peak, 5000);
	assert_false(f.sites[2].peak_known); /* pid 99: not listed */
	assert_int_equal(f.sites[3].peak, 3000);
	assert_int_equal(top_sites_build(&f, &p, true), 0);
	assert_true(f.sites_by_peak);
	sites_order_is(&f, "bdac"); /* the unknown last */
	/* a paused view's rows, sorted again in place */
	top_sites_sort(&f, false);
	sites_order_is(&f, "abcd");
	top_sites_sort(&f, true);
	sites_order_is(&f, "bdac");
	char *buf = text_of(&f);
	assert_non_null(strstr(buf, "\nsites: 4 of 4, most bytes in use at the peak first ("));
	assert_non_null(strstr(buf, "\n         100         5000          0         5000 b  "));
	assert_non_null(strstr(buf, "\n          50            -          0           50 c  "));
	free(buf);
	top_frame_free(&f);
	model_free(&m);
}

/* By the peak, the TOP_SITES_MAX kept are chosen from every site: one freed
 * since the peak, in use by none now, is first, not left out. */
static void sites__peak__chosen_from_all_sites_not_the_most_in_use(void **state)
{
	enum { N = TOP_SITES_MAX + 50 };
	static struct prof_sample s[N];
	static struct model m;
	static struct top_in in;
	struct top_prev prev = { 0 };
	static struct top_frame f;
	struct prof p;
	(void)state;
	peak_fill(&m, &in);
	build_mode(&f, &in, &prev, TOP_MODE_SITES);
	for (unsigned i = 0; i < N; i++)
		s[i] = (struct prof_sample){ .locs = stack_inlined,
					     .nlocs = 3,
					     .inuse_space = i + 1,
					     .alloc_space = i + 1,
					     .group = "g",
					     .pid = 42 };
	s[7] = (struct prof_sample){ .locs = stack_inlined,
				     .nlocs = 3,
				     .alloc_space = 1 << 20,
				     .peak_space = 1 << 20,
				     .group = "peak",
				     .pid = 42 };
	prof_of(&p, s, N);
	assert_int_equal(top_sites_build(&f, &p, false), 0);
	for (unsigned i = 0; i < f.nsites; i++)
		assert_string_not_equal(f.sites[i].group, "peak");
	assert_int_equal(top_sites_build(&f, &p, true), 0);
	assert_int_equal(f.nsites, TOP_SITES_MAX);
	assert_string_equal(f.sites[0].group, "peak");
	assert_int_equal(f.sites[0].peak, 1 << 20);
	assert_int_equal(f.sites[0].inuse, 0);
	top_frame_free(&f);
	model_free(&m);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sanitize__printable_ascii__kept_as_is),
		cmocka_unit_test(sanitize__escape_sequences__shown_as_hex),
		cmocka_unit_test(sanitize__backslash__doubled_so_escapes_are_unambiguous),
		cmocka_unit_test(sanitize__non_ascii__escaped_valid_or_not),
		cmocka_unit_test(sanitize__unterminated_input__stops_at_inlen),
		cmocka_unit_test(sanitize__worst_case_name__fits_top_name_max),
		cmocka_unit_test(sanitize__small_buffer__never_cuts_an_escape),
		cmocka_unit_test(frame__without_previous_sample__rates_unknown),
		cmocka_unit_test(frame__two_samples__cpu_percent_and_rates_per_second),
		cmocka_unit_test(frame__counter_goes_back__rates_unknown_not_huge),
		cmocka_unit_test(frame__glibc_mode__group_counts_from_glibc),
		cmocka_unit_test(frame__groups_shown__known_or_charged_only),
		cmocka_unit_test(frame__gpu_figures_per_group__and_dash_without_source),
		cmocka_unit_test(frame__threads__alive_by_tid_with_group_names),
		cmocka_unit_test(sort__every_column__both_directions),
		cmocka_unit_test(sort__ties__keep_their_order),
		cmocka_unit_test(sort__unknown_figures__last_in_both_directions),
		cmocka_unit_test(order__keys_parse_pick_and_step),
		cmocka_unit_test(identity__tally__eight_terms_and_balance),
		cmocka_unit_test(identity__glibc__live_and_rounding_known_rest_unknown),
		cmocka_unit_test(bar__cells_in_proportion_adding_up_to_width),
		cmocka_unit_test(fmt_bytes__units),
		cmocka_unit_test(text__hostile_names__no_control_bytes_reach_the_output),
		cmocka_unit_test(text__exited_target_and_unknown_rates__said_plainly),
		cmocka_unit_test(sites__inlined_lines__innermost_first_then_callers),
		cmocka_unit_test(sites__unknown_function__module_offset_or_address),
		cmocka_unit_test(sites__target_strings__sanitized),
		cmocka_unit_test(sites__order__most_in_use_first_then_allocated_then_profile_order),
		cmocka_unit_test(sites__more_than_max__largest_kept_and_counted),
		cmocka_unit_test(sites__deep_stack__cut_with_a_tilde_never_inside_an_escape),
		cmocka_unit_test(sites__no_profile_none_sampled_or_failed__one_line),
		cmocka_unit_test(mode__sites__parsed_and_its_frame_keeps_the_groups_rows),
		cmocka_unit_test(text__sites_view__table_instead_of_groups),
		cmocka_unit_test(peak__rows_and_header__live_at_the_root_peak_in_every_view),
		cmocka_unit_test(peak__not_one_moment_or_since_attach__said_in_the_header),
		cmocka_unit_test(peak__groups_view__summed_over_the_processes_each_at_its_own),
		cmocka_unit_test(text__peak__header_line_and_column_or_dash),
		cmocka_unit_test(sites__peak__in_use_at_the_peak_and_ordered_by_it),
		cmocka_unit_test(sites__peak__chosen_from_all_sites_not_the_most_in_use),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
