// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON reader for untrusted input (user/util/json_read.c) at its edges:
 * nesting at and past its bound, integers at the ends of their exact range
 * and past them, doubles past theirs, every escape and the bad ones,
 * surrogates, invalid UTF-8, raw controls and NUL, truncated text at every
 * length, and what RFC 8259 refuses that a lenient reader takes.
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

#include "../user/util/json_read.h"

static int parse(const char *s, struct jread_doc *doc)
{
	return jread_parse(s, strlen(s), doc, NULL);
}

static int parse_err(const char *s)
{
	struct jread_doc doc;
	int err = parse(s, &doc);

	jread_free(&doc);
	return err;
}

static void parse__a_snapshot_shaped_document(void **state)
{
	static const char text[] =
		" {\"target\": {\"pid\": 12, \"comm\": \"w\\u00e9\"}, \"exact\": true,\n"
		"  \"groups\": [{\"name\": \"grow\", \"live_bytes\": 1048576, \"x\": null},\n"
		"              {\"name\": \"g2\", \"cpu_ns\": 1.5e3}], \"empty\": {}, \"none\": []}\r\n";
	struct jread_doc doc;
	const struct jread_value *groups, *g;
	int64_t i;
	double d;

	(void)state;
	assert_int_equal(parse(text, &doc), 0);
	assert_true(jread_i64(jread_get(jread_get(&doc.root, "target"), "pid"), &i));
	assert_int_equal(i, 12);
	assert_string_equal(jread_str(jread_get(jread_get(&doc.root, "target"), "comm")),
			    "w\xc3\xa9");
	assert_true(jread_get(&doc.root, "exact")->b);
	groups = jread_array(jread_get(&doc.root, "groups"));
	assert_non_null(groups);
	assert_int_equal(groups->arr.n, 2);
	g = &groups->arr.v[0];
	assert_string_equal(jread_str(jread_get(g, "name")), "grow");
	assert_true(jread_i64(jread_get(g, "live_bytes"), &i));
	assert_int_equal(i, 1048576);
	assert_int_equal(jread_get(g, "x")->type, JREAD_NULL);
	assert_null(jread_get(g, "absent"));
	assert_false(jread_i64(jread_get(&groups->arr.v[1], "cpu_ns"), &i));
	assert_true(jread_number(jread_get(&groups->arr.v[1], "cpu_ns"), &d));
	assert_true(d == 1500.0);
	assert_int_equal(jread_get(&doc.root, "empty")->obj.n, 0);
	assert_int_equal(jread_get(&doc.root, "none")->arr.n, 0);
	/* not an object: no member */
	assert_null(jread_get(groups, "name"));
	jread_free(&doc);
	jread_free(&doc); /* empty after: a second free does nothing */
	jread_free(NULL);
}

static void parse__nesting_to_its_bound_and_one_past(void **state)
{
	char buf[2 * JREAD_MAX_DEPTH + 8];
	struct jread_doc doc;
	size_t at = 0;

	(void)state;
	memset(buf, '[', JREAD_MAX_DEPTH);
	memset(buf + JREAD_MAX_DEPTH, ']', JREAD_MAX_DEPTH);
	buf[2 * JREAD_MAX_DEPTH] = '\0';
	assert_int_equal(parse(buf, &doc), 0);
	jread_free(&doc);
	memset(buf, '[', JREAD_MAX_DEPTH + 1);
	memset(buf + JREAD_MAX_DEPTH + 1, ']', JREAD_MAX_DEPTH + 1);
	buf[2 * JREAD_MAX_DEPTH + 2] = '\0';
	assert_int_equal(jread_parse(buf, strlen(buf), &doc, &at), -E2BIG);
	assert_int_equal(at, JREAD_MAX_DEPTH);
	/* objects count as arrays do; a million brackets never recurse past it */
	size_t n = 1000000;
	char *deep = malloc(n);
	assert_non_null(deep);
	for (size_t i = 0; i < n; i++)
		deep[i] = i % 2 ? '[' : '{';
	assert_int_equal(jread_parse(deep, n, &doc, NULL), -EINVAL); /* {[ is not a key */
	memset(deep, '[', n);
	assert_int_equal(jread_parse(deep, n, &doc, NULL), -E2BIG);
	free(deep);
}

