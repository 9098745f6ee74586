// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Children of a traced process, made every way a program makes them, after
 * the parent has handed over batches (so that its probe site has been hit,
 * and on 6.18 rewritten as a call into a trampoline page the child does not
 * get). Each child allocates enough to fill batches of its own and ends as
 * its mode says; the parent counts the children that did not exit 0 and
 * prints "MODE: N of M children failed". Exit status: 0 when none failed.
 *
 *   exit     children end through exit() (destructors: the exit hand-over)
 *   _exit    children end through _exit()
 *   nested   children fork again before exit()
 *   threads  the parent forks from a second thread while a third allocates
 *   atfork   a pthread_atfork child handler allocates before the child runs
 *   rawfork  fork by the system call (no atfork handler runs in the child)
 *   vfork    vfork + exec of true
 *   spawn    posix_spawn of true
 */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define CHILDREN 20

extern char **environ;
static const char *mode;
static volatile int stop;

/* Enough malloc/free traffic for several 32 KiB batches (two words a pair). */
static void churn(int pairs)
{
	for (int i = 0; i < pairs; i++) {
		char *p = malloc(16 + (size_t)(i % 200));
		p[0] = (char)i;
		free(p);
	}
}

static int child_status(pid_t pid)
{
	int st;
	if (pid < 0)
		return 1;
	while (waitpid(pid, &st, 0) < 0)
		;
	if (WIFSIGNALED(st))
		fprintf(stderr, "%s: child %d killed by signal %d\n", mode, pid, WTERMSIG(st));
	return !(WIFEXITED(st) && WEXITSTATUS(st) == 0);
}

static void child_body(void)
{
	churn(20000);
	if (!strcmp(mode, "_exit"))
		_exit(0);
	if (!strcmp(mode, "nested")) {
		pid_t g = fork();
		if (g == 0) {
			churn(20000);
			exit(0);
		}
		exit(child_status(g));
	}
	exit(0);
}

static pid_t make_child(void)
{
	pid_t pid;

	if (!strcmp(mode, "vfork")) {
		pid = vfork();
		if (pid == 0) {
			execl("/bin/true", "true", (char *)NULL);
			_exit(127);
		}
		return pid;
	}
	if (!strcmp(mode, "spawn")) {
		char *argv[] = { "true", NULL };
		return posix_spawn(&pid, "/bin/true", NULL, NULL, argv, environ) ? -1 : pid;
	}
	pid = !strcmp(mode, "rawfork") ? (pid_t)syscall(SYS_fork) : fork();
	if (pid == 0)
		child_body();
	return pid;
}

static void atfork_child(void)
{
	churn(20000);
}

static void *allocator(void *arg)
{
	(void)arg;
	while (!stop)
		churn(1000);
	return NULL;
}

static void *forker(void *arg)
{
	int *bad = arg;
	for (int c = 0; c < CHILDREN; c++) {
		churn(5000);
		*bad += child_status(make_child());
	}
	return NULL;
}

int main(int argc, char **argv)
{
	int bad = 0;
	pthread_t a, f;

	if (argc != 2) {
		fprintf(stderr, "usage: %s exit|_exit|nested|threads|atfork|rawfork|vfork|spawn\n",
			argv[0]);
		return 2;
	}
	mode = argv[1];
	if (!strcmp(mode, "atfork"))
		pthread_atfork(NULL, NULL, atfork_child);
	/* the parent's batches first: its probe site is hit, and rewritten */
	churn(50000);
	if (!strcmp(mode, "threads")) {
		mode = "exit";
		pthread_create(&a, NULL, allocator, NULL);
		pthread_create(&f, NULL, forker, &bad);
		pthread_join(f, NULL);
		stop = 1;
		pthread_join(a, NULL);
		mode = "threads";
	} else {
		forker(&bad);
	}
	printf("%s: %d of %d children failed\n", mode, bad, CHILDREN);
	return bad != 0;
}
