// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The Prometheus exposition (user/views/prom.c): every line has the shape the
 * text format 0.0.4 allows (a parser below checks each), every family has
 * one HELP and one TYPE line before its samples, counters end in _total,
 * label values and HELP text are escaped, unknown figures are left out.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_skip.h"

#include "../user/views/prom.h"

static char comm[TALLY_COMM_LEN];
static char names[TALLY_MAX_GROUPS][TALLY_GROUP_NAME_MAX];

/* The identity's derived figures, as figures_build derives them. */
static void derive(struct figures_process *p)
{
	struct tally_stats st;
	uint64_t v[TALLY_STATS_COUNT];

	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++)
		v[i] = (uint64_t)p->stats.v[i];
	tally_stats_from_array(&st, v);
	p->stats.accounted = (int64_t)tally_stats_accounted(&st);
	p->stats.balanced = tally_stats_balanced(&st);
	p->stats.predicted_resident = (int64_t)tally_stats_predicted_resident(&st);
}

static char *render(struct figures_process *p)
{
	struct figures fig = { .nprocs = 1, .cap = 1, .procs = p };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	derive(p);
	assert_non_null(f);
	assert_int_equal(prom_render(f, &fig), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

/* The figures of a tally-mode process by hand: the renderer's input. */
static struct figures_process *figures(void)
{
	struct figures_process *p = calloc(1, sizeof(*p));

	memset(names, 0, sizeof(names));
	strcpy(comm, "server");
	p->target.pid = 4242;
	p->target.comm = comm;
	p->target.allocator = FIGURES_ALLOC_TALLY;
	p->target.cuda = FIGURES_CUDA_DRIVER;
	p->exact = true;
	p->events.received = 100;
	for (unsigned i = 1; i < 9; i++)
		p->stats.v[i] = 4096 * i;
	for (unsigned i = 1; i < 9; i++)
		p->stats.v[0] += p->stats.v[i]; /* balanced */
	p->stats.v[9] = 3;
	p->stats.v[10] = 17;
	p->stats.known = (1u << TALLY_STATS_COUNT) - 1;
	p->stats.identity = true;
	p->instance.kernels_launched = 12;
	p->instance.device_bytes_allocated = 1 << 20;
	p->gpu_spoke = true;
	/* the groups listed: root (0) and io (3); the list is static, p is freed alone */
	static struct figures_group groups[2];
	memset(groups, 0, sizeof(groups));
	p->groups = groups;
	p->ngroups = 2;
	groups[0].id = 0;
	groups[0].name = names[0];
	groups[0].shown = true;
	strcpy(names[0], "root");
	groups[0].live_bytes = 100;
	groups[1].id = 3;
	groups[1].name = names[3];
	groups[1].shown = true;
	strcpy(names[3], "io");
	groups[1].live_bytes = -8;
	groups[1].cpu_ns = 1500000001;
	groups[1].alloc_bytes = 10;
	groups[1].dealloc_bytes = 18;
	groups[1].instance.kernels_launched = 12;
	return p; /* group 9 and the others: not shown, no samples */
}

/* ---- a parser of the text format's line shapes ---- */

static bool name_char(char c, bool first)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || c == ':' ||
	       (!first && c >= '0' && c <= '9');
}

/* A metric name at p: its end, or NULL. */
static const char *metric_name(const char *p)
{
	if (!name_char(*p, true))
		return NULL;
	while (name_char(*p, false))
		p++;
	return p;
}

/* {name="value",...}: the end, or NULL; values may hold only \\ \" \n escapes. */
static const char *labels(const char *p)
{
	if (*p++ != '{')
		return NULL;
	if (*p == '}')
		return p + 1;
	for (;;) {
		if (!name_char(*p, true) || *p == ':')
			return NULL;
		while (name_char(*p, false) && *p != ':')
			p++;
		if (*p++ != '=' || *p++ != '"')
			return NULL;
		while (*p != '"') {
			if (!*p || *p == '\n')
				return NULL;
			if (*p == '\\' && !strchr("\\\"n", *++p))
				return NULL;
			p++;
		}
		p++;
		if (*p == '}')
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

struct family_seen {
	char name[128];
	char type[16];
	bool help, samples;
};

/* Checks every line of doc; fills fam[] (up to max). Returns the number of families. */
static int check_lines(const char *doc, struct family_seen *fam, int max)
{
	int nf = 0;

	for (const char *line = doc; *line;) {
		const char *nl = strchr(line, '\n');
		assert_non_null(nl); /* every line ends with a newline */
		char buf[4096];
		size_t len = (size_t)(nl - line);
		assert_true(len < sizeof(buf));
		memcpy(buf, line, len);
		buf[len] = 0;
		if (!strncmp(buf, "# HELP ", 7) || !strncmp(buf, "# TYPE ", 7)) {
			const char *n = buf + 7, *e = metric_name(n);
			assert_non_null(e);
			assert_int_equal(*e, ' ');
			int k;
			for (k = 0; k < nf; k++)
				if (!strncmp(fam[k].name, n, (size_t)(e - n)) &&
				    !fam[k].name[e - n])
					break;
			if (k == nf) {
				assert_true(nf < max);
				memcpy(fam[nf].name, n, (size_t)(e - n));
				nf++;
			}
			assert_false(fam[k].samples); /* HELP and TYPE come before samples */
			if (buf[2] == 'H') {
				assert_false(fam[k].help); /* once */
				fam[k].help = true;
				/* HELP text: no raw newline (checked by the line split), and
				 * backslashes only as \\ or \n */
				for (const char *q = e + 1; *q; q++)
					if (*q == '\\')
						assert_non_null(strchr("\\n", *++q));
			} else {
				assert_false(fam[k].type[0]);
				assert_true(!strcmp(e + 1, "gauge") || !strcmp(e + 1, "counter"));
				strcpy(fam[k].type, e + 1);
			}
		} else {
			const char *e = metric_name(buf), *v;
			assert_non_null(e);
			int k;
			for (k = 0; k < nf; k++)
				if (!strncmp(fam[k].name, buf, (size_t)(e - buf)) &&
				    !fam[k].name[e - buf])
					break;
			if (k == nf)
				print_error("a sample without its family: %s\n", buf);
			assert_true(k < nf);
			assert_true(fam[k].help && fam[k].type[0]);
			fam[k].samples = true;
			v = *e == '{' ? labels(e) : e;
			assert_non_null(v);
			assert_int_equal(*v, ' ');
			char *end;
			double d = strtod(v + 1, &end);
			assert_true(end > v + 1 && !*end && isfinite(d));
		}
		line = nl + 1;
	}
	return nf;
}

static const char *sample_line(const char *doc, const char *prefix)
{
	size_t n = strlen(prefix);

	for (const char *p = doc; p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, prefix, n))
			return p;
	return NULL;
}

static void assert_sample(const char *doc, const char *line)
{
	const char *p = sample_line(doc, line);

	if (!p || p[strlen(line)] != '\n') {
		print_error("no line '%s'\n", line);
		fail();
	}
}

static void prom__full_figures__every_line_well_formed(void **state)
{
	struct figures_process *p = figures();
	struct family_seen fam[128] = { 0 };
	char *doc;
	int nf;

	(void)state;
	doc = render(p);
	nf = check_lines(doc, fam, 128);
	assert_true(nf > 30);
	for (int k = 0; k < nf; k++) {
		size_t n = strlen(fam[k].name);
		bool total = n > 6 && !strcmp(fam[k].name + n - 6, "_total");
		assert_true(fam[k].help && fam[k].type[0]);
		/* counters, and only counters, end in _total */
		assert_int_equal(total, !strcmp(fam[k].type, "counter"));
		assert_int_equal(strncmp(fam[k].name, "tally_", 6), 0);
	}
	free(doc);
	free(p);
}

static void prom__stats__every_term_and_the_identity(void **state)
{
	static const char *const stat_names[TALLY_STATS_FIELDS] = {
		"mapped_bytes",		  "live_bytes",	    "rounding_bytes", "cache_bytes",
		"span_free_bytes",	  "returned_bytes", "virgin_bytes",   "hysteresis_bytes",
		"segment_overhead_bytes", "large_objects",  "spans_assigned",
	};
	struct figures_process *p = figures();
	char line[128];
	char *doc;

	(void)state;
	doc = render(p);
	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++) {
		snprintf(line, sizeof(line), "tally_stats_%s %lld", stat_names[i],
			 (long long)p->stats.v[i]);
		assert_sample(doc, line);
		snprintf(line, sizeof(line), "# TYPE tally_stats_%s gauge", stat_names[i]);
		assert_sample(doc, line);
	}
	snprintf(line, sizeof(line), "tally_stats_accounted_bytes %lld", (long long)p->stats.v[0]);
	assert_sample(doc, line);
	assert_sample(doc, "tally_stats_balanced 1");
	assert_null(sample_line(doc, "tally_stats_measured_resident_bytes"));
	assert_sample(doc, "tally_exact 1");
	assert_sample(doc, "tally_target_running 1");
	assert_sample(doc, "tally_gpu_kernels_launched_total 12");
	assert_sample(doc, "tally_gpu_device_bytes 1048576");
	free(doc);
	free(p);
}

/* After lost records a rebuilt term can be negative: printed signed, never as
 * 2^64 - x, and the identity not called balanced although the unsigned sum
 * still comes to mapped. */
static void prom__stats__negative_terms_signed_and_unbalanced(void **state)
{
	struct figures_process *p = figures();
	char *doc;

	(void)state;
	int64_t was = p->stats.v[2];
	p->stats.v[2] = -300;	    /* rounding below zero */
	p->stats.v[5] += was + 300; /* returned: the unsigned sum still matches mapped */
	doc = render(p);
	assert_non_null(strstr(doc, "\ntally_stats_rounding_bytes -300\n"));
	assert_null(strstr(doc, "18446744073709"));
	assert_sample(doc, "tally_stats_balanced 0");
	free(doc);
	free(p);
}

static void prom__groups__labelled_and_only_those_shown(void **state)
{
	struct figures_process *p = figures();
	char *doc;

	(void)state;
	doc = render(p);
	assert_sample(doc, "tally_group_live_bytes{id=\"0\",group=\"root\"} 100");
	assert_sample(doc, "tally_group_live_bytes{id=\"3\",group=\"io\"} -8");
	/* nanoseconds as exact decimal seconds */
	assert_sample(doc, "tally_group_cpu_seconds_total{id=\"3\",group=\"io\"} 1.500000001");
	assert_sample(doc, "tally_group_cpu_seconds_total{id=\"0\",group=\"root\"} 0.000000000");
	assert_sample(doc, "tally_group_allocated_bytes_total{id=\"3\",group=\"io\"} 10");
	assert_sample(doc, "tally_group_deallocated_bytes_total{id=\"3\",group=\"io\"} 18");
	assert_sample(doc, "tally_group_gpu_kernels_launched_total{id=\"3\",group=\"io\"} 12");
	assert_null(sample_line(doc, "tally_group_live_bytes{id=\"9\""));
	free(doc);
	/* no GPU source: no per-group GPU families, the process's still there */
	p->gpu_spoke = false;
	doc = render(p);
	assert_null(strstr(doc, "tally_group_gpu_"));
	assert_sample(doc, "tally_gpu_kernels_launched_total 12");
	free(doc);
	free(p);
}

static void prom__hostile_names__escaped_label_values(void **state)
{
	struct figures_process *p = figures();
	struct family_seen fam[128] = { 0 };
	char *doc;

	(void)state;
	strcpy(names[3], "a\"b\\c\nd");
	strcpy(names[0], "\x1b[31mred\x9b\xff\xc3\xa9");
	memcpy(comm, "0123456789abcdef", 16); /* no NUL: a full comm */
	doc = render(p);
	check_lines(doc, fam, 128);
	assert_sample(doc, "tally_group_live_bytes{id=\"3\",group=\"a\\\"b\\\\c\\nd\"} -8");
	/* ESC and a lone 0x9b (C1 CSI) and 0xff: not UTF-8 or control: U+FFFD;
	 * é is kept */
	assert_sample(doc, "tally_group_live_bytes{id=\"0\",group=\"\xef\xbf\xbd[31mred"
			   "\xef\xbf\xbd\xef\xbf\xbd\xc3\xa9\"} 100");
	assert_non_null(strstr(doc, "comm=\"0123456789abcdef\","));
	assert_null(memchr(doc, 0x1b, strlen(doc)));
	free(doc);
	free(p);
}

static void prom__escape__c1_controls_and_help_text(void **state)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	(void)state;
	f = open_memstream(&buf, &len);
	/* U+009B (CSI as UTF-8), a truncated sequence, an overlong '/', a surrogate */
	prom_escape(f, "x\xc2\x9by\xe2\x82", 6, true);
	fputc('|', f);
	prom_escape(f, "\xc0\xaf\xed\xa0\x80", 5, true);
	fputc('|', f);
	/* HELP text keeps its quotes */
	prom_escape(f, "say \"hi\"\\\n", 10, false);
	fclose(f);
	assert_string_equal(buf, "x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbd|"
				 "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd|"
				 "say \"hi\"\\\\\\n");
	free(buf);
}

