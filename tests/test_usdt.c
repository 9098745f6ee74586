// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * USDT sites read from ELF notes (user/probes/usdt.c): the probes this test
 * carries itself (sys/sdt.h, each argument form the compiler writes:
 * constants, registers, memory), libtally_alloc.so's tally:batch with its
 * semaphore (argv[1]), and files that have no such notes. What the BPF side
 * then does with a spec is the tracer suite's (tests/tracer).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sdt.h>

#include <cmocka.h>

#include "../user/os/target.h"
#include "../user/probes/usdt.h"

static const char *alloc_lib; /* argv[1] */

/* Sites of this test's own probes, read; run once, untraced. */
__attribute__((noinline, used)) static long probes(long a, const int *p)
{
	STAP_PROBE2(tally_test, consts, 5, -7L);
	STAP_PROBE2(tally_test, vars, (unsigned char)a, (short)*p);
	STAP_PROBE1(tally_test, twice, a);
	STAP_PROBE1(tally_test, twice, a + 1);
	return a;
}

static void own__constants(void **state)
{
	struct usdt_site s[4];
	int n = usdt_sites("/proc/self/exe", "tally_test", "consts", s, 4);

	(void)state;
	assert_int_equal(n, 1);
	assert_true(s[0].off > 0);
	assert_int_equal(s[0].sema_off, 0);
	assert_int_equal(s[0].spec.nargs, 2);
	assert_int_equal(s[0].spec.args[0].type, USDT_ARG_CONST);
	assert_int_equal((int64_t)s[0].spec.args[0].val_off, 5);
	assert_true(s[0].spec.args[0].is_signed); /* an int: "-4@$5" */
	assert_int_equal(s[0].spec.args[0].bitshift, 32);
	assert_int_equal(s[0].spec.args[1].type, USDT_ARG_CONST);
	assert_int_equal((int64_t)s[0].spec.args[1].val_off, -7);
	assert_int_equal(s[0].spec.args[1].bitshift, 0);
}

static void own__registers_and_memory_by_size(void **state)
{
	struct usdt_site s[4];
	int n = usdt_sites("/proc/self/exe", "tally_test", "vars", s, 4);

	(void)state;
	assert_int_equal(n, 1);
	assert_int_equal(s[0].spec.nargs, 2);
	for (int i = 0; i < 2; i++)
		assert_true(s[0].spec.args[i].type == USDT_ARG_REG ||
			    s[0].spec.args[i].type == USDT_ARG_REG_DEREF);
	/* an unsigned char, a short: their sizes and signs */
	assert_false(s[0].spec.args[0].is_signed);
	assert_int_equal(s[0].spec.args[0].bitshift, 56);
	assert_true(s[0].spec.args[1].is_signed);
	assert_int_equal(s[0].spec.args[1].bitshift, 48);
}

static void own__a_probe_with_two_sites(void **state)
{
	struct usdt_site s[4];

	(void)state;
	assert_int_equal(usdt_sites("/proc/self/exe", "tally_test", "twice", s, 4), 2);
	assert_true(s[0].off != s[1].off);
	assert_int_equal(usdt_sites("/proc/self/exe", "tally_test", "twice", s, 1), -E2BIG);
}

static void own__unknown_probe_has_no_site(void **state)
{
	struct usdt_site s[1];

	(void)state;
	assert_int_equal(usdt_sites("/proc/self/exe", "tally_test", "nope", s, 1), 0);
	assert_int_equal(usdt_sites("/proc/self/exe", "tally", "consts", s, 1), 0);
}

/* tally:batch in the product library: its two sites in the text (a heap's
 * hand-over, and the exit hand-over's copy of another thread's batch), one
 * semaphore where the symbol says (a file offset both). */
static void alloc_lib__batch_and_its_semaphore(void **state)
{
	const char *name = "tally_batch_semaphore";
	struct usdt_site s[8];
	uint64_t sema;
	int n = usdt_sites(alloc_lib, "tally", "batch", s, 8);

	(void)state;
	assert_int_equal(n, 2);
	assert_int_equal(target_elf_symbols(alloc_lib, &name, 1, &sema), 0);
	assert_true(sema != 0);
	assert_int_equal(target_elf_file_offsets(alloc_lib, &sema, 1), 0);
	for (int i = 0; i < n; i++) {
		assert_int_equal(s[i].spec.nargs, 2); /* the batch, its bytes */
		assert_int_equal(s[i].sema_off, sema);
		assert_true(s[i].off > 0 && s[i].off != sema);
	}
	assert_true(s[0].off != s[1].off);
}

static void not_elf__refused(void **state)
{
	struct usdt_site s[1];

	(void)state;
	assert_true(usdt_sites("/proc/self/status", "tally", "batch", s, 1) <= 0);
	assert_int_equal(usdt_sites("/nonexistent", "tally", "batch", s, 1), -ENOENT);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(own__constants),
		cmocka_unit_test(own__registers_and_memory_by_size),
		cmocka_unit_test(own__a_probe_with_two_sites),
		cmocka_unit_test(own__unknown_probe_has_no_site),
		cmocka_unit_test(alloc_lib__batch_and_its_semaphore),
		cmocka_unit_test(not_elf__refused),
	};

	if (argc < 2) {
		fprintf(stderr, "usage: test_usdt build/libtally_alloc.so\n");
		return 2;
	}
	alloc_lib = argv[1];
	(void)probes(argc, &argc); /* its sites are nops: nothing traces this */
	if (!usdt_supported()) {
		printf("[  SKIPPED ] %zu test(s): no USDT arguments read on this machine\n",
		       sizeof(tests) / sizeof(tests[0]));
		return 0;
	}
	return cmocka_run_group_tests(tests, NULL, NULL);
}
