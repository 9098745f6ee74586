// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* -o FILE of the commands that write a document (outfile.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* ".NAME.tally-PID-XXXXXX" in FILE's directory: hidden, and on FILE's file
 * system, so that rename() is atomic; PID, tally's, says whose it is. */
static char *outfile_tmp_name(const char *path)
{
	char *d = strdup(path), *b = strdup(path), *tmp = NULL;

	if (d && b &&
	    asprintf(&tmp, "%s/.%s.tally-%d-XXXXXX", dirname(d), basename(b), (int)getpid()) < 0)
		tmp = NULL;
	free(d);
	free(b);
	return tmp;
}

/* A process's comm into buf ("" when it is gone). */
static void proc_comm(const char *pid, char *buf, size_t len)
{
	char path[64];
	FILE *f;

	buf[0] = 0;
	snprintf(path, sizeof(path), "/proc/%s/comm", pid);
	f = fopen(path, "re");
	if (f && !fgets(buf, (int)len, f))
		buf[0] = 0;
	if (f)
		fclose(f);
}

/* Another live process by tally's name (a tally of before the owner's pid
 * was in the name may be writing one of the temporaries without it). */
static bool other_tally_alive(const char *self)
{
	char comm[32], me[16];
	DIR *d = opendir("/proc");
	struct dirent *e;
	bool found = false;

	snprintf(me, sizeof(me), "%d", (int)getpid());
	while (d && !found && (e = readdir(d))) {
		if (e->d_name[0] < '1' || e->d_name[0] > '9' || !strcmp(e->d_name, me))
			continue;
		proc_comm(e->d_name, comm, sizeof(comm));
		found = !strcmp(comm, self);
	}
	if (d)
		closedir(d);
	return !d || found;
}

/* Whether temporary `rest` (past ".NAME.tally-") may belong to a live tally:
 * its owner's pid runs a program by tally's name; the old name without a
 * pid, while any other tally runs. */
static bool owner_may_live(const char *rest, const char *self, int *others)
{
	char pid[16], comm[32];
	size_t n = strspn(rest, "0123456789");

	if (n == 0 && strlen(rest) == 6) {
		if (*others < 0)
			*others = other_tally_alive(self);
		return *others;
	}
	if (n == 0 || n >= sizeof(pid) || rest[n] != '-' || strlen(rest + n + 1) != 6)
		return true; /* not one of ours */
	memcpy(pid, rest, n);
	pid[n] = 0;
	if (atoi(pid) == (int)getpid())
		return true;
	proc_comm(pid, comm, sizeof(comm));
	return !strcmp(comm, self);
}

/* The temporaries a killed tally (SIGKILL: no handler runs) left beside
 * FILE: removed, those of a live tally kept. Only regular files of ours. */
static void outfile_sweep(const char *path)
{
	char *d = strdup(path), *b = strdup(path), *prefix = NULL, self[32];
	int others = -1;
	DIR *dir = NULL;
	struct dirent *e;
	struct stat st;

	proc_comm("self", self, sizeof(self));
	if (d && b && asprintf(&prefix, ".%s.tally-", basename(b)) >= 0)
		dir = opendir(dirname(d));
	while (dir && (e = readdir(dir))) {
		if (strncmp(e->d_name, prefix, strlen(prefix)) ||
		    owner_may_live(e->d_name + strlen(prefix), self, &others) ||
		    fstatat(dirfd(dir), e->d_name, &st, AT_SYMLINK_NOFOLLOW) ||
		    !S_ISREG(st.st_mode) || st.st_uid != geteuid())
			continue;
		unlinkat(dirfd(dir), e->d_name, 0);
	}
	if (dir)
		closedir(dir);
	free(prefix);
	free(d);
	free(b);
}

int outfile_open(struct outfile *o, const char *path)
{
	struct stat st;
	mode_t mask;
	int fd, err;

	memset(o, 0, sizeof(*o));
	o->path = path;
	if (!*path)
		return -ENOENT;
	if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		return -EISDIR;
	if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		fd = open(path, O_WRONLY | O_CLOEXEC);
		if (fd < 0)
			return -errno;
		goto stream;
	}
	outfile_sweep(path);
	o->tmp = outfile_tmp_name(path);
	if (!o->tmp)
		return -ENOMEM;
	fd = mkostemp(o->tmp, O_CLOEXEC);
	if (fd < 0) {
		err = -errno;
		free(o->tmp);
		o->tmp = NULL;
		return err;
	}
	/* mkstemp makes it 0600: FILE gets what a plain create would give it */
	mask = umask(0);
	umask(mask);
	if (fchmod(fd, 0666 & ~mask)) {
		err = -errno;
		goto fail;
	}
stream:
	o->f = fdopen(fd, "w");
	if (o->f)
		return 0;
	err = -errno;
fail:
	close(fd);
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return err;
}

int outfile_commit(struct outfile *o)
{
	int err = 0;

	if (!o->f)
		return -EBADF;
	errno = 0;
	if (fflush(o->f) || ferror(o->f) || (o->tmp && fsync(fileno(o->f))))
		err = errno ? -errno : -EIO;
	if (fclose(o->f) && !err)
		err = -errno;
	o->f = NULL;
	if (o->tmp && !err && rename(o->tmp, o->path))
		err = -errno;
	if (o->tmp && err)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
	return err;
}

void outfile_abort(struct outfile *o)
{
	if (o->f)
		fclose(o->f);
	o->f = NULL;
	if (o->tmp)
		unlink(o->tmp);
	free(o->tmp);
	o->tmp = NULL;
}
