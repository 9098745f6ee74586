/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The unit tests' death test: a check that must stop the process. */
#ifndef TALLY_TESTS_EXPECT_ABORT_H
#define TALLY_TESTS_EXPECT_ABORT_H

/* Run fn in a child; it must die of SIGABRT with `msg` on its stderr (a
 * cmocka failure otherwise). */
void expect_abort(void (*fn)(void), const char *msg);

#endif /* TALLY_TESTS_EXPECT_ABORT_H */
