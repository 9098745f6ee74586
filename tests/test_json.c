// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON writer against exact expected text: punctuation in both layouts,
 * every escape class and every kind of invalid UTF-8 (strings come from
 * traced processes, docs/STYLE.md rule 10), numbers at their limits, misuse that must
 * stop the output, and a FILE whose writes fail.
 */
#include <errno.h>
#include <locale.h>
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

#include "../user/views/json.h"

/* A writer into memory; output() shows what has been written so far. */
struct sink {
	char *buf;
	size_t len;
	FILE *f;
	struct json_writer w;
};

static int sink_setup(void **state)
{
	struct sink *s = calloc(1, sizeof(*s));

	if (!s)
		return -1;
	s->f = open_memstream(&s->buf, &s->len);
	if (!s->f) {
		free(s);
		return -1;
	}
	json_init(&s->w, s->f, false);
	*state = s;
	return 0;
}

static int sink_teardown(void **state)
{
	struct sink *s = *state;

	fclose(s->f);
	free(s->buf);
	free(s);
	return 0;
}

static const char *output(struct sink *s)
{
	fflush(s->f);
	return s->buf;
}

/* One string as the whole document; the output without its quotes and newline. */
static const char *string_doc(struct sink *s, const char *in, size_t n)
{
	static char body[512];
	const char *out;
	size_t len;

	json_string_n(&s->w, in, n);
	assert_int_equal(json_finish(&s->w), 0);
	out = output(s);
	len = strlen(out);
	assert_true(len >= 3 && len - 3 < sizeof(body));
	assert_int_equal(out[0], '"');
	assert_string_equal(out + len - 2, "\"\n");
	memcpy(body, out + 1, len - 3);
	body[len - 3] = '\0';
	return body;
}

static void write_nested(struct json_writer *w)
{
	json_begin_object(w);
	json_kv_u64(w, "a", 1);
	json_key(w, "b");
	json_begin_array(w);
	json_u64(w, 1);
	json_u64(w, 2);
	json_begin_object(w);
	json_end_object(w);
	json_begin_array(w);
	json_bool(w, false);
	json_end_array(w);
	json_end_array(w);
	json_key(w, "c");
	json_begin_object(w);
	json_kv_bool(w, "d", true);
	json_kv_null(w, "e");
	json_end_object(w);
	json_key(w, "f");
	json_begin_array(w);
	json_end_array(w);
	json_end_object(w);
}

static void json__nested__compact_has_commas_only_between_members(void **state)
{
	struct sink *s = *state;

	write_nested(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s),
			    "{\"a\":1,\"b\":[1,2,{},[false]],\"c\":{\"d\":true,\"e\":null},"
			    "\"f\":[]}\n");
}

static void json__nested__pretty_indents_two_spaces_per_level(void **state)
{
	struct sink *s = *state;

	json_init(&s->w, s->f, true);
	write_nested(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "{\n"
				       "  \"a\": 1,\n"
				       "  \"b\": [\n"
				       "    1,\n"
				       "    2,\n"
				       "    {},\n"
				       "    [\n"
				       "      false\n"
				       "    ]\n"
				       "  ],\n"
				       "  \"c\": {\n"
				       "    \"d\": true,\n"
				       "    \"e\": null\n"
				       "  },\n"
				       "  \"f\": []\n"
				       "}\n");
}

static void json__array__top_level_arrays_of_arrays(void **state)
{
	struct sink *s = *state;

	json_begin_array(&s->w);
	json_begin_array(&s->w);
	json_end_array(&s->w);
	json_begin_array(&s->w);
	json_string(&s->w, "x");
	json_end_array(&s->w);
	json_begin_array(&s->w);
	json_begin_array(&s->w);
	json_i64(&s->w, 2);
	json_i64(&s->w, -3);
	json_end_array(&s->w);
	json_end_array(&s->w);
	json_end_array(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "[[],[\"x\"],[[2,-3]]]\n");
}

static void json__kv__helpers_write_key_and_value(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_kv_u64(&s->w, "u", 7);
	json_kv_i64(&s->w, "i", -7);
	json_kv_str(&s->w, "s", "v");
	json_kv_bool(&s->w, "b", false);
	json_kv_double(&s->w, "d", 0.25);
	json_kv_null(&s->w, "n");
	json_kv_str(&s->w, "z", NULL); /* a string that is not there */
	json_end_object(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "{\"u\":7,\"i\":-7,\"s\":\"v\",\"b\":false,\"d\":0.25,"
				       "\"n\":null,\"z\":null}\n");
}

