/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A cmocka test that cannot run here (a file, a locale, a namespace this
 * machine lacks): skipped and named, never silent. Under CI (CI=true, as
 * root) every one of these can run, so there the skip is a failure
 * (docs/TESTING.md). Include after <cmocka.h>.
 */
#ifndef TALLY_TEST_SKIP_H
#define TALLY_TEST_SKIP_H

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static inline int test_in_ci(void)
{
	const char *ci = getenv("CI");
	return ci && !strcmp(ci, "true") && geteuid() == 0;
}

#define skip_because(why)                                                                          \
	do {                                                                                       \
		if (test_in_ci())                                                                  \
			fail_msg("skipped under CI, which must run it: %s", why);                  \
		print_message("skip: %s\n", why);                                                  \
		skip();                                                                            \
	} while (0)

#endif
