/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Which malloc a running process allocates with (target_alloc.c), so that
 * one tally cannot trace is named, not shown as glibc's with nothing in it.
 */
#ifndef TALLY_CORE_TARGET_ALLOC_H
#define TALLY_CORE_TARGET_ALLOC_H

#include <stddef.h>
#include <sys/types.h>

/* Which malloc process pid allocates with, in *name: "tally", "jemalloc",
 * "tcmalloc", "mimalloc", "hoard", "snmalloc" (its library mapped, or the
 * program linked with it), "own" (the program defines malloc itself),
 * "musl", "static" (no shared C library: the program's own malloc) or
 * "glibc"; path: the file that holds it. 0, or -errno reading its maps. */
int target_allocator(pid_t pid, const char **name, char *path, size_t len);

/* Whether tally traces a heap of that malloc: its own, and glibc's. */
static inline int target_allocator_traced(const char *name)
{
	return name[0] == 't' ? name[1] == 'a' : name[0] == 'g';
}

#endif /* TALLY_CORE_TARGET_ALLOC_H */
