/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tally's exit statuses, part of the CLI's contract (README.md lists them
 * under each command): each failure class its own, so that scripts can
 * tell them apart. The commands return them; the session's start (session_open)
 * returns the one its failure belongs to.
 */
#ifndef TALLY_EXIT_STATUS_H
#define TALLY_EXIT_STATUS_H

enum tally_exit {
	TALLY_EXIT_OK = 0,
	TALLY_EXIT_FAIL = 1,	   /* anything not below */
	TALLY_EXIT_USAGE = 2,	   /* bad command line */
	TALLY_EXIT_PERM = 3,	   /* not root, or without CAP_BPF and CAP_PERFMON */
	TALLY_EXIT_NO_BTF = 4,	   /* the kernel has no BTF */
	TALLY_EXIT_NO_PROCESS = 5, /* no such PID, or it exited during attach */
	TALLY_EXIT_BUSY = 6,	   /* another tally traces this PID */
	TALLY_EXIT_CMD = 7,	   /* CMD could not be started */
};

#endif /* TALLY_EXIT_STATUS_H */
