// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process's command line as ps shows it (target.h): every PostgreSQL
 * backend's comm is "postgres" and a pyenv tree's is "bash", where the
 * command line tells them apart ("postgres: bench bench 127.0.0.1(5432)
 * idle": PostgreSQL writes its backend's role over its argv).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target.h"

/* Past the bound: what is left of the text, cut where a whole byte's
 * rendering ends, and "..." */
#define CMDLINE_MORE "..."

size_t target_cmdline_format(const char *raw, size_t n, char *out, size_t size)
{
	size_t o = 0, i, keep = 0;

	if (!size)
		return 0;
	/* a program that writes its title pads it with NULs (PostgreSQL) */
	while (n && (raw[n - 1] == 0 || raw[n - 1] == ' '))
		n--;
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)raw[i];
		char one[5];
		size_t w;
		if (c == 0)
			c = ' ';
		if (c >= 0x20 && c < 0x7f && c != '\\')
			w = (size_t)snprintf(one, sizeof(one), "%c", c);
		else
			w = (size_t)snprintf(one, sizeof(one), "\\x%02x", c);
		if (o + w + 1 > size)
			break;
		/* where the marker would go, should the rest not fit */
		if (o + w + sizeof(CMDLINE_MORE) <= size)
			keep = o + w;
		memcpy(out + o, one, w);
		o += w;
	}
	if (i < n && size > sizeof(CMDLINE_MORE) - 1) {
		o = keep;
		memcpy(out + o, CMDLINE_MORE, sizeof(CMDLINE_MORE) - 1);
		o += sizeof(CMDLINE_MORE) - 1;
	}
	out[o] = 0;
	return o;
}

int target_cmdline(pid_t pid, char *out, size_t size)
{
	char path[64], raw[TARGET_CMDLINE_READ];
	ssize_t n;
	int fd, err = 0;

	if (size)
		out[0] = 0;
	snprintf(path, sizeof(path), "/proc/%d/cmdline", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	/* one read: past its bound the text is cut anyway */
	n = read(fd, raw, sizeof(raw));
	if (n < 0)
		err = -errno;
	else
		target_cmdline_format(raw, (size_t)n, out, size);
	close(fd);
	return err;
}

int target_cmdline_keep(pid_t pid, char *out, size_t size)
{
	char now[TARGET_CMDLINE_READ];
	size_t n = size < sizeof(now) ? size : sizeof(now);
	int err = target_cmdline(pid, now, n);

	/* a process past its exit reads "" (its memory is gone): what it
	 * showed last stays */
	if (!err && now[0])
		memcpy(out, now, strlen(now) + 1);
	return err;
}
