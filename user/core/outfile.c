// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* -o FILE of the commands that write a document (outfile.h). */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "outfile.h"

/* ".NAME.tally-XXXXXX" in FILE's directory: hidden, and on FILE's file
 * system, so that rename() is atomic. */
static char *outfile_tmp_name(const char *path)
{
	char *d = strdup(path), *b = strdup(path), *tmp = NULL;

	if (d && b && asprintf(&tmp, "%s/.%s.tally-XXXXXX", dirname(d), basename(b)) < 0)
		tmp = NULL;
	free(d);
	free(b);
	return tmp;
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
