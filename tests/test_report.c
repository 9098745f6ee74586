// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally report`'s pure parts (user/views/report/): the time series' bounds
 * (thinned by halves when full, every kept point the tick it claims to be;
 * groups and processes past the limits summed as "(other)"), the HTML
 * escaping of the target's text, and the page's data element, which a
 * hostile name cannot end early. The page's drawing is tests/report's, in
 * a browser.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_skip.h"

#include "../user/views/report/report.h"

#define START 1000000000ull /* the session's start, ns */
#define TICK 100000000ull   /* 100 ms */

/* One running process with ngroups groups: group g holds base + g bytes. */
struct one {
	struct figures f;
	struct figures_process p;
	struct figures_group g[80];
	char names[80][16];
};

static void one_init(struct one *o, unsigned ngroups, const char *comm, const char *gname)
{
	memset(o, 0, sizeof(*o));
	o->p.target.pid = 42;
	o->p.target.comm = comm;
	o->p.exact = true;
	o->p.stats.known = (1u << TALLY_STAT_live) | (1u << TALLY_STAT_mapped);
	o->p.ngroups = ngroups;
	o->p.groups = o->g;
	for (unsigned i = 0; i < ngroups; i++) {
		snprintf(o->names[i], sizeof(o->names[i]), "g%u", i);
		o->g[i].id = i + 1;
		o->g[i].name = i == 0 && gname ? gname : o->names[i];
		o->g[i].shown = true;
	}
	o->f.nprocs = o->f.cap = 1;
	o->f.procs = &o->p;
}

/* tick k's figures: live k, each group k + its index, CPU k ms */
static void one_at(struct one *o, int64_t k)
{
	o->p.stats.v[TALLY_STAT_live] = k;
	o->p.stats.v[TALLY_STAT_mapped] = 2 * k;
	for (unsigned i = 0; i < o->p.ngroups; i++) {
		o->g[i].live_bytes = k + i;
		o->g[i].cpu_ns = (uint64_t)k * 1000000;
	}
}

static void series__thins_by_halves_and_keeps_the_end(void **state)
{
	static struct one o;
	struct series s;
	const unsigned ticks = 3 * SERIES_MAX_POINTS + 5;

	(void)state;
	one_init(&o, 1, "app", NULL);
	assert_int_equal(series_init(&s, 100, START), 0);
	for (unsigned k = 0; k < ticks; k++) {
		one_at(&o, k);
		assert_int_equal(series_add(&s, &o.f, START + k * TICK, false), 0);
		assert_true(s.n <= SERIES_MAX_POINTS);
	}
	/* 3 * 2048 + 5 ticks: thinned twice, a point every 4 ticks */
	assert_int_equal(s.stride, 4);
	assert_int_equal(s.n, (ticks + 3) / 4);
	for (unsigned i = 0; i < s.n; i++) {
		int64_t k = (int64_t)i * s.stride; /* the tick point i claims */
		assert_int_equal(s.stat[TALLY_STAT_live][i], k);
		assert_int_equal(s.stat[TALLY_STAT_mapped][i], 2 * k);
		assert_int_equal(s.groups[0].live[i], k);
		assert_int_equal(s.procs[0].live[i], k);
		assert_true(s.t[i] == (double)k / 10);
	}
	/* the end's point, off the stride, is kept */
	one_at(&o, 999999);
	assert_int_equal(series_add(&s, &o.f, START + ticks * TICK, true), 0);
	assert_int_equal(s.stat[TALLY_STAT_live][s.n - 1], 999999);
	series_free(&s);
}

static void series__groups_past_the_limit_are_summed(void **state)
{
	static struct one o;
	struct series s;
	const unsigned n = SERIES_MAX_GROUPS + 6;

	(void)state;
	one_init(&o, n, "app", NULL);
	assert_int_equal(series_init(&s, 100, START), 0);
	one_at(&o, 10);
	assert_int_equal(series_add(&s, &o.f, START, false), 0);
	one_at(&o, 20);
	assert_int_equal(series_add(&s, &o.f, START + TICK, false), 0);
	assert_int_equal(s.ngroups, SERIES_MAX_GROUPS + 1);
	assert_string_equal(s.groups[SERIES_MAX_GROUPS].name, SERIES_OTHER);
	for (unsigned p = 0; p < 2; p++) {
		int64_t want = 0, k = p ? 20 : 10;
		for (unsigned i = SERIES_MAX_GROUPS; i < n; i++)
			want += k + i;
		assert_int_equal(s.groups[SERIES_MAX_GROUPS].live[p], want);
		/* those within the limit keep their own line */
		assert_int_equal(s.groups[3].live[p], k + 3);
	}
	series_free(&s);
}

static char *html(const char *in)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	report_html_text(f, in);
	fclose(f);
	return buf;
}

static void html__escapes_markup_and_bad_bytes(void **state)
{
	char *out;

	(void)state;
	out = html("<b a='1' c=\"2\">&</b>");
	assert_string_equal(out, "&lt;b a=&#39;1&#39; c=&quot;2&quot;&gt;&amp;&lt;/b&gt;");
	free(out);
	/* invalid UTF-8, a C0 and a C1 control: U+FFFD each; valid UTF-8 kept */
	out = html("a\xff"
		   "b\x1b"
		   "c\xc2\x85"
		   "d\xc3\xa9\te");
	assert_string_equal(out, "a\xef\xbf\xbd"
				 "b\xef\xbf\xbd"
				 "c\xef\xbf\xbd"
				 "d\xc3\xa9\te");
	free(out);
}

static void page__a_hostile_name_stays_in_its_element(void **state)
{
	static struct one o;
	struct series s;
	char *buf = NULL, *data, *end;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	const char *open = "<script type=\"application/json\" id=\"tally-data\">";

	(void)state;
	assert_non_null(f);
	one_init(&o, 2, "<i>x</i>", "</script><img src=x>");
	assert_int_equal(series_init(&s, 100, START), 0);
	one_at(&o, 5);
	assert_int_equal(series_add(&s, &o.f, START, true), 0);
	assert_int_equal(report_write(f, &o.f, NULL, &s), 0);
	fclose(f);
	/* the title's and heading's comm as text */
	assert_non_null(strstr(buf, "<title>tally report: &lt;i&gt;x&lt;/i&gt; (42)</title>"));
	assert_null(strstr(buf, "<i>x"));
	/* the data element ends where the page ends it: the group's name,
	 * in the snapshot and in the series, is inside it, '<' as \u003c */
	data = strstr(buf, open);
	assert_non_null(data);
	data += strlen(open);
	end = strstr(data, "</script>");
	assert_non_null(end);
	assert_null(memchr(data, '<', (size_t)(end - data)));
	assert_non_null(strstr(data, "\\u003c/script>\\u003cimg src=x>"));
	assert_null(strstr(buf, "<img"));
	/* nothing fetched: the policy, and no script with a source */
	assert_non_null(strstr(buf, "default-src 'none'"));
	assert_null(strstr(buf, "<script src"));
	free(buf);
	series_free(&s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(series__thins_by_halves_and_keeps_the_end),
		cmocka_unit_test(series__groups_past_the_limit_are_summed),
		cmocka_unit_test(html__escapes_markup_and_bad_bytes),
		cmocka_unit_test(page__a_hostile_name_stays_in_its_element),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
