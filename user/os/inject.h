/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * --inject (inject.c): load libtally_interpose.so into a running process on
 * glibc's malloc and start it, through ptrace, as a debugger calls a
 * function in the process it debugs.
 */
#ifndef TALLY_CORE_INJECT_H
#define TALLY_CORE_INJECT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* Whether pid may be injected with the library at path `interposer` at
 * all: 0, or -errno with one line (no newline) in why: statically linked,
 * another malloc, another tracer, a seccomp filter, set-uid, the library
 * not there for it (a container's root). */
int inject_check(pid_t pid, const char *interposer, char *why, size_t len);

/* Load `lib` (a path the target can open) into pid and call its
 * tally_interpose_start at sample_rate: 0, or -errno with one line in why
 * (-EBUSY: another tally records it, unless `takeover`: this tally holds
 * the target's lock, and a recording found is a dead tally's). The process
 * runs on unharmed whatever the outcome, and whenever tally dies: its
 * registers are put back and ptrace lets go before this returns. */
int inject_load(pid_t pid, const char *lib, uint64_t sample_rate, bool takeover, char *why,
		size_t len);

#endif /* TALLY_CORE_INJECT_H */
