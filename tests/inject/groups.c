// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject with the SDK (tests/inject/run.sh): a program on glibc's malloc
 * and libtally.so. Its thread enters group "work" before the injection;
 * after SIGUSR1 it allocates W bytes in "work" (some blocks it frees again,
 * and some from before go free too), leaves the group and allocates R bytes
 * in root, then prints "work=W root=R" and waits for SIGTERM.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#include "../../alloc/include/tally.h"

int main(void)
{
	sigset_t set;
	int sig;
	size_t work = 0, root = 0;
	void *keep[300], *before[10];

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	struct tally_group g = tally_group_register("work");
	struct tally_group_guard in = tally_group_enter(g);
	for (int i = 0; i < 10; i++)
		before[i] = malloc(64);
	printf("ready\n");
	sigwait(&set, &sig);
	for (int i = 0; i < 200; i++) {
		keep[i] = malloc(100 + (size_t)i);
		work += 100 + (size_t)i;
	}
	for (int i = 0; i < 200; i += 2) {
		free(keep[i]);
		work -= 100 + (size_t)i;
	}
	for (int i = 0; i < 10; i++)
		free(before[i]);
	tally_group_exit(in);
	for (int i = 200; i < 300; i++) {
		keep[i] = malloc(1000);
		root += 1000;
	}
	printf("work=%zu root=%zu\n", work, root);
	do
		sigwait(&set, &sig);
	while (sig != SIGTERM);
	return 0;
}
