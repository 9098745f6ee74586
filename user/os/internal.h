/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What the files of user/os/ (the target as the OS shows it) share and
 * their callers do not need. The layer's face to the rest of tally is
 * target.h, and a header of each file's name.
 */
#ifndef TALLY_TARGET_INTERNAL_H
#define TALLY_TARGET_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* /proc/PID/stat from just after its "(comm)", read into buf; NULL when it
 * cannot be read (errno says why) or is malformed (target.c; target_ns.c
 * reads the parent from it). */
#define TARGET_STAT_MAX 512
const char *target_stat(pid_t pid, char *buf, size_t len);
/* The same of one thread of pid (target_run.c). */
const char *target_task_stat(pid_t pid, uint32_t tid, char *buf, size_t len);

#endif /* TALLY_TARGET_INTERNAL_H */
