// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target whose names attack the terminal that shows them: a thread named
 * with a clear-screen and a color sequence, a quote and a backslash, and a
 * resource group whose name sets the window title, rings the bell, moves the
 * cursor and carries a C1 CSI and a byte that is not UTF-8. `tally top` must
 * show them harmlessly (tests/top/run.sh). Runs for SECS seconds (2).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"

/* 14 bytes: a thread name holds 15 */
#define EVIL_THREAD "\x1b[2J\x1b[31mev\"\\n"
#define EVIL_GROUP "\x1b]0;pwned\x07\x1b[31mgrp\"\\\r\n\xc2\x9b\xff"

static atomic_bool stop;

static void *evil(void *arg)
{
	(void)arg;
	prctl(PR_SET_NAME, EVIL_THREAD, 0, 0, 0);
	tally_group_enter(tally_group_register(EVIL_GROUP));
	while (!atomic_load(&stop)) {
		void *volatile p = malloc(64 + (size_t)(rand() % 512));
		struct timespec ts = { 0, 200000 };

		free(p);
		nanosleep(&ts, NULL);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	double secs = argc > 1 ? atof(argv[1]) : 2;
	struct timespec ts = { (time_t)secs, (long)((secs - (time_t)secs) * 1e9) };
	pthread_t th;

	if (pthread_create(&th, NULL, evil, NULL))
		return 1;
	nanosleep(&ts, NULL);
	atomic_store(&stop, true);
	pthread_join(th, NULL);
	return 0;
}