static void json__string__escapes_quote_and_backslash(void **state)
{
	assert_string_equal(string_doc(*state, "a\"b\\c", 5), "a\\\"b\\\\c");
}

static void json__string__escapes_control_characters(void **state)
{
	char in[32], expect[32 * 6 + 1] = "";

	for (int c = 0; c < 32; c++) {
		in[c] = (char)c;
		switch (c) {
		case '\b':
			strcat(expect, "\\b");
			break;
		case '\f':
			strcat(expect, "\\f");
			break;
		case '\n':
			strcat(expect, "\\n");
			break;
		case '\r':
			strcat(expect, "\\r");
			break;
		case '\t':
			strcat(expect, "\\t");
			break;
		default:
			sprintf(expect + strlen(expect), "\\u%04x", c);
		}
	}
	assert_string_equal(string_doc(*state, in, sizeof(in)), expect);
	assert_non_null(strstr(expect, "\\u0000\\u0001"));
	assert_non_null(strstr(expect, "\\u001b\\u001c"));
	assert_non_null(strstr(expect, "\\u001f"));
}

static void json__string__escapes_terminal_sequences(void **state)
{
	const char *in = "\x1b[31mred\x1b[0m\x1b]0;title\x07";

	assert_string_equal(string_doc(*state, in, strlen(in)),
			    "\\u001b[31mred\\u001b[0m\\u001b]0;title\\u0007");
}

static void json__string__escapes_del(void **state)
{
	assert_string_equal(string_doc(*state, "a\x7f~", 3), "a\\u007f~");
}

static void json__string_n__escapes_embedded_nul(void **state)
{
	assert_string_equal(string_doc(*state, "a\0b\0", 4), "a\\u0000b\\u0000");
}

static void json__string_n__empty_string(void **state)
{
	assert_string_equal(string_doc(*state, NULL, 0), "");
}

static void json__string__keeps_valid_utf8(void **state)
{
	/* U+0080, U+00E9, U+07FF, U+0800, U+20AC, U+D7FF, U+E000, U+FFFF, U+1F600, U+10FFFF */
	const char *in = "\xc2\x80\xc3\xa9\xdf\xbf\xe0\xa0\x80\xe2\x82\xac\xed\x9f\xbf\xee\x80\x80"
			 "\xef\xbf\xbf\xf0\x9f\x98\x80\xf4\x8f\xbf\xbf";

	assert_string_equal(string_doc(*state, in, strlen(in)), in);
}

#define R "\xef\xbf\xbd" /* U+FFFD */

