// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The heap profile's encoders (user/views/pprof.c, user/views/folded.c): what
 * pprof_encode writes is gunzipped and read back by the small protobuf reader
 * below, and checked field by field against profile.proto; folded_write's
 * lines are compared whole.
 *
 * `test_pprof --write FILE [--folded FILE]` writes the fixture profile for
 * tests/pprof/run.sh, which reads it with the real pprof.
 */
#include <errno.h>
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include "test_skip.h"
#define ZLIB_CONST
#include <zlib.h>

#include "../user/views/pprof.h"

/* The fixture: a server whose request handler allocates through xmalloc
 * (util.c), through an inlined parser, and through a library without symbols. */
static const struct prof_mapping MAPS[] = {
	{ .start = 0x400000,
	  .limit = 0x500000,
	  .offset = 0,
	  .file = "/usr/bin/server",
	  .build_id = "abcdef0123456789",
	  .has_functions = true,
	  .has_filenames = true,
	  .has_lines = true },
	{ .start = 0x7f0000000000,
	  .limit = 0x7f0000100000,
	  .offset = 0x2000,
	  .file = "/usr/lib/libfoo.so.1",
	  .build_id = NULL },
};
static const struct prof_line L_MAIN[] = { { "main", "server.c", 10 } };
static const struct prof_line L_HANDLE[] = { { "handle_request", "server.c", 42 } };
/* parse_header inlined into parse: innermost first */
static const struct prof_line L_PARSE[] = { { "parse_header", "parse.h", 7 },
					    { "parse", "parse.c", 100 } };
static const struct prof_line L_XMALLOC5[] = { { "xmalloc", "util.c", 5 } };
static const struct prof_line L_XMALLOC6[] = { { "xmalloc", "util.c", 6 } };
static const struct prof_line L_XMALLOC_OTHER[] = { { "xmalloc", "other.c", 1 } };
static const struct prof_loc LOCS[] = {
	{ 0x401000, 0, L_MAIN, 1 },	{ 0x402000, 0, L_HANDLE, 1 },
	{ 0x403000, 0, L_PARSE, 2 },	{ 0x404000, 0, L_XMALLOC5, 1 },
	{ 0x404100, 0, L_XMALLOC6, 1 }, { 0x7f0000001234, 1, NULL, 0 },
	{ 0xdead, -1, NULL, 0 },	{ 0x405000, 0, L_XMALLOC_OTHER, 1 },
};
static const size_t S0[] = { 3, 2, 1, 0 }, S1[] = { 4, 1, 0 }, S2[] = { 5, 0 }, S3[] = { 6 },
		    S4[] = { 7, 1, 0 };
static const struct prof_sample SAMPLES[] = {
	{ S0, 4, 100, 6291456, 40, 4194304, "parse", 4242, 60, 5242880, { 0 }, 0, 0 },
	{ S1, 3, 50, 3145728, 25, 1048576, "io", 4242, 30, 2097152, { 0 }, 0, 0 },
	{ S2, 2, 8, 65536, 4, 32768, NULL, 0, 0, 0, { 0 }, 0, 0 },
	{ S3, 1, 2, 4096, 0, 0, NULL, 0, 0, 0, { 0 }, 0, 0 },
	{ S4, 3, 16, 1048576, 16, 1048576, "parse", 7, 0, 0, { 0 }, 0, 0 },
};
#define N(a) (sizeof(a) / sizeof((a)[0]))

static struct prof fixture(void)
{
	return (struct prof){ .maps = MAPS,
			      .nmaps = N(MAPS),
			      .locs = LOCS,
			      .nlocs = N(LOCS),
			      .samples = SAMPLES,
			      .nsamples = N(SAMPLES),
			      .period = 524288,
			      .time_nanos = 1700000000123456789,
			      .duration_nanos = 5000000000,
			      .default_type = "inuse_space" };
}

/* --- allocation failures --------------------------------------------------- */

/* The test links with -Wl,--wrap for these four: the calls from this file and
 * from the encoders' objects come here (not those inside libc or zlib), and
 * the one numbered alloc_fail_at (counting from 0 as it is set) fails. */
static long alloc_fail_at = -1;
void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t size);
void *__real_reallocarray(void *p, size_t n, size_t size);
void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t size);
void *__wrap_reallocarray(void *p, size_t n, size_t size);

static bool alloc_fails(void)
{
	if (alloc_fail_at < 0)
		return false;
	return alloc_fail_at-- == 0;
}

void *__wrap_malloc(size_t size)
{
	return alloc_fails() ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t size)
{
	return alloc_fails() ? NULL : __real_realloc(p, size);
}

void *__wrap_reallocarray(void *p, size_t n, size_t size)
{
	return alloc_fails() ? NULL : __real_reallocarray(p, n, size);
}

/* --- a profile.proto reader ------------------------------------------------ */

struct rd {
	const uint8_t *p, *end;
};

struct field {
	unsigned int num, wire;
	uint64_t v;	/* wire 0 */
	struct rd body; /* wire 2 */
};