static void prom__glibc_mode__only_known_terms(void **state)
{
	struct figures_process *p = figures();
	struct family_seen fam[128] = { 0 };
	char *doc;

	(void)state;
	p->target.allocator = FIGURES_ALLOC_GLIBC;
	p->stats.known = 1u << 1 | 1u << 2 | 1u << 9;
	p->stats.identity = false;
	doc = render(p);
	check_lines(doc, fam, 128);
	assert_sample(doc, "tally_stats_live_bytes 4096");
	assert_sample(doc, "tally_stats_rounding_bytes 8192");
	assert_sample(doc, "tally_stats_large_objects 3");
	assert_null(strstr(doc, "tally_stats_mapped_bytes"));
	assert_null(strstr(doc, "tally_stats_balanced"));
	assert_null(strstr(doc, "tally_stats_virgin_bytes"));
	free(doc);
	free(p);
}

static void prom__measured_resident__when_known(void **state)
{
	struct figures_process *p = figures();
	char *doc;

	(void)state;
	p->stats.have_resident = true;
	p->stats.resident = 12345;
	p->target.gone = true;
	p->exact = false;
	p->events.lost = 7;
	doc = render(p);
	assert_sample(doc, "tally_stats_measured_resident_bytes 12345");
	assert_sample(doc, "tally_target_running 0");
	assert_sample(doc, "tally_exact 0");
	assert_sample(doc, "tally_events_lost_total 7");
	free(doc);
	free(p);
}