static void json__string__replaces_each_invalid_utf8_byte(void **state)
{
	static const struct {
		const char *in, *out;
	} cases[] = {
		{ "\xc0\xaf", R R },		    /* overlong '/' in 2 bytes */
		{ "\xc1\xbf", R R },		    /* overlong, 2 bytes */
		{ "\xe0\x80\xaf", R R R },	    /* overlong, 3 bytes */
		{ "\xe0\x9f\xbf", R R R },	    /* overlong, 3 bytes, top */
		{ "\xf0\x80\x80\xaf", R R R R },    /* overlong, 4 bytes */
		{ "\xf0\x8f\xbf\xbf", R R R R },    /* overlong, 4 bytes, top */
		{ "\xed\xa0\x80", R R R },	    /* surrogate U+D800 */
		{ "\xed\xbf\xbf", R R R },	    /* surrogate U+DFFF */
		{ "\xf4\x90\x80\x80", R R R R },    /* U+110000 */
		{ "a\xc3", "a" R },		    /* truncated at the end */
		{ "\xe2\x82", R R },		    /* truncated 3-byte */
		{ "\xe2\x82\x41", R R "A" },	    /* cut short by ASCII */
		{ "\xf0\x9f\x98", R R R },	    /* truncated 4-byte */
		{ "\xf0\x9f\x98\"", R R R "\\\"" }, /* cut short by a quote */
		{ "\xc3\xc3\xa9", R "\xc3\xa9" },   /* lead byte then a valid pair */
		{ "\x80", R },			    /* lone continuation */
		{ "x\xbfy", "x" R "y" },	    /* lone continuation */
		{ "\xf5\xf8\xfe\xff", R R R R },    /* never valid */
		{ "\xe2\x82\xac\x80\xe2\x82\xac", "\xe2\x82\xac" R "\xe2\x82\xac" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		void *fresh; /* a document per case: the first one is in *state */

		assert_int_equal(sink_setup(&fresh), 0);
		assert_string_equal(string_doc(fresh, cases[i].in, strlen(cases[i].in)),
				    cases[i].out);
		sink_teardown(&fresh);
	}
	(void)state;
}

static void json__key__is_escaped_like_a_string(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_kv_str(&s->w, "k\"\x1b\xff", "v\n");
	json_end_object(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "{\"k\\\"\\u001b" R "\":\"v\\n\"}\n");
}

static void json__integers__extremes(void **state)
{
	struct sink *s = *state;

	json_begin_array(&s->w);
	json_u64(&s->w, UINT64_MAX);
	json_u64(&s->w, 0);
	json_i64(&s->w, INT64_MIN);
	json_i64(&s->w, INT64_MAX);
	json_end_array(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "[18446744073709551615,0,-9223372036854775808,"
				       "9223372036854775807]\n");
}

static void json__double__shortest_form_that_reads_back(void **state)
{
	struct sink *s = *state;

	json_begin_array(&s->w);
	json_double(&s->w, 0.5);
	json_double(&s->w, 1e-9);
	json_double(&s->w, 1e20);
	json_double(&s->w, 0.1);
	json_double(&s->w, -2.5);
	json_double(&s->w, 0.0);
	json_double(&s->w, 1.0 / 3.0);
	json_double(&s->w, 5e-324);
	json_double(&s->w, 1.7976931348623157e308);
	json_end_array(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "[0.5,1e-09,1e+20,0.1,-2.5,0,0.3333333333333333,"
				       "4.94065645841247e-324,1.7976931348623157e+308]\n");
}

static void json__double__non_finite_is_null(void **state)
{
	struct sink *s = *state;

	json_begin_array(&s->w);
	json_double(&s->w, NAN);
	json_double(&s->w, INFINITY);
	json_double(&s->w, -INFINITY);
	json_end_array(&s->w);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "[null,null,null]\n");
}

static void json__double__decimal_comma_locale_still_writes_a_point(void **state)
{
	struct sink *s = *state;
	locale_t de = newlocale(LC_NUMERIC_MASK, "de_DE.UTF-8", (locale_t)0);
	locale_t old;

	if (de == (locale_t)0)
		skip_because("the de_DE.UTF-8 locale is not installed (scripts/setup.sh makes it)");
	old = uselocale(de);
	json_begin_array(&s->w);
	json_double(&s->w, 0.5);
	json_double(&s->w, -1234.25);
	json_end_array(&s->w);
	uselocale(old);
	freelocale(de);
	assert_int_equal(json_finish(&s->w), 0);
	assert_string_equal(output(s), "[0.5,-1234.25]\n");
}

static void json__error__value_without_key_in_object(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_u64(&s->w, 1);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "{");
}

static void json__error__key_outside_object(void **state)
{
	struct sink *s = *state;

	json_key(&s->w, "top");
	assert_int_equal(json_error(&s->w), -EINVAL);

	json_init(&s->w, s->f, false);
	json_begin_array(&s->w);
	json_key(&s->w, "in_array");
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "[");
}

static void json__error__key_twice(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_key(&s->w, "a");
	json_key(&s->w, "b");
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "{\"a\":");
}

static void json__error__end_of_wrong_container(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_end_array(&s->w);
	assert_int_equal(json_error(&s->w), -EINVAL);

	json_init(&s->w, s->f, false);
	json_end_object(&s->w);
	assert_int_equal(json_error(&s->w), -EINVAL);

	json_init(&s->w, s->f, false);
	json_begin_object(&s->w);
	json_key(&s->w, "dangling");
	json_end_object(&s->w);
	assert_int_equal(json_error(&s->w), -EINVAL);
}

static void json__error__depth_overflow(void **state)
{
	struct sink *s = *state;

	for (int i = 0; i < JSON_MAX_DEPTH; i++)
		json_begin_array(&s->w);
	assert_int_equal(json_error(&s->w), 0);
	json_begin_array(&s->w);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_int_equal(strlen(output(s)), JSON_MAX_DEPTH);
}