struct vt {
	int64_t type, unit;
};
struct label {
	int64_t key, str, num;
};
struct sample {
	uint64_t *locs;
	size_t nlocs;
	uint64_t *values; /* int64, as written */
	size_t nvalues;
	struct label *labels;
	size_t nlabels;
};
struct mapping {
	uint64_t id, start, limit, offset;
	int64_t file, build_id;
	bool has_functions, has_filenames, has_lines, has_inline;
};
struct line {
	uint64_t function_id;
	int64_t line;
};
struct loc {
	uint64_t id, mapping_id, addr;
	struct line *lines;
	size_t nlines;
};
struct func {
	uint64_t id;
	int64_t name, system_name, file, start_line;
};
struct profile {
	struct vt *types;
	size_t ntypes;
	struct sample *samples;
	size_t nsamples;
	struct mapping *maps;
	size_t nmaps;
	struct loc *locs;
	size_t nlocs;
	struct func *funcs;
	size_t nfuncs;
	char **strs;
	size_t nstrs;
	int64_t time_nanos, duration_nanos, period, default_type;
	struct vt period_type;
	size_t nperiod_types;
};

/* a new zeroed element at the end of arr, grown to the next power of two
 * when n is one (geometric: ASan's realloc always copies) */
#define PUSH(arr, n)                                                                               \
	((((n) & ((n)-1)) ? (arr) :                                                                \
			    ((arr) = realloc((arr), ((n) ? 2 * (n) : 1) * sizeof(*(arr))))),       \
	 assert_non_null(arr), memset(&(arr)[(n)], 0, sizeof(*(arr))), &(arr)[(n)++])

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;

	for (unsigned int shift = 0;; shift += 7) {
		uint8_t c;

		assert_true(r->p < r->end);
		assert_true(shift < 64);
		c = *r->p++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
}

static bool rd_field(struct rd *r, struct field *f)
{
	uint64_t key, n;

	if (r->p == r->end)
		return false;
	key = rd_varint(r);
	f->num = (unsigned int)(key >> 3);
	f->wire = key & 7;
	assert_int_not_equal(f->num, 0);
	if (f->wire == 0) {
		f->v = rd_varint(r);
		return true;
	}
	assert_int_equal(f->wire, 2); /* nothing else is written */
	n = rd_varint(r);
	assert_true(n <= (uint64_t)(r->end - r->p));
	f->body = (struct rd){ r->p, r->p + n };
	r->p += n;
	return true;
}

static uint64_t want_varint(const struct field *f)
{
	assert_int_equal(f->wire, 0);
	return f->v;
}

/* a packed repeated field: wire 2, varints to its end */
static void rd_packed(const struct field *f, uint64_t **arr, size_t *n)
{
	struct rd r = f->body;

	assert_int_equal(f->wire, 2);
	while (r.p < r.end)
		*PUSH(*arr, *n) = rd_varint(&r);
}

static void rd_vt(struct rd r, struct vt *vt)
{
	struct field f;

	while (rd_field(&r, &f)) {
		if (f.num == 1)
			vt->type = (int64_t)want_varint(&f);
		else if (f.num == 2)
			vt->unit = (int64_t)want_varint(&f);
		else
			fail_msg("ValueType field %u", f.num);
	}
}

static void rd_label(struct rd r, struct label *l)
{
	struct field f;

	while (rd_field(&r, &f)) {
		assert_true(f.num >= 1 && f.num <= 3);
		int64_t v = (int64_t)want_varint(&f);
		*(f.num == 1 ? &l->key : f.num == 2 ? &l->str : &l->num) = v;
	}
}

static void rd_sample(struct rd r, struct sample *s)
{
	struct field f;

	while (rd_field(&r, &f)) {
		if (f.num == 1)
			rd_packed(&f, &s->locs, &s->nlocs);
		else if (f.num == 2)
			rd_packed(&f, &s->values, &s->nvalues);
		else if (f.num == 3)
			rd_label(f.body, PUSH(s->labels, s->nlabels));
		else
			fail_msg("Sample field %u", f.num);
	}
}

static void rd_mapping(struct rd r, struct mapping *m)
{
	struct field f;

	while (rd_field(&r, &f)) {
		uint64_t v = want_varint(&f);

		switch (f.num) {
		case 1:
			m->id = v;
			break;
		case 2:
			m->start = v;
			break;
		case 3:
			m->limit = v;
			break;
		case 4:
			m->offset = v;
			break;
		case 5:
			m->file = (int64_t)v;
			break;
		case 6:
			m->build_id = (int64_t)v;
			break;
		case 7:
			m->has_functions = v;
			break;
		case 8:
			m->has_filenames = v;
			break;
		case 9:
			m->has_lines = v;
			break;
		case 10:
			m->has_inline = v;
			break;
		default:
			fail_msg("Mapping field %u", f.num);
		}
	}
}

static void rd_loc(struct rd r, struct loc *l)
{
	struct field f, g;

	while (rd_field(&r, &f)) {
		if (f.num == 4) {
			struct line *line = PUSH(l->lines, l->nlines);
			struct rd b = f.body;

			assert_int_equal(f.wire, 2);
			while (rd_field(&b, &g)) {
				assert_true(g.num == 1 || g.num == 2);
				if (g.num == 1)
					line->function_id = want_varint(&g);
				else
					line->line = (int64_t)want_varint(&g);
			}
			continue;
		}
		uint64_t v = want_varint(&f);
		if (f.num == 1)
			l->id = v;
		else if (f.num == 2)
			l->mapping_id = v;
		else if (f.num == 3)
			l->addr = v;
		else
			fail_msg("Location field %u", f.num);
	}
}

