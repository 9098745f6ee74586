// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The unit tests' death test (expect_abort.h). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "expect_abort.h"

void expect_abort(void (*fn)(void), const char *msg)
{
	int pfd[2];
	assert_int_equal(pipe(pfd), 0);
	pid_t pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(pfd[1], 2);
		fn();
		_exit(0);
	}
	close(pfd[1]);
	char buf[512] = "";
	ssize_t n, got = 0;
	while ((n = read(pfd[0], buf + got, sizeof(buf) - 1 - (size_t)got)) > 0)
		got += n;
	close(pfd[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGABRT)
		fail_msg("expected SIGABRT and \"%s\", got status %d and \"%s\"", msg, status, buf);
	if (!strstr(buf, msg))
		fail_msg("expected \"%s\" on stderr, got \"%s\"", msg, buf);
}
