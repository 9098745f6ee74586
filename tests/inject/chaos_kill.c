// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The chaos test's killer (tests/inject/chaos.sh): an injector killed by
 * SIGKILL at a random point of its injection.
 *
 *   inject_chaos_kill PID MAX_US SEED -- CMD...    runs CMD (a tally)
 *   inject_chaos_kill PID MAX_US SEED --load LIB [ROUNDS]   a child that
 *       calls inject_load(PID, LIB) itself, as tally does, without the BPF
 *       side (milliseconds a round instead of tally's half second of
 *       loading); ROUNDS rounds, one in 8 with 0..300 ms from the start,
 *       "dead" and no more once PID has gone
 *   inject_chaos_kill --freeze TID MS              holds thread TID stopped
 *       (ptrace) for MS ms, as a starved thread is
 *
 * MAX_US > 0: the kill comes 0..MAX_US us after the injector has seized
 * PID (its TracerPid), that is through the injection itself; MAX_US < 0:
 * 0..-MAX_US us after the start. Prints one line: "during" (PID still
 * traced by it when killed), "after" (seized and let go), "before" or
 * "ended" (it exited first), the child's exit status (--load: 0, 3 when
 * the interposer saw no tracer, which is all it can see without the BPF
 * side, 2 for any other failure; -1 when killed), the delay and MAX_US;
 * exits 0, or 1 when the child could not be run. CHAOS_SIGNAL=N sends
 * signal N instead of SIGKILL (SIGINT: Ctrl-C), and waits for the child's
 * end; CHAOS_FROM_RELEASE=1 counts MAX_US from the moment it let go of
 * PID (the injection's end) instead.
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../../user/os/inject.h"

static long tracer_of(pid_t pid)
{
	char path[64], buf[4096];
	FILE *f;
	long tracer = -1;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if (!(f = fopen(path, "re")))
		return -1;
	size_t n = fread(buf, 1, sizeof(buf) - 1, f);
	fclose(f);
	buf[n] = 0;
	const char *p = strstr(buf, "TracerPid:");
	if (p)
		tracer = strtol(p + 10, NULL, 10);
	return tracer;
}

static uint64_t now_us(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static void sleep_us(uint64_t us)
{
	struct timespec ts = { (time_t)(us / 1000000), (long)(us % 1000000) * 1000 };
	while (nanosleep(&ts, &ts) && errno == EINTR)
		;
}

static pid_t start_child(pid_t target, char **argv)
{
	pid_t c = fork();

	if (c)
		return c;
	if (!strcmp(argv[0], "--load")) {
		char why[512];
		int err = inject_load(target, argv[1], 0, true, why, sizeof(why));
		if (err && err != -ENOTCONN)
			fprintf(stderr, "%s\n", why);
		_exit(!err ? 0 : err == -ENOTCONN ? 3 : 2);
	}
	execvp(argv[1], argv + 1);
	_exit(127);
}

static int freeze(pid_t tid, long ms)
{
	int st;

	if (ptrace(PTRACE_SEIZE, tid, 0, 0) || ptrace(PTRACE_INTERRUPT, tid, 0, 0) ||
	    waitpid(tid, &st, __WALL) != tid) {
		perror("freeze");
		return 1;
	}
	sleep_us((uint64_t)ms * 1000);
	return ptrace(PTRACE_DETACH, tid, 0, 0) ? 1 : 0;
}

/* One round: the child started, killed after `delay` us (from the seizure
 * when max_us > 0), its line printed. 1 when it could not be run. */
static int round_of(pid_t target, long max_us, uint64_t delay, char **argv)
{
	uint64_t t0 = now_us(), end = t0 + delay, seized = 0;
	pid_t c = start_child(target, argv), reaped = 0;
	long tracer = -1;
	int st = 0;

	if (c < 0)
		return 1;
	/* MAX_US > 0: the delay counts from the seizure (30 s at most: a tally
	 * loads its BPF objects first, seconds on a loaded machine) */
	if (max_us > 0)
		end = t0 + 30000000;
	bool from_release = getenv("CHAOS_FROM_RELEASE") != NULL;
	while (now_us() < end && !(reaped = waitpid(c, &st, WNOHANG))) {
		tracer = tracer_of(target);
		if (tracer == c && !seized) {
			seized = now_us();
			if (max_us > 0 && !from_release)
				end = seized + delay;
		} else if (tracer != c && seized && from_release && max_us > 0) {
			end = now_us() + delay;
			from_release = false;
		}
		sleep_us(20);
	}
	tracer = tracer_of(target);
	if (!reaped) {
		const char *sig = getenv("CHAOS_SIGNAL");
		kill(c, sig ? atoi(sig) : SIGKILL);
		waitpid(c, &st, 0);
	}
	const char *when = reaped ? "ended" : tracer == c ? "during" : seized ? "after" : "before";
	printf("%s %d %llu %ld\n", when, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
	       (unsigned long long)delay, max_us);
	fflush(stdout);
	return 0;
}

int main(int argc, char **argv)
{
	if (argc == 4 && !strcmp(argv[1], "--freeze"))
		return freeze((pid_t)atoi(argv[2]), atol(argv[3]));
	if (argc < 6 || (strcmp(argv[4], "--") && strcmp(argv[4], "--load"))) {
		fprintf(stderr, "usage: %s PID MAX_US SEED -- CMD... | --load LIB [ROUNDS]\n",
			argv[0]);
		return 1;
	}
	pid_t target = (pid_t)atoi(argv[1]);
	long max_us = atol(argv[2]);
	int rounds = !strcmp(argv[4], "--load") && argc > 6 ? atoi(argv[6]) : 1;

	srand((unsigned)atoi(argv[3]));
	for (int i = 0; i < rounds; i++) {
		/* one round in 8, with --load: from the start, 0..300 ms */
		long max = rounds > 1 && i % 8 == 7 ? -300000 : max_us;
		if (round_of(target, max, (uint64_t)rand() % (uint64_t)(labs(max) + 1), argv + 4))
			return 1;
		if (kill(target, 0)) {
			printf("dead\n");
			break;
		}
	}
	return 0;
}