/* A late attach to a GPU process: its GPU figures not exact, and the
 * driver's own device memory (NVML) beside them; neither without a GPU. */
static void prom__gpu_late__not_exact_and_nvml_memory(void **state)
{
	struct figures_process *p = figures();
	char *doc;

	(void)state;
	p->gpu_attached = true;
	p->instance_exact = false;
	p->have_device_memory_used = true;
	p->device_memory_used = 536870912;
	doc = render(p);
	assert_sample(doc, "tally_gpu_exact 0");
	assert_sample(doc, "tally_device_memory_used_bytes 536870912");
	check_lines(doc, (struct family_seen[128]){ 0 }, 128);
	free(doc);
	p->gpu_attached = false;
	doc = render(p);
	assert_null(sample_line(doc, "tally_gpu_exact"));
	assert_null(sample_line(doc, "tally_device_memory_used_bytes"));
	free(doc);
	free(p);
}

static void prom__info__cgroup_and_container_labels(void **state)
{
	struct figures_process *p = figures();
	char *doc;

	(void)state;
	doc = render(p);
	/* outside a container: empty values, which Prometheus reads as no label */
	assert_non_null(strstr(doc, ",cgroup=\"\",container=\"\"} 1\n"));
	free(doc);
	p->target.cgroup = "/system.slice/docker-0123.scope";
	p->target.container = "0123";
	doc = render(p);
	assert_non_null(
		strstr(doc, ",cgroup=\"/system.slice/docker-0123.scope\",container=\"0123\"} 1\n"));
	free(doc);
	free(p);
}

static void prom__write_error__reported(void **state)
{
	struct figures_process *p = figures();
	FILE *f = fopen("/dev/full", "w");

	(void)state;
	if (!f) {
		free(p);
		skip_because("no /dev/full");
	}
	setvbuf(f, NULL, _IONBF, 0); /* every write reaches the device */
	struct figures fig = { .nprocs = 1, .cap = 1, .procs = p };
	assert_int_equal(prom_render(f, &fig), -EIO);
	fclose(f);
	free(p);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(prom__full_figures__every_line_well_formed),
		cmocka_unit_test(prom__stats__every_term_and_the_identity),
		cmocka_unit_test(prom__stats__negative_terms_signed_and_unbalanced),
		cmocka_unit_test(prom__groups__labelled_and_only_those_shown),
		cmocka_unit_test(prom__hostile_names__escaped_label_values),
		cmocka_unit_test(prom__escape__c1_controls_and_help_text),
		cmocka_unit_test(prom__glibc_mode__only_known_terms),
		cmocka_unit_test(prom__measured_resident__when_known),
		cmocka_unit_test(prom__gpu_late__not_exact_and_nvml_memory),
		cmocka_unit_test(prom__info__cgroup_and_container_labels),
		cmocka_unit_test(prom__write_error__reported),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
