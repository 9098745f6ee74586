// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Two processes passing a byte back and forth through pipes, on one CPU:
 * each round trip is two context switches, so its time moves with what
 * runs at every switch of the machine (bench-agent: a sched_switch program
 * per session of `tally serve --all`). Prints microseconds a round trip.
 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	int a[2], b[2], n = argc > 1 ? atoi(argv[1]) : 200000;
	char c = 0;
	struct timespec t0, t1;

	if (n <= 0 || pipe(a) || pipe(b))
		return 1;
	pid_t child = fork();
	if (child < 0)
		return 1;
	if (!child) {
		for (int i = 0; i < n; i++)
			if (read(a[0], &c, 1) != 1 || write(b[1], &c, 1) != 1)
				_exit(1);
		_exit(0);
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < n; i++)
		if (write(a[1], &c, 1) != 1 || read(b[0], &c, 1) != 1)
			return 1;
	clock_gettime(CLOCK_MONOTONIC, &t1);
	waitpid(child, NULL, 0);
	printf("%.2f\n",
	       ((double)(t1.tv_sec - t0.tv_sec) * 1e9 + (double)(t1.tv_nsec - t0.tv_nsec)) / n /
		       1000.0);
	return 0;
}
