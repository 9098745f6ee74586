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
/* tally ignores SIGPIPE (a reader that goes away is a write error it
 * reports); a command it starts after this gets SIGPIPE as tally got it. */
void target_ignore_sigpipe(void);
int target_spawn(char *const argv[], const char *preload, char *const env_extra[],
		 const char *stdio, bool out_to_err, struct target_child *c);
/* Let the child exec; -errno (the exec's) when CMD could not be run. */
int target_release(struct target_child *c);
/* Kill and reap a child that was never released. */
void target_abort(struct target_child *c);

bool target_alive(pid_t pid);
bool target_is_kthread(pid_t pid);
/* It is exiting (its maps no longer what it had) or gone. */
bool target_exiting(pid_t pid);
/* The file a mapping of the target comes from, whose name is `name` (e.g.
 * "libtally_alloc.so"), as tally can open it (target_reach); its load bias
 * in *bias. -ENOENT when not mapped. */
int target_find_lib(pid_t pid, const char *name, char *path, size_t len, uint64_t *bias);
/* The same from a file in /proc/PID/maps's format at `maps` (for tests). */
/* The end of the last mapping of the file whose mapping starts at start. */
int target_map_span(pid_t pid, uint64_t start, uint64_t *end);
int target_maps_find_lib(const char *maps, const char *name, char *path, size_t len,
			 uint64_t *bias);
int target_comm(pid_t pid, pid_t tid, char *buf, size_t len);

/* target_cmdline.c: its command line as ps shows it, arguments joined by
 * spaces, bytes other than printable ASCII (and the backslash) as \xNN, cut
 * to size - 1 bytes with "..." at the end; "" for a kernel thread. 0 or
 * -errno. TARGET_CMDLINE_READ: what is read of /proc/PID/cmdline. */
#define TARGET_CMDLINE_READ 4096
int target_cmdline(pid_t pid, char *out, size_t size);
/* The same from n bytes of /proc/PID/cmdline's format: the length written. */
size_t target_cmdline_format(const char *raw, size_t n, char *out, size_t size);
/* target_cmdline into out only where it reads one (a process past its exit
 * reads ""): out keeps what it showed last. */
int target_cmdline_keep(pid_t pid, char *out, size_t size);

/* target_ns.c: where the target lives. */
/* The target sees the files tally sees (one mount namespace). */
bool target_same_mount_ns(pid_t pid);
/* A path as the target sees it (from its maps), made one tally can open:
 * through /proc/PID/root when the target is in a mount namespace of its own
 * (a container). 0, or -ENAMETOOLONG. */
int target_reach(pid_t pid, char *path, size_t len);
/* Its parent: 0 or -errno. */
int target_ppid(pid_t pid, pid_t *ppid);
/* Its PID inside its own PID namespace (the last of NSpid); pid when the
 * same, or not known. */
pid_t target_ns_pid(pid_t pid);
/* The container id a cgroup path carries (64 hex digits in a component, as
 * Docker, containerd, CRI-O and podman name them); false when none. out
 * takes 65 bytes. */
#define TARGET_CONTAINER_MAX 65
bool target_container_id(const char *path, char *out, size_t len);
/* Its cgroup v2 path (the "0::" line of /proc/PID/cgroup) and container id
 * ("" when none): 0, -ENOENT without a v2 path, or -errno. _file: the same
 * from a file of that format. */
int target_cgroup(pid_t pid, char *cgroup, size_t len, char *container, size_t clen);
int target_cgroup_file(const char *file, char *cgroup, size_t len, char *container, size_t clen);
/* The target's thread ids; returns how many (at most max) or -errno. */
int target_threads(pid_t pid, pid_t *tids, int max);

/* A thread's scheduler state ('R' running or runnable, 'S', 'D', ...) and the
 * CPU time it has had (schedstat), or gone: no such thread of pid (ended,
 * or a number of another pid namespace). 0 or -errno (target_run.c). */
struct thread_run {
	uint64_t run_ns;
	char state;
	bool gone;
};
int target_thread_run(pid_t pid, uint32_t tid, struct thread_run *out);
/* Only its state (0: no such thread). 0 or -errno. */
int target_thread_state(pid_t pid, uint32_t tid, char *state);
/* The processes pid's threads started that still run (/proc's children
 * lists): how many, at most max, or -errno. */
int target_children(pid_t pid, pid_t *out, int max);
/* Rss of the allocator's mappings: those whose VmFlags carry both "nh" and
 * "rr" (alloc/os.c marks every mapping so). */
int target_alloc_resident(pid_t pid, uint64_t *bytes);
/* The same from a file in /proc/PID/smaps's format at `smaps` (for tests). */
int target_smaps_alloc_resident(const char *smaps, uint64_t *bytes);
/* Address of symbol `sym` defined in the ELF file `path` (symtab or dynsym). */
int target_elf_symbol(const char *path, const char *sym, uint64_t *addr);
/* Where symbol sym of the library `lib` (as target_find_lib finds it, its
 * path into path) is in process pid: 0 and *addr, or -errno. */
int target_lib_symbol(pid_t pid, const char *lib, const char *sym, char *path, size_t len,
		      uint64_t *addr);
/* Write v[k] over the 8-byte variable names[k] of library `lib` in process
 * pid, each that it defines: 0, or -errno (-ENOENT: none defined). */
int target_lib_poke(pid_t pid, const char *lib, const char *const names[], const uint64_t v[],
		    size_t n);
/* The same for n symbols at once: addr[k] is 0 where names[k] is not defined. */
int target_elf_symbols(const char *path, const char *const names[], size_t n, uint64_t addr[]);
/* Those addresses (0: none) as offsets in the file, as a uprobe wants them. */
int target_elf_file_offsets(const char *path, uint64_t addr[], size_t n);

#endif /* TALLY_TARGET_H */
