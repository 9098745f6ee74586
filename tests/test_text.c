// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The UTF-8 check that JSON and Prometheus share (user/util/text.c), at
 * every boundary of RFC 3629's table: the shortest and longest of each
 * length, the overlong forms, the surrogates, past U+10FFFF, and sequences
 * cut short. The terminal's policy is tested with top (tests/test_top.c).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../user/util/text.h"

static size_t len_of(const char *s, size_t n)
{
	return text_utf8_len((const unsigned char *)s, n);
}

static void utf8_len__valid_sequences_at_each_boundary(void **state)
{
	static const struct {
		const char *s;
		size_t len;
	} valid[] = {
		{ "\x00", 1 },
		{ "\x1b", 1 },
		{ "\x7f", 1 },
		{ "\xc2\x80", 2 },
		{ "\xdf\xbf", 2 },
		{ "\xe0\xa0\x80", 3 },
		{ "\xed\x9f\xbf", 3 },
		{ "\xee\x80\x80", 3 },
		{ "\xef\xbf\xbf", 3 },
		{ "\xf0\x90\x80\x80", 4 },
		{ "\xf4\x8f\xbf\xbf", 4 },
	};

	(void)state;
	for (size_t i = 0; i < sizeof(valid) / sizeof(valid[0]); i++) {
		size_t n = valid[i].len;

		assert_int_equal(len_of(valid[i].s, n), n);
		/* cut short by one byte: none */
		if (n > 1)
			assert_int_equal(len_of(valid[i].s, n - 1), 0);
	}
}

static void utf8_len__invalid_sequences__zero(void **state)
{
	static const char *const invalid[] = {
		"\x80\x80",	    /* a continuation byte */
		"\xbf",		    /* another */
		"\xc0\x80",	    /* overlong NUL */
		"\xc1\xbf",	    /* overlong DEL */
		"\xe0\x80\x80",	    /* overlong */
		"\xe0\x9f\xbf",	    /* overlong, the last */
		"\xed\xa0\x80",	    /* U+D800, a surrogate */
		"\xed\xbf\xbf",	    /* U+DFFF */
		"\xf0\x80\x80\x80", /* overlong */
		"\xf0\x8f\xbf\xbf", /* overlong, the last */
		"\xf4\x90\x80\x80", /* U+110000 */
		"\xf5\x80\x80\x80", /* past U+10FFFF */
		"\xff",		    /* never UTF-8 */
		"\xc3\x28",	    /* a lead byte before ASCII */
		"\xe2\x82\x28",	    /* a third byte that is no continuation */
		"\xf0\x90\x80\xc0", /* a fourth one */
	};

	(void)state;
	for (size_t i = 0; i < sizeof(invalid) / sizeof(invalid[0]); i++)
		if (len_of(invalid[i], 4))
			fail_msg("sequence %zu taken as valid", i);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(utf8_len__valid_sequences_at_each_boundary),
		cmocka_unit_test(utf8_len__invalid_sequences__zero),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
