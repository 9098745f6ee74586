/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The traced process as the OS shows it: starting one held at the door until
 * tally has attached, and what /proc says about a running one (its libraries,
 * threads, names and resident memory).
 */
#ifndef TALLY_TARGET_H
#define TALLY_TARGET_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define TARGET_PATH_MAX 4096

/* A command started by tally and held before exec until target_release(). */
struct target_child {
	pid_t pid;
	int gate_fd;   /* write end: one byte lets the child exec */
	int status_fd; /* read end: the child's errno if exec failed, EOF if it ran */
};

/* Fork CMD (argv[0] looked up in PATH). preload: a colon-separated list put
 * in front of the child's LD_PRELOAD; NULL to leave it alone. env_extra:
 * NULL-terminated "NAME=VALUE" list set in the child, or NULL. stdio: a file
 * for the child's stdin, stdout and stderr, or NULL for tally's own;
 * out_to_err: the child's stdout is tally's stderr (tally's stdout carries a
 * document). */
int target_spawn(char *const argv[], const char *preload, char *const env_extra[],
		 const char *stdio, bool out_to_err, struct target_child *c);
/* Let the child exec; -errno (the exec's) when CMD could not be run. */
int target_release(struct target_child *c);
/* Kill and reap a child that was never released. */
void target_abort(struct target_child *c);

bool target_alive(pid_t pid);
bool target_is_kthread(pid_t pid);
/* The file a mapping of the target comes from, whose name is `name` (e.g.
 * "libtally_alloc.so"); its load bias in *bias. -ENOENT when not mapped. */
int target_find_lib(pid_t pid, const char *name, char *path, size_t len, uint64_t *bias);
/* The same from a file in /proc/PID/maps's format at `maps` (for tests). */
int target_maps_find_lib(const char *maps, const char *name, char *path, size_t len,
			 uint64_t *bias);
int target_comm(pid_t pid, pid_t tid, char *buf, size_t len);
/* The target's thread ids; returns how many (at most max) or -errno. */
int target_threads(pid_t pid, pid_t *tids, int max);
/* Rss of the allocator's mappings: those whose VmFlags carry both "nh" and
 * "rr" (alloc/os.c marks every mapping so). */
int target_alloc_resident(pid_t pid, uint64_t *bytes);
/* The same from a file in /proc/PID/smaps's format at `smaps` (for tests). */
int target_smaps_alloc_resident(const char *smaps, uint64_t *bytes);
/* Address of symbol `sym` defined in the ELF file `path` (symtab or dynsym). */
int target_elf_symbol(const char *path, const char *sym, uint64_t *addr);
/* The same for n symbols at once: addr[k] is 0 where names[k] is not defined. */
int target_elf_symbols(const char *path, const char *const names[], size_t n, uint64_t addr[]);

#endif /* TALLY_TARGET_H */