static void rd_func(struct rd r, struct func *fn)
{
	struct field f;

	while (rd_field(&r, &f)) {
		uint64_t v = want_varint(&f);

		switch (f.num) {
		case 1:
			fn->id = v;
			break;
		case 2:
			fn->name = (int64_t)v;
			break;
		case 3:
			fn->system_name = (int64_t)v;
			break;
		case 4:
			fn->file = (int64_t)v;
			break;
		case 5:
			fn->start_line = (int64_t)v;
			break;
		default:
			fail_msg("Function field %u", f.num);
		}
	}
}

static void rd_profile(struct rd r, struct profile *d)
{
	struct field f;

	while (rd_field(&r, &f)) {
		switch (f.num) {
		case 1:
			rd_vt(f.body, PUSH(d->types, d->ntypes));
			break;
		case 2:
			rd_sample(f.body, PUSH(d->samples, d->nsamples));
			break;
		case 3:
			rd_mapping(f.body, PUSH(d->maps, d->nmaps));
			break;
		case 4:
			rd_loc(f.body, PUSH(d->locs, d->nlocs));
			break;
		case 5:
			rd_func(f.body, PUSH(d->funcs, d->nfuncs));
			break;
		case 6: {
			size_t n = (size_t)(f.body.end - f.body.p);
			char *s = malloc(n + 1);

			assert_int_equal(f.wire, 2);
			assert_non_null(s);
			memcpy(s, f.body.p, n);
			s[n] = '\0';
			*PUSH(d->strs, d->nstrs) = s;
			break;
		}
		case 9:
			d->time_nanos = (int64_t)want_varint(&f);
			break;
		case 10:
			d->duration_nanos = (int64_t)want_varint(&f);
			break;
		case 11:
			rd_vt(f.body, &d->period_type);
			d->nperiod_types++;
			break;
		case 12:
			d->period = (int64_t)want_varint(&f);
			break;
		case 14:
			d->default_type = (int64_t)want_varint(&f);
			break;
		default:
			fail_msg("Profile field %u", f.num);
		}
	}
}

static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *len)
{
	z_stream zs = { 0 };
	size_t cap = 1 << 16;
	uint8_t *out = malloc(cap);
	int rc;

	assert_non_null(out);
	assert_int_equal(inflateInit2(&zs, 31), Z_OK); /* gzip, and nothing else */
	zs.next_in = in;
	zs.avail_in = (uInt)n;
	*len = 0;
	do {
		if (*len == cap) {
			cap *= 2;
			out = realloc(out, cap);
			assert_non_null(out);
		}
		zs.next_out = out + *len;
		zs.avail_out = (uInt)(cap - *len);
		rc = inflate(&zs, Z_NO_FLUSH);
		*len = cap - zs.avail_out;
		assert_true(rc == Z_OK || rc == Z_STREAM_END);
	} while (rc != Z_STREAM_END);
	assert_int_equal(zs.avail_in, 0); /* one member, nothing after it */
	inflateEnd(&zs);
	return out;
}

/* p, encoded, checked as gzip, and read back. */
static struct profile *decode(const struct prof *p)
{
	struct profile *d = calloc(1, sizeof(*d));
	uint8_t *gz = NULL, *raw;
	size_t gzlen = 0, len;

	assert_non_null(d);
	assert_int_equal(pprof_encode(p, &gz, &gzlen), 0);
	assert_true(gzlen > 18);
	assert_int_equal(gz[0], 0x1f);
	assert_int_equal(gz[1], 0x8b);
	raw = gunzip(gz, gzlen, &len);
	rd_profile((struct rd){ raw, raw + len }, d);
	free(raw);
	free(gz);
	return d;
}

static void profile_free(struct profile *d)
{
	for (size_t i = 0; i < d->nsamples; i++) {
		free(d->samples[i].locs);
		free(d->samples[i].values);
		free(d->samples[i].labels);
	}
	for (size_t i = 0; i < d->nlocs; i++)
		free(d->locs[i].lines);
	for (size_t i = 0; i < d->nstrs; i++)
		free(d->strs[i]);
	free(d->types);
	free(d->samples);
	free(d->maps);
	free(d->locs);
	free(d->funcs);
	free(d->strs);
	free(d);
}

static const char *str(const struct profile *d, int64_t i)
{
	assert_true(i >= 0 && (size_t)i < d->nstrs);
	return d->strs[i];
}

static const struct func *func_by_id(const struct profile *d, uint64_t id)
{
	for (size_t i = 0; i < d->nfuncs; i++)
		if (d->funcs[i].id == id)
			return &d->funcs[i];
	fail_msg("no function %" PRIu64, id);
	return NULL;
}

