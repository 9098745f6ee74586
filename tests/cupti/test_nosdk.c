// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CUPTI library's group lookup in a process without the SDK (no
 * tally_group_current anywhere: test_cupti.c exports one, so it cannot test
 * this): the group is root, and the lookup leaves no dlerror message. It
 * did: a dlsym(RTLD_DEFAULT) that failed, read by a CUDA program checking
 * dlerror() after its own dlopen. Prints "N passed, M failed".
 */
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>

uint32_t tally_cupti_group(void);

int main(void)
{
	const char *e;
	uint32_t g;
	int bad = 0;

	dlerror();
	g = tally_cupti_group();
	e = dlerror();
	if (g != 0) {
		printf("FAIL - without the SDK: group %u, want 0 (root)\n", g);
		bad++;
	} else {
		printf("ok - without the SDK: group 0 (root)\n");
	}
	if (e) {
		printf("FAIL - the lookup left a dlerror message: %s\n", e);
		bad++;
	} else {
		printf("ok - the lookup left no dlerror message\n");
	}
	printf("%d passed, %d failed\n", 2 - bad, bad);
	return bad != 0;
}