static void parse__integers_exact_to_their_ends(void **state)
{
	struct jread_doc doc;
	int64_t i;
	uint64_t u;
	double d;

	(void)state;
	assert_int_equal(parse("9223372036854775807", &doc), 0);
	assert_int_equal(doc.root.type, JREAD_INT);
	assert_true(doc.root.i == INT64_MAX);
	jread_free(&doc);
	assert_int_equal(parse("-9223372036854775808", &doc), 0);
	assert_int_equal(doc.root.type, JREAD_INT);
	assert_true(doc.root.i == INT64_MIN);
	assert_false(jread_u64(&doc.root, &u));
	jread_free(&doc);
	/* 2^63 and 2^64 - 1: exact, unsigned */
	assert_int_equal(parse("9223372036854775808", &doc), 0);
	assert_int_equal(doc.root.type, JREAD_UINT);
	assert_false(jread_i64(&doc.root, &i));
	assert_true(jread_u64(&doc.root, &u) && u == 1ULL << 63);
	jread_free(&doc);
	assert_int_equal(parse("18446744073709551615", &doc), 0);
	assert_true(jread_u64(&doc.root, &u) && u == UINT64_MAX);
	jread_free(&doc);
	/* past them: a double, inexact but in range */
	assert_int_equal(parse("18446744073709551616", &doc), 0);
	assert_int_equal(doc.root.type, JREAD_DOUBLE);
	assert_true(jread_number(&doc.root, &d) && d == 18446744073709551616.0);
	jread_free(&doc);
	assert_int_equal(parse("-9223372036854775809", &doc), 0);
	assert_int_equal(doc.root.type, JREAD_DOUBLE);
	jread_free(&doc);
	assert_int_equal(parse("-0", &doc), 0);
	assert_true(jread_i64(&doc.root, &i) && i == 0);
	jread_free(&doc);
}

static void parse__doubles_and_their_range(void **state)
{
	struct jread_doc doc;

	(void)state;
	assert_int_equal(parse("[0.5, -1e-3, 1E+2, 2.5e308, 1e-400]", &doc), -ERANGE);
	assert_int_equal(parse("[0.5, -1e-3, 1E+2, 1.7976931348623157e308, 1e-400]", &doc), 0);
	assert_true(doc.root.arr.v[0].d == 0.5);
	assert_true(doc.root.arr.v[1].d == -1e-3);
	assert_true(doc.root.arr.v[2].d == 100.0);
	assert_true(doc.root.arr.v[4].d == 0.0); /* underflow: 0, not an error */
	jread_free(&doc);
	/* a 300-digit integer is a double of its value, 400 digits are past its
	 * range; past the length bound, refused */
	char big[JREAD_MAX_NUMBER + 2];
	memset(big, '9', 300);
	big[300] = '\0';
	assert_int_equal(parse(big, &doc), 0);
	assert_true(doc.root.type == JREAD_DOUBLE && doc.root.d == 1e300);
	jread_free(&doc);
	memset(big, '9', 400);
	big[400] = '\0';
	assert_int_equal(parse_err(big), -ERANGE);
	memset(big, '1', JREAD_MAX_NUMBER + 1);
	big[JREAD_MAX_NUMBER + 1] = '\0';
	assert_int_equal(parse_err(big), -E2BIG);
	assert_int_equal(parse_err("1e999"), -ERANGE);
	assert_int_equal(parse_err("-1e999"), -ERANGE);
	static const char *const bad[] = { "01",	"-",	 "+1",	 ".5",	"1.",
					   "1e",	"1e+",	 "0x10", "NaN", "Infinity",
					   "-Infinity", "1.5.2", "--1" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse_err(bad[i]) != -EINVAL)
			fail_msg("'%s' taken", bad[i]);
}

static void parse__escapes_and_surrogates(void **state)
{
	struct jread_doc doc;

	(void)state;
	assert_int_equal(
		parse("\"\\\"\\\\\\/\\b\\f\\n\\r\\t\\u0041\\u00e9\\u20ac\\ud83d\\ude00\"", &doc),
		0);
	assert_int_equal(doc.root.str.len, 8 + 1 + 2 + 3 + 4);
	assert_memory_equal(doc.root.str.s, "\"\\/\b\f\n\r\tA\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
			    19);
	jread_free(&doc);
	/* \u0000: a NUL inside the string, its length kept; jread_str refuses it */
	assert_int_equal(parse("\"a\\u0000b\"", &doc), 0);
	assert_int_equal(doc.root.str.len, 3);
	assert_memory_equal(doc.root.str.s, "a\0b", 4);
	assert_null(jread_str(&doc.root));
	jread_free(&doc);
	/* a key with a NUL never matches a C string */
	assert_int_equal(parse("{\"a\\u0000\": 1}", &doc), 0);
	assert_null(jread_get(&doc.root, "a"));
	jread_free(&doc);
	static const char *const bad[] = {
		"\"\\x41\"",
		"\"\\u12\"",
		"\"\\u12g4\"",
		"\"\\ud800\"",
		"\"\\udc00\"",
		"\"\\ud800\\u0041\"",
		"\"\\ude00\\ud83d\"",
		"\"\\ud800\\\"",
		"\"\\'\"",
		"\"\\",
		"\"\\u",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		int err = parse_err(bad[i]);
		if (err != -EILSEQ && err != -EINVAL)
			fail_msg("'%s' gave %d", bad[i], err);
	}
	assert_int_equal(parse_err("\"\\ud800\""), -EILSEQ);
	assert_int_equal(parse_err("\"\\q\""), -EILSEQ);
}