static int str_cmp(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* string_table[0] is "", and no string is there twice */
static void assert_strings_unique(const struct profile *d)
{
	char **s = malloc(d->nstrs * sizeof(*s));

	assert_true(d->nstrs > 0);
	assert_string_equal(d->strs[0], "");
	assert_non_null(s);
	memcpy(s, d->strs, d->nstrs * sizeof(*s));
	qsort(s, d->nstrs, sizeof(*s), str_cmp);
	for (size_t i = 1; i < d->nstrs; i++)
		if (!strcmp(s[i - 1], s[i]))
			fail_msg("\"%s\" twice in the string table", s[i]);
	free(s);
}

/* the label of s with key, or NULL */
static const struct label *label(const struct profile *d, const struct sample *s, const char *key)
{
	for (size_t i = 0; i < s->nlabels; i++)
		if (!strcmp(str(d, s->labels[i].key), key))
			return &s->labels[i];
	return NULL;
}

/* --- pprof_encode ------------------------------------------------------------ */

static void pprof__header__sample_types_period_and_strings(void **state)
{
	static const char *const want[][2] = {
		{ "alloc_objects", "count" }, { "alloc_space", "bytes" },
		{ "inuse_objects", "count" }, { "inuse_space", "bytes" },
		{ "peak_objects", "count" },  { "peak_space", "bytes" }
	};
	struct prof p = fixture();
	struct profile *d = decode(&p);

	(void)state;
	assert_int_equal(d->ntypes, 6);
	for (size_t i = 0; i < 6; i++) {
		assert_string_equal(str(d, d->types[i].type), want[i][0]);
		assert_string_equal(str(d, d->types[i].unit), want[i][1]);
	}
	assert_int_equal(d->nperiod_types, 1);
	assert_string_equal(str(d, d->period_type.type), "space");
	assert_string_equal(str(d, d->period_type.unit), "bytes");
	assert_int_equal(d->period, 524288);
	assert_int_equal(d->time_nanos, 1700000000123456789);
	assert_int_equal(d->duration_nanos, 5000000000);
	assert_string_equal(str(d, d->default_type), "inuse_space");
	assert_strings_unique(d);
	profile_free(d);

	p.default_type = NULL;
	p.period = 0;
	d = decode(&p);
	assert_int_equal(d->default_type, 0);
	assert_int_equal(d->period, 0);
	profile_free(d);
}

static void pprof__samples__stacks_values_and_labels(void **state)
{
	struct prof p = fixture();
	struct profile *d = decode(&p);

	(void)state;
	assert_int_equal(d->nsamples, N(SAMPLES));
	for (size_t i = 0; i < N(SAMPLES); i++) {
		const struct prof_sample *w = &SAMPLES[i];
		const struct sample *s = &d->samples[i];
		const struct label *g = label(d, s, "group"), *pid = label(d, s, "pid");

		assert_int_equal(s->nlocs, w->nlocs);
		for (size_t j = 0; j < w->nlocs; j++)
			assert_int_equal(s->locs[j], w->locs[j] + 1);
		assert_int_equal(s->nvalues, 6);
		assert_int_equal(s->values[0], w->alloc_objects);
		assert_int_equal(s->values[1], w->alloc_space);
		assert_int_equal(s->values[2], w->inuse_objects);
		assert_int_equal(s->values[3], w->inuse_space);
		assert_int_equal(s->values[4], w->peak_objects);
		assert_int_equal(s->values[5], w->peak_space);
		assert_int_equal(s->nlabels, (w->group != NULL) + (w->pid != 0));
		if (w->group) {
			assert_non_null(g);
			assert_string_equal(str(d, g->str), w->group);
			assert_int_equal(g->num, 0);
		}
		if (w->pid) {
			assert_non_null(pid);
			assert_int_equal(pid->num, w->pid);
			assert_int_equal(pid->str, 0);
		}
	}
	profile_free(d);
}

static void pprof__negative_values__int64_twos_complement(void **state)
{
	struct prof_sample s = { S3, 1, -1, INT64_MIN, -3, INT64_MAX, NULL, -5, 0, 0, { 0 }, 0, 0 };
	struct prof p = fixture();
	struct profile *d;

	(void)state;
	p.samples = &s;
	p.nsamples = 1;
	d = decode(&p);
	assert_true((int64_t)d->samples[0].values[0] == -1);
	assert_true((int64_t)d->samples[0].values[1] == INT64_MIN);
	assert_true((int64_t)d->samples[0].values[2] == -3);
	assert_true((int64_t)d->samples[0].values[3] == INT64_MAX);
	assert_int_equal(label(d, &d->samples[0], "pid")->num, -5);
	profile_free(d);
}

static void pprof__locations__lines_functions_and_mappings(void **state)
{
	struct prof p = fixture();
	struct profile *d = decode(&p);

	(void)state;
	assert_int_equal(d->nlocs, N(LOCS));
	for (size_t i = 0; i < N(LOCS); i++) {
		const struct prof_loc *w = &LOCS[i];
		const struct loc *l = &d->locs[i];

		assert_int_equal(l->id, i + 1);
		assert_int_equal(l->addr, w->addr);
		assert_int_equal(l->mapping_id, (uint64_t)(w->mapping + 1));
		assert_int_equal(l->nlines, w->nlines);
		for (size_t j = 0; j < w->nlines; j++) {
			const struct func *fn = func_by_id(d, l->lines[j].function_id);

			assert_string_equal(str(d, fn->name), w->lines[j].function);
			assert_string_equal(str(d, fn->system_name), w->lines[j].function);
			assert_string_equal(str(d, fn->file), w->lines[j].file);
			assert_int_equal(l->lines[j].line, w->lines[j].line);
		}
	}
	/* the inlined parse_header first, as given */
	assert_string_equal(str(d, func_by_id(d, d->locs[2].lines[0].function_id)->name),
			    "parse_header");
	/* no lines: the address in libfoo, and one in no mapping at all */
	assert_int_equal(d->locs[5].nlines, 0);
	assert_int_equal(d->locs[5].mapping_id, 2);
	assert_int_equal(d->locs[6].nlines, 0);
	assert_int_equal(d->locs[6].mapping_id, 0);
	profile_free(d);
}

static void pprof__mappings__fields_and_build_id(void **state)
{
	struct prof p = fixture();
	struct profile *d = decode(&p);
	const struct mapping *m = d->maps;

	(void)state;
	assert_int_equal(d->nmaps, 2);
	assert_int_equal(m[0].id, 1);
	assert_int_equal(m[0].start, 0x400000);
	assert_int_equal(m[0].limit, 0x500000);
	assert_int_equal(m[0].offset, 0);
	assert_string_equal(str(d, m[0].file), "/usr/bin/server");
	assert_string_equal(str(d, m[0].build_id), "abcdef0123456789");
	assert_true(m[0].has_functions && m[0].has_filenames && m[0].has_lines);
	assert_false(m[0].has_inline);
	assert_int_equal(m[1].id, 2);
	assert_int_equal(m[1].start, 0x7f0000000000);
	assert_int_equal(m[1].limit, 0x7f0000100000);
	assert_int_equal(m[1].offset, 0x2000);
	assert_string_equal(str(d, m[1].file), "/usr/lib/libfoo.so.1");
	assert_string_equal(str(d, m[1].build_id), "");
	assert_false(m[1].has_functions || m[1].has_filenames || m[1].has_lines || m[1].has_inline);
	profile_free(d);
}

static void pprof__functions__one_per_name_and_file(void **state)
{
	struct prof p = fixture();
	struct profile *d = decode(&p);

	(void)state;
	/* main, handle_request, parse_header, parse, xmalloc in util.c and in other.c */
	assert_int_equal(d->nfuncs, 6);
	for (size_t i = 0; i < d->nfuncs; i++)
		assert_int_equal(d->funcs[i].id, i + 1);
	/* xmalloc at util.c:5 and util.c:6: one function; in other.c: another */
	assert_int_equal(d->locs[3].lines[0].function_id, d->locs[4].lines[0].function_id);
	assert_int_not_equal(d->locs[3].lines[0].function_id, d->locs[7].lines[0].function_id);
	assert_int_equal(d->locs[3].lines[0].line, 5);
	assert_int_equal(d->locs[4].lines[0].line, 6);
	profile_free(d);
}

/* A line of unknown function is left out, and a file not known is "". */
static void pprof__unknown_function_or_file__left_out(void **state)
{
	static const struct prof_line lines[] = { { NULL, "x.c", 3 },
						  { "f", NULL, 0 },
						  { "", "", 1 } };
	struct prof_loc loc = { 0x10, -1, lines, 3 };
	size_t idx = 0;
	struct prof_sample s = { &idx, 1, 1, 1, 1, 1, NULL, 0, 0, 0, { 0 }, 0, 0 };
	struct prof p = { .locs = &loc, .nlocs = 1, .samples = &s, .nsamples = 1 };
	struct profile *d = decode(&p);

	(void)state;
	assert_int_equal(d->nmaps, 0);
	assert_int_equal(d->locs[0].nlines, 1);
	assert_int_equal(d->locs[0].lines[0].line, 0);
	assert_int_equal(d->nfuncs, 1);
	assert_string_equal(str(d, d->funcs[0].name), "f");
	assert_int_equal(d->funcs[0].file, 0);
	profile_free(d);
}

static void pprof__empty_profile__header_only(void **state)
{
	struct prof p = { 0 };
	struct profile *d = decode(&p);

	(void)state;
	assert_int_equal(d->ntypes, 6);
	assert_int_equal(d->nsamples + d->nlocs + d->nmaps + d->nfuncs, 0);
	assert_strings_unique(d);
	profile_free(d);
}

/* A profile of nlocs locations, each of one line in one of nfuncs functions
 * (nfuncs even), in a.c or b.c; stacks of DEPTH locations, in the reverse
 * order of the locations. */
enum { DEPTH = 8 };
struct many {
	struct prof_line *lines;
	struct prof_loc *locs;
	struct prof_sample *samples;
	size_t *stack;
	char (*names)[16];
	struct prof p;
};

static void many_make(struct many *m, size_t nlocs, size_t nfuncs)
{
	m->lines = calloc(nlocs, sizeof(*m->lines));
	m->locs = calloc(nlocs, sizeof(*m->locs));
	m->samples = calloc(nlocs / DEPTH, sizeof(*m->samples));
	m->stack = calloc(nlocs, sizeof(*m->stack));
	m->names = calloc(nfuncs, sizeof(*m->names));
	assert_true(m->lines && m->locs && m->samples && m->stack && m->names);
	for (size_t i = 0; i < nfuncs; i++)
		snprintf(m->names[i], sizeof(m->names[i]), "fn_%zu", i);
	for (size_t i = 0; i < nlocs; i++) {
		m->lines[i] = (struct prof_line){ m->names[i % nfuncs], i % 2 ? "a.c" : "b.c",
						  (int64_t)i };
		m->locs[i] = (struct prof_loc){ 0x1000 + i, -1, &m->lines[i], 1 };
		m->stack[i] = nlocs - 1 - i;
	}
	for (size_t i = 0; i < nlocs / DEPTH; i++)
		m->samples[i] = (struct prof_sample){ &m->stack[i * DEPTH],
						      DEPTH,
						      1,
						      2,
						      3,
						      (int64_t)i + 1,
						      NULL,
						      0,
						      0,
						      0,
						      { 0 },
						      0,
						      0 };
	m->p = (struct prof){
		.locs = m->locs, .nlocs = nlocs, .samples = m->samples, .nsamples = nlocs / DEPTH
	};
}

static void many_free(struct many *m)
{
	free(m->names);
	free(m->stack);
	free(m->samples);
	free(m->locs);
	free(m->lines);
}

/* Tens of thousands of locations: ids, function and string dedup at scale. */
static void pprof__many_locations__deduplicated(void **state)
{
	enum { NLOCS = 40000, NFUNCS = 3000 };
	struct many m;
	struct profile *d;

	(void)state;
	many_make(&m, NLOCS, NFUNCS);
	d = decode(&m.p);
	assert_int_equal(d->nlocs, NLOCS);
	/* name i % 3000 and file i % 2: 3000 is even, so 3000 pairs */
	assert_int_equal(d->nfuncs, NFUNCS);
	/* "", the types, their units, "space", the names, the files */
	assert_int_equal(d->nstrs, 1 + 6 + 2 + 1 + NFUNCS + 2);
	assert_strings_unique(d);
	for (size_t i = 0; i < NLOCS; i += 997) {
		const struct func *fn = func_by_id(d, d->locs[i].lines[0].function_id);

		assert_int_equal(d->locs[i].id, i + 1);
		assert_string_equal(str(d, fn->name), m.names[i % NFUNCS]);
		assert_string_equal(str(d, fn->file), i % 2 ? "a.c" : "b.c");
	}
	assert_int_equal(d->samples[NLOCS / DEPTH - 1].locs[DEPTH - 1], 1);
	profile_free(d);
	many_free(&m);
}

/* Every allocation of the encoders failed in turn (the tables, the arrays and
 * the buffer grown several times over): -ENOMEM each time, and LeakSanitizer
 * at exit finds nothing left. */
static void pprof__out_of_memory__enomem_nothing_leaked(void **state)
{
	struct many m;
	uint8_t *out;
	size_t len;
	int err = -ENOMEM;
	long n;

	(void)state;
	many_make(&m, 4000, 1000);
	for (n = 0; err == -ENOMEM; n++) {
		out = NULL;
		alloc_fail_at = n;
		err = pprof_encode(&m.p, &out, &len);
		alloc_fail_at = -1;
		assert_true(err == 0 || (err == -ENOMEM && !out));
		assert_true(n < 10000);
	}
	free(out);
	assert_true(n > 12); /* the growth paths taken: 17 allocations in all */
	for (err = -ENOMEM, n = 0; err == -ENOMEM; n++) {
		char *buf = NULL;
		FILE *f = open_memstream(&buf, &len);

		assert_non_null(f);
		alloc_fail_at = n;
		err = folded_write(f, &m.p, FOLDED_INUSE, NULL);
		alloc_fail_at = -1;
		assert_true(err == 0 || err == -ENOMEM);
		assert_int_equal(fclose(f), 0);
		assert_true(err || len > 0);
		free(buf);
	}
	many_free(&m);
}

static void pprof__index_out_of_range__einval(void **state)
{
	struct prof_loc bad_map[N(LOCS)], neg_map[N(LOCS)], no_lines[N(LOCS)];
	size_t bad_idx[] = { 3, N(LOCS) };
	struct prof_sample bad_sample[N(SAMPLES)];
	struct prof p = fixture(), q;
	uint8_t *out = NULL;
	size_t len = 0;

	(void)state;
	memcpy(bad_map, LOCS, sizeof(LOCS));
	memcpy(neg_map, LOCS, sizeof(LOCS));
	memcpy(no_lines, LOCS, sizeof(LOCS));
	memcpy(bad_sample, SAMPLES, sizeof(SAMPLES));
	bad_map[2].mapping = (int)N(MAPS);
	neg_map[2].mapping = -2;
	no_lines[2].lines = NULL;
	bad_sample[1].locs = bad_idx;
	bad_sample[1].nlocs = 2;
	q = p, q.locs = bad_map;
	assert_int_equal(pprof_encode(&q, &out, &len), -EINVAL);
	assert_int_equal(folded_write(stdout, &q, FOLDED_INUSE, NULL), -EINVAL);
	q = p, q.locs = neg_map;
	assert_int_equal(pprof_encode(&q, &out, &len), -EINVAL);
	assert_int_equal(folded_write(stdout, &q, FOLDED_INUSE, NULL), -EINVAL);
	q = p, q.locs = no_lines;
	assert_int_equal(pprof_encode(&q, &out, &len), -EINVAL);
	q = p, q.samples = bad_sample;
	assert_int_equal(pprof_encode(&q, &out, &len), -EINVAL);
	assert_int_equal(folded_write(stdout, &q, FOLDED_INUSE, NULL), -EINVAL);
	q = p, q.nmaps = 0, q.maps = NULL;
	assert_int_equal(pprof_encode(&q, &out, &len), -EINVAL);
	assert_int_equal(pprof_encode(NULL, &out, &len), -EINVAL);
	assert_int_equal(pprof_encode(&p, NULL, &len), -EINVAL);
	assert_int_equal(pprof_write(NULL, &p), -EINVAL);
	assert_int_equal(folded_write(stdout, NULL, FOLDED_INUSE, NULL), -EINVAL);
	assert_null(out);
}

static void pprof__write__the_encoded_bytes_or_the_error(void **state)
{
	struct prof p = fixture();
	uint8_t *want = NULL;
	size_t wlen = 0, len = 0;
	char *got = NULL;
	FILE *f = open_memstream(&got, &len);

	(void)state;
	assert_non_null(f);
	assert_int_equal(pprof_write(f, &p), 0);
	assert_int_equal(fclose(f), 0);
	assert_int_equal(pprof_encode(&p, &want, &wlen), 0);
	assert_int_equal(len, wlen);
	assert_memory_equal(got, want, len);
	free(got);
	free(want);

	f = fopen("/dev/full", "w");
	if (!f)
		skip_because("no /dev/full");
	assert_int_equal(pprof_write(f, &p), -ENOSPC);
	fclose(f);
	f = fopen("/dev/full", "w");
	assert_non_null(f);
	assert_int_equal(folded_write(f, &p, FOLDED_INUSE, NULL), -ENOSPC);
	fclose(f);
}

/* --- folded_write ------------------------------------------------------------ */

static char *folded_as(const struct prof *p, enum folded_value value, size_t *lines)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	assert_int_equal(folded_write(f, p, value, lines), 0);
	assert_int_equal(fclose(f), 0);
	return buf;
}