static void json__error__second_top_level_value(void **state)
{
	struct sink *s = *state;

	json_u64(&s->w, 1);
	json_u64(&s->w, 2);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "1");
}

static void json__error__null_string(void **state)
{
	struct sink *s = *state;

	json_begin_array(&s->w);
	json_string(&s->w, NULL);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "[");
}

static void json__error__is_sticky_and_stops_output(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_kv_u64(&s->w, "a", 1);
	json_end_array(&s->w);
	assert_int_equal(json_error(&s->w), -EINVAL);
	json_kv_str(&s->w, "b", "more");
	json_end_object(&s->w);
	json_begin_array(&s->w);
	json_double(&s->w, NAN);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_int_equal(json_finish(&s->w), -EINVAL);
	assert_string_equal(output(s), "{\"a\":1");
}

static void json__finish__unbalanced_is_einval(void **state)
{
	struct sink *s = *state;

	json_begin_object(&s->w);
	json_key(&s->w, "a");
	json_begin_array(&s->w);
	assert_int_equal(json_finish(&s->w), -EINVAL);
	assert_int_equal(json_error(&s->w), -EINVAL);
	assert_string_equal(output(s), "{\"a\":[");
}

static void json__finish__empty_document_is_einval(void **state)
{
	struct sink *s = *state;

	assert_int_equal(json_finish(&s->w), -EINVAL);
	assert_string_equal(output(s), "");
}

static void json__error__eio_when_unbuffered_write_fails(void **state)
{
	FILE *f = fopen("/dev/full", "w");
	struct json_writer w;

	(void)state;
	if (!f)
		skip_because("no /dev/full");
	assert_int_equal(setvbuf(f, NULL, _IONBF, 0), 0);
	json_init(&w, f, false);
	json_begin_object(&w);
	assert_int_equal(json_error(&w), -EIO);
	json_kv_u64(&w, "a", 1);
	json_end_object(&w);
	assert_int_equal(json_error(&w), -EIO);
	assert_int_equal(json_finish(&w), -EIO);
	fclose(f);
}

static void json__finish__eio_when_flush_fails(void **state)
{
	FILE *f = fopen("/dev/full", "w");
	struct json_writer w;

	(void)state;
	if (!f)
		skip_because("no /dev/full");
	json_init(&w, f, true);
	json_begin_array(&w);
	json_string(&w, "buffered until the flush");
	json_end_array(&w);
	assert_int_equal(json_error(&w), 0);
	assert_int_equal(json_finish(&w), -EIO);
	assert_int_equal(json_error(&w), -EIO);
	fclose(f);
}

#define T(name) cmocka_unit_test_setup_teardown(name, sink_setup, sink_teardown)

int main(void)
{
	const struct CMUnitTest tests[] = {
		T(json__nested__compact_has_commas_only_between_members),
		T(json__nested__pretty_indents_two_spaces_per_level),
		T(json__array__top_level_arrays_of_arrays),
		T(json__kv__helpers_write_key_and_value),
		T(json__string__escapes_quote_and_backslash),
		T(json__string__escapes_control_characters),
		T(json__string__escapes_terminal_sequences),
		T(json__string__escapes_del),
		T(json__string_n__escapes_embedded_nul),
		T(json__string_n__empty_string),
		T(json__string__keeps_valid_utf8),
		T(json__string__replaces_each_invalid_utf8_byte),
		T(json__key__is_escaped_like_a_string),
		T(json__integers__extremes),
		T(json__double__shortest_form_that_reads_back),
		T(json__double__non_finite_is_null),
		T(json__double__decimal_comma_locale_still_writes_a_point),
		T(json__error__value_without_key_in_object),
		T(json__error__key_outside_object),
		T(json__error__key_twice),
		T(json__error__end_of_wrong_container),
		T(json__error__depth_overflow),
		T(json__error__second_top_level_value),
		T(json__error__null_string),
		T(json__error__is_sticky_and_stops_output),
		T(json__finish__unbalanced_is_einval),
		T(json__finish__empty_document_is_einval),
		T(json__error__eio_when_unbuffered_write_fails),
		T(json__finish__eio_when_flush_fails),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
