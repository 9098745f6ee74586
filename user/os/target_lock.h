/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* One tally per target (target_lock.c). */
#ifndef TALLY_TARGET_LOCK_H
#define TALLY_TARGET_LOCK_H

#define TARGET_LOCK_DIR "/run/tally"

struct target_lock {
	int fd;	    /* the locked file; -1: none */
	int dir_fd; /* its directory */
	char name[32];
};

/* Lock process pid's file in dir: 0, -EBUSY when another tally holds it, or
 * another negative errno when there is no safe place for it. */
int target_lock(struct target_lock *l, const char *dir, int pid);
/* Remove and release the file (nothing if none is held). */
void target_unlock(struct target_lock *l);

#endif