static char *folded(const struct prof *p)
{
	return folded_as(p, FOLDED_INUSE, NULL);
}

/* --value alloc: the bytes allocated, the site with nothing in use too; the
 * lines written are counted, none for a profile that holds nothing in use
 * (tally profile says so), and a value of neither kind is refused. */
static void folded__value__alloc_inuse_and_the_lines_written(void **state)
{
	struct prof p = fixture();
	struct prof_sample freed[N(SAMPLES)];
	size_t lines = 99;
	char *got = folded_as(&p, FOLDED_ALLOC, &lines);

	(void)state;
	assert_string_equal(got, "0xdead 4096\n"
				 "main;handle_request;parse;parse_header;xmalloc 6291456\n"
				 "main;handle_request;xmalloc 4194304\n"
				 "main;libfoo.so.1+0x3234 65536\n");
	assert_int_equal(lines, 4);
	free(got);
	got = folded_as(&p, FOLDED_INUSE, &lines);
	assert_int_equal(lines, 3);
	free(got);
	memcpy(freed, SAMPLES, sizeof(freed));
	for (size_t i = 0; i < N(freed); i++)
		freed[i].inuse_space = freed[i].inuse_objects = 0;
	p.samples = freed;
	got = folded_as(&p, FOLDED_INUSE, &lines);
	assert_string_equal(got, "");
	assert_int_equal(lines, 0);
	free(got);
	got = folded_as(&p, FOLDED_ALLOC, &lines);
	assert_int_equal(lines, 4);
	free(got);
	assert_int_equal(folded_write(stdout, &p, (enum folded_value)7, &lines), -EINVAL);
	assert_int_equal(lines, 0);
}

