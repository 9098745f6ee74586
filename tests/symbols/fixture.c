// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A program whose code tests/test_symbols.c looks up, built as a release
 * build is (-O2 -g -fomit-frame-pointer), and stripped. It prints where its
 * functions are, and return addresses with the line of their call (passed as
 * an argument: the test cannot read the source), then waits for its stdin to
 * close:
 *   fn NAME ADDR                        a function's entry
 *   ret FUNCTION ADDR LINE              a return address in FUNCTION, its call at LINE
 *   inl INNER ADDR LINE OUTER OLINE     the same in INNER, inlined into OUTER at OLINE
 *   malloc ADDR                         libc's malloc
 *   ready
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

/* noclone: no "middle.constprop.0" whose name would differ from the source's */
#define NOINLINE __attribute__((noinline, noclone))

static volatile int sink;

/* Prints its return address, with the caller's name and the line of the call. */
NOINLINE static void report(const char *fn, int line, const char *outer, int outer_line)
{
	void *ra = __builtin_return_address(0);

	if (outer)
		printf("inl %s %p %d %s %d\n", fn, ra, line, outer, outer_line);
	else
		printf("ret %s %p %d\n", fn, ra, line);
	sink++;
}

NOINLINE static int leaf_add(int a, int b)
{
	sink += a;
	return a + b;
}

static inline __attribute__((always_inline)) void inlined_step(int outer_line)
{
	report("inlined_step", __LINE__, "middle", outer_line);
	sink++;
}

NOINLINE static void middle(int x)
{
	report("middle", __LINE__, NULL, 0);
	sink += x;
	inlined_step(__LINE__);
	sink += leaf_add(x, 1);
}

int main(void)
{
	char buf[64];

	printf("fn leaf_add %p\n", (void *)leaf_add);
	printf("fn middle %p\n", (void *)middle);
	printf("fn main %p\n", (void *)main);
	middle(2);
	printf("malloc %p\n", (void *)malloc);
	printf("ready\n");
	fflush(stdout);
	while (read(0, buf, sizeof(buf)) > 0)
		;
	return 0;
}
