// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One tally per target: an advisory lock named for the PID, in a directory
 * only the tracing user can write (TARGET_LOCK_DIR, made 0700). A world-
 * writable place (/run/lock, /tmp) lets any local user hold the lock and
 * keep root from tracing, or plant a symlink and have root create a file
 * wherever it points. The file goes when the session ends; files left by a
 * tally that was killed go at the next start.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "target_lock.h"

/* The directory, made if missing; refused unless it is a real directory of
 * ours that nobody else may write. Returns its fd or negative errno. */
static int lock_dir(const char *dir)
{
	struct stat st;
	int fd;

	if (mkdir(dir, 0700) && errno != EEXIST)
		return -errno;
	fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	if (fstat(fd, &st) || !S_ISDIR(st.st_mode) || st.st_uid != geteuid() ||
	    (st.st_mode & (S_IWGRP | S_IWOTH))) {
		close(fd);
		return -EPERM;
	}
	return fd;
}

/* Files of tallies that were killed: PIDs that no longer exist, unlocked. */
static void sweep_stale(int dfd)
{
	int fd2 = dup(dfd);
	DIR *d = fd2 >= 0 ? fdopendir(fd2) : NULL;
	struct dirent *e;

	if (!d) {
		if (fd2 >= 0)
			close(fd2);
		return;
	}
	while ((e = readdir(d))) {
		char *end;
		long pid = strtol(e->d_name, &end, 10);
		if (pid <= 0 || strcmp(end, ".lock"))
			continue;
		if (!kill((pid_t)pid, 0) || errno != ESRCH)
			continue; /* alive */
		int fd = openat(dfd, e->d_name, O_RDWR | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
		if (fd < 0)
			continue;
		if (!flock(fd, LOCK_EX | LOCK_NB))
			unlinkat(dfd, e->d_name, 0);
		close(fd);
	}
	closedir(d);
}

int target_lock(struct target_lock *l, const char *dir, int pid)
{
	int dfd, fd = -1, err;

	l->fd = l->dir_fd = -1;
	snprintf(l->name, sizeof(l->name), "%d.lock", pid);
	dfd = lock_dir(dir);
	if (dfd < 0)
		return dfd;
	sweep_stale(dfd);
	/* a file unlinked by the tally that held it, between our open and
	 * our flock, is no lock: try again on the one now there */
	for (int tries = 0; tries < 8; tries++) {
		struct stat a, b;

		fd = openat(dfd, l->name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
		if (fd < 0) {
			err = -errno;
			goto fail;
		}
		if (flock(fd, LOCK_EX | LOCK_NB)) {
			err = errno == EWOULDBLOCK ? -EBUSY : -errno;
			goto fail;
		}
		if (!fstat(fd, &a) && !fstatat(dfd, l->name, &b, AT_SYMLINK_NOFOLLOW) &&
		    a.st_ino == b.st_ino && a.st_dev == b.st_dev) {
			l->fd = fd;
			l->dir_fd = dfd;
			return 0;
		}
		close(fd);
		fd = -1;
	}
	err = -EAGAIN;
fail:
	if (fd >= 0)
		close(fd);
	close(dfd);
	return err;
}

void target_unlock(struct target_lock *l)
{
	if (l->fd >= 0) {
		/* unlinked while still held: a tally that opened it meanwhile
		 * sees another inode and tries again */
		unlinkat(l->dir_fd, l->name, 0);
		close(l->fd);
	}
	if (l->dir_fd >= 0)
		close(l->dir_fd);
	l->fd = l->dir_fd = -1;
}