/* The fixture: sorted lines; inlined frames outermost first; the frame of
 * an unknown function its module and offset, or its address; no line for
 * the site with nothing in use. */
static void folded__fixture__sorted_inlined_and_unknown_frames(void **state)
{
	struct prof p = fixture();
	char *got = folded(&p);

	(void)state;
	assert_string_equal(got, "main;handle_request;parse;parse_header;xmalloc 4194304\n"
				 "main;handle_request;xmalloc 2097152\n"
				 "main;libfoo.so.1+0x3234 32768\n");
	free(got);
}

/* Equal stacks summed, and those whose sum is not positive left out. */
static void folded__equal_stacks__merged(void **state)
{
	size_t a[] = { 3, 1, 0 }, b[] = { 4, 1, 0 }, c[] = { 6 };
	struct prof_sample s[] = {
		{ a, 3, 0, 0, 0, 100, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ c, 1, 0, 0, 0, 7, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ b, 3, 0, 0, 0, 23, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ a, 3, 0, 0, 0, 0, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ c, 1, 0, 0, 0, -7, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ NULL, 0, 0, 0, 0, 5, NULL, 0, 0, 0, { 0 }, 0, 0 },
		{ S2, 2, 0, 0, 0, -1, NULL, 0, 0, 0, { 0 }, 0, 0 },
	};
	struct prof p = fixture();
	char *got;

	(void)state;
	p.samples = s;
	p.nsamples = N(s);
	got = folded(&p);
	assert_string_equal(got, "[unknown] 5\nmain;handle_request;xmalloc 123\n");
	free(got);
}