static void parse__invalid_utf8_controls_and_nul(void **state)
{
	struct jread_doc doc;
	size_t at;

	(void)state;
	assert_int_equal(parse_err("\"\xc0\x80\""), -EILSEQ);	      /* overlong NUL */
	assert_int_equal(parse_err("\"\xed\xa0\x80\""), -EILSEQ);     /* a surrogate */
	assert_int_equal(parse_err("\"\xf4\x90\x80\x80\""), -EILSEQ); /* past U+10FFFF */
	assert_int_equal(parse_err("\"\xe2\x82\""), -EILSEQ);	      /* cut before the quote */
	assert_int_equal(parse_err("\"\xff\""), -EILSEQ);
	assert_int_equal(parse_err("\"a\tb\""), -EINVAL); /* a raw control */
	assert_int_equal(parse_err("\"a\x1b[2Jb\""), -EINVAL);
	assert_int_equal(parse("\"\x7f\"", &doc), 0); /* DEL is allowed */
	jread_free(&doc);
	/* a NUL byte: inside a string, outside one, after the value */
	assert_int_equal(jread_parse("\"a\0b\"", 5, &doc, &at), -EINVAL);
	assert_int_equal(at, 2);
	assert_int_equal(jread_parse("[1,\0]", 5, &doc, &at), -EINVAL);
	assert_int_equal(at, 3);
	assert_int_equal(jread_parse("{}\0", 3, &doc, &at), -EINVAL);
	assert_int_equal(at, 2);
	/* a buffer not NUL-terminated is read to its length only */
	assert_int_equal(jread_parse("123456", 3, &doc, NULL), 0);
	assert_true(doc.root.i == 123);
	jread_free(&doc);
}

/* Every prefix of a valid document, but the whole, is refused (no prefix of
 * this one is itself a document), and nothing is read past the cut:
 * the copy is malloc'd to its length, so ASan sees a read past it. */
static void parse__truncated_at_every_length(void **state)
{
	static const char text[] = "{\"a\": [1, -2.5e3, true, false, null, \"x\\u00e9\\n\"],"
				   " \"b\": {\"c\": 18446744073709551615}}";
	size_t n = strlen(text);
	struct jread_doc doc;

	(void)state;
	for (size_t len = 0; len <= n; len++) {
		char *copy = malloc(len ? len : 1);
		int err;

		assert_non_null(copy);
		memcpy(copy, text, len);
		err = jread_parse(copy, len, &doc, NULL);
		if (len == n)
			assert_int_equal(err, 0);
		else if (err != -EINVAL && err != -EILSEQ)
			fail_msg("cut at %zu: %d", len, err);
		jread_free(&doc);
		free(copy);
	}
}

static void parse__what_rfc_8259_refuses(void **state)
{
	static const char *const bad[] = {
		"",	 "   ",	    "[1,]",	 "[,1]",	   "{\"a\":1,}",
		"{a:1}", "{'a':1}", "{\"a\" 1}", "{\"a\":}",	   "[1 2]",
		"{} {}", "tru",	    "nulls",	 "TRUE",	   "// c\n1",
		"[1]x",	 "\"abc",   "{\"a\":1",	 "\xef\xbb\xbf{}", /* a byte order mark */
	};
	struct jread_doc doc;

	(void)state;
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse_err(bad[i]) != -EINVAL)
			fail_msg("'%s' taken", bad[i]);
	/* a scalar at the top level is a document (RFC 8259), as are duplicates */
	assert_int_equal(parse(" \"s\" ", &doc), 0);
	jread_free(&doc);
	assert_int_equal(parse("{\"a\":1,\"a\":2}", &doc), 0);
	int64_t i;
	assert_true(jread_i64(jread_get(&doc.root, "a"), &i) && i == 1); /* the first */
	jread_free(&doc);
	assert_int_equal(jread_parse("1", (size_t)JREAD_MAX_BYTES + 1, &doc, NULL), -E2BIG);
}

/* A wide document: many members and elements, arena chunks past the first. */
static void parse__a_wide_document(void **state)
{
	size_t n = 200000, len = 0;
	char *buf = malloc(n * 16 + 16);
	struct jread_doc doc;
	int64_t v;

	(void)state;
	assert_non_null(buf);
	buf[len++] = '[';
	for (size_t i = 0; i < n; i++)
		len += (size_t)sprintf(buf + len, "%s{\"k%zu\":%zu}", i ? "," : "", i % 10, i);
	buf[len++] = ']';
	assert_int_equal(jread_parse(buf, len, &doc, NULL), 0);
	assert_int_equal(doc.root.arr.n, n);
	assert_true(jread_i64(jread_get(&doc.root.arr.v[n - 1], "k9"), &v) && v == (int64_t)n - 1);
	jread_free(&doc);
	free(buf);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(parse__a_snapshot_shaped_document),
		cmocka_unit_test(parse__nesting_to_its_bound_and_one_past),
		cmocka_unit_test(parse__integers_exact_to_their_ends),
		cmocka_unit_test(parse__doubles_and_their_range),
		cmocka_unit_test(parse__escapes_and_surrogates),
		cmocka_unit_test(parse__invalid_utf8_controls_and_nul),
		cmocka_unit_test(parse__truncated_at_every_length),
		cmocka_unit_test(parse__what_rfc_8259_refuses),
		cmocka_unit_test(parse__a_wide_document),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
