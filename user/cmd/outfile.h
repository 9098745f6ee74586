/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A document's -o FILE: written to a temporary file beside FILE and renamed
 * over it when complete, so that FILE is never half-written (a FIFO or a
 * device is written directly: there is nothing to rename). The temporary
 * file is created before the target is started or attached, so that an
 * unwritable path is said first; its name holds tally's pid, so that the
 * next tally writing FILE removes those a SIGKILL left (183 had piled up in
 * one directory) and leaves a live tally's alone.
 */
#ifndef TALLY_OUTFILE_H
#define TALLY_OUTFILE_H

#include <stdbool.h>
#include <stdio.h>

struct outfile {
	const char *path; /* FILE, as given */
	char *tmp;	  /* the temporary beside it; NULL when written directly */
	FILE *f;
};

/* 0, or -errno (EISDIR for a directory) with o->f NULL. */
int outfile_open(struct outfile *o, const char *path);
/* Close and put in place: 0 or -errno (the temporary is removed). */
int outfile_commit(struct outfile *o);
/* Close and remove the temporary: nothing was written. NULL-safe. */
void outfile_abort(struct outfile *o);

#endif /* TALLY_OUTFILE_H */