/* Separators, spaces, newlines and controls in names and module files. */
static void folded__hostile_names__escaped(void **state)
{
	static const struct prof_line l[] = {
		{ "a;b c", NULL, 0 },
		{ "operator new(unsigned long)", NULL, 0 },
		{ "x\ny\tz\x1b[31m\x7f", NULL, 0 },
		{ "c1\xc2\x9b"
		  "caf\xc3\xa9",
		  NULL, 0 },
	};
	static const struct prof_mapping m = { .start = 0x1000,
					       .file = "/opt/my lib;v2/libx;1.so" };
	struct prof_loc locs[] = {
		{ 0x10, -1, l, 2 },
		{ 0x20, -1, &l[2], 2 },
		{ 0x1100, 0, NULL, 0 },
		{ 0x2000, 0, NULL, 0 },
	};
	size_t st[] = { 3, 2, 1, 0 };
	struct prof_sample s = { st, 4, 0, 0, 0, 1, NULL, 0, 0, 0, { 0 }, 0, 0 };
	struct prof p = {
		.maps = &m, .nmaps = 1, .locs = locs, .nlocs = 4, .samples = &s, .nsamples = 1
	};
	char *got = folded(&p);

	(void)state;
	assert_string_equal(got, "operator new(unsigned long);a:b c;c1_caf\xc3\xa9;x_y_z_[31m_;"
				 "libx:1.so+0x100;libx:1.so+0x1000 1\n");
	free(got);
}

