// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Whether a thread ran: its scheduler state and the CPU time it has had, from
 * /proc. A cut (user/session/cut_read.c) reads a heap whose owner has not
 * answered its request only while the owner is out of the allocator, and
 * this is how it knows: a thread that did not run while its heap was read
 * changed nothing of it.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

/* The whole of a small /proc file, NUL-terminated. */
static int read_small(const char *path, char *buf, size_t len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	ssize_t n = read(fd, buf, len - 1);
	int err = n < 0 ? -errno : 0;
	close(fd);
	if (err)
		return err;
	buf[n] = 0;
	return 0;
}

int target_thread_run(pid_t pid, uint32_t tid, struct thread_run *out)
{
	char path[64], buf[512];
	int err;

	*out = (struct thread_run){ .gone = true };
	snprintf(path, sizeof(path), "/proc/%d/task/%u/stat", (int)pid, tid);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err == -ENOENT || err == -ESRCH ? 0 : err;
	/* the state follows the comm, which may hold ") " itself: the last one */
	const char *close_paren = strrchr(buf, ')');
	if (!close_paren || close_paren[1] != ' ' || !close_paren[2])
		return -EPROTO;
	out->state = close_paren[2];
	snprintf(path, sizeof(path), "/proc/%d/task/%u/schedstat", (int)pid, tid);
	err = read_small(path, buf, sizeof(buf));
	if (err)
		return err == -ENOENT || err == -ESRCH ? 0 : err;
	if (sscanf(buf, "%" SCNu64, &out->run_ns) != 1)
		return -EPROTO;
	out->gone = out->state == 'Z' || out->state == 'X';
	return 0;
}