/* Mappings without a file name: the address. */
static void folded__unknown_without_module__address(void **state)
{
	static const struct prof_mapping m[] = { { .start = 0x1000 }, { .start = 0, .file = "" } };
	struct prof_loc locs[] = { { 0x1234, 0, NULL, 0 }, { 0xabc, 1, NULL, 0 } };
	size_t st[] = { 0, 1 };
	struct prof_sample s = { st, 2, 0, 0, 0, 9, NULL, 0, 0, 0, { 0 }, 0, 0 };
	struct prof p = {
		.maps = m, .nmaps = 2, .locs = locs, .nlocs = 2, .samples = &s, .nsamples = 1
	};
	char *got = folded(&p);

	(void)state;
	assert_string_equal(got, "0xabc;0x1234 9\n");
	free(got);
}

/* --write FILE [--folded FILE]: the fixture, for tests/pprof/run.sh. */
static int write_fixture(int argc, char **argv)
{
	struct prof p = fixture();
	FILE *f;
	int err;

	for (int i = 1; i + 1 < argc; i += 2) {
		f = fopen(argv[i + 1], "w");
		if (!f) {
			perror(argv[i + 1]);
			return 1;
		}
		err = !strcmp(argv[i], "--folded") ? folded_write(f, &p, FOLDED_INUSE, NULL) :
						     pprof_write(f, &p);
		if (fclose(f) || err) {
			fprintf(stderr, "%s: %s\n", argv[i + 1], strerror(err ? -err : errno));
			return 1;
		}
	}
	return 0;
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pprof__header__sample_types_period_and_strings),
		cmocka_unit_test(pprof__samples__stacks_values_and_labels),
		cmocka_unit_test(pprof__negative_values__int64_twos_complement),
		cmocka_unit_test(pprof__locations__lines_functions_and_mappings),
		cmocka_unit_test(pprof__mappings__fields_and_build_id),
		cmocka_unit_test(pprof__functions__one_per_name_and_file),
		cmocka_unit_test(pprof__unknown_function_or_file__left_out),
		cmocka_unit_test(pprof__empty_profile__header_only),
		cmocka_unit_test(pprof__many_locations__deduplicated),
		cmocka_unit_test(pprof__out_of_memory__enomem_nothing_leaked),
		cmocka_unit_test(pprof__index_out_of_range__einval),
		cmocka_unit_test(pprof__write__the_encoded_bytes_or_the_error),
		cmocka_unit_test(folded__fixture__sorted_inlined_and_unknown_frames),
		cmocka_unit_test(folded__equal_stacks__merged),
		cmocka_unit_test(folded__value__alloc_inuse_and_the_lines_written),
		cmocka_unit_test(folded__hostile_names__escaped),
		cmocka_unit_test(folded__unknown_without_module__address),
	};

	if (argc > 1 && !strcmp(argv[1], "--write"))
		return write_fixture(argc, argv);
	return cmocka_run_group_tests(tests, NULL, NULL);
}
