// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Starting a command held before exec, so that tally's probes are in place
 * before its first instruction, and reading what /proc says about a target.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "target.h"
#include "../util/proc_maps.h"

extern char **environ;

/* SIGPIPE as tally found it, before it ignored it for itself (target.h). */
static struct sigaction sigpipe_at_start;
static bool sigpipe_saved;

void target_ignore_sigpipe(void)
{
	struct sigaction ign = { .sa_handler = SIG_IGN };

	sigemptyset(&ign.sa_mask);
	if (!sigaction(SIGPIPE, &ign, sigpipe_saved ? NULL : &sigpipe_at_start))
		sigpipe_saved = true;
}

/* In the child between fork and exec. tally has no other thread yet when it
 * forks (the command starts before anything else), so setenv's allocation is
 * safe here; the environment is built in the child, tally's own left as it was. */
static void child_run(char *const argv[], const char *preload, char *const env_extra[],
		      const char *stdio, bool out_to_err, int gate, int status)
{
	char c;
	int err;

	if (read(gate, &c, 1) != 1)
		_exit(127); /* tally gave up before releasing us */
	close(gate);
	/* an ignored signal stays ignored across exec: the command gets SIGPIPE
	 * as tally got it, or `a | head` in it would end in write errors */
	if (sigpipe_saved)
		sigaction(SIGPIPE, &sigpipe_at_start, NULL);
	if (stdio) {
		int fd = open(stdio, O_RDWR);
		if (fd < 0 || dup2(fd, 0) < 0 || dup2(fd, 1) < 0 || dup2(fd, 2) < 0)
			goto fail;
		if (fd > 2)
			close(fd);
	} else if (out_to_err && dup2(2, 1) < 0) {
		goto fail;
	}
	if (preload && setenv("LD_PRELOAD", preload, 1))
		goto fail;
	for (int i = 0; env_extra && env_extra[i]; i++)
		if (putenv(env_extra[i]))
			goto fail;
	execvp(argv[0], argv);
fail:
	err = errno;
	if (write(status, &err, sizeof(err)) < 0)
		_exit(127);
	_exit(127);
}

int target_spawn(char *const argv[], const char *preload, char *const env_extra[],
		 const char *stdio, bool out_to_err, struct target_child *c)
{
	int gate[2], status[2], err;
	char *merged = NULL;

	if (pipe2(gate, O_CLOEXEC))
		return -errno;
	if (pipe2(status, O_CLOEXEC)) {
		err = -errno;
		goto close_gate;
	}
	if (preload) {
		/* the child's own LD_PRELOAD stays, after ours */
		const char *old = getenv("LD_PRELOAD");
		if (old && *old) {
			if (asprintf(&merged, "%s:%s", preload, old) < 0) {
				err = -ENOMEM;
				goto close_status;
			}
			preload = merged;
		}
	}
	c->pid = fork();
	if (c->pid < 0) {
		err = -errno;
		goto close_status;
	}
	if (c->pid == 0) {
		close(gate[1]);
		close(status[0]);
		child_run(argv, preload, env_extra, stdio, out_to_err, gate[0], status[1]);
	}
	free(merged);
	close(gate[0]);
	close(status[1]);
	c->gate_fd = gate[1];
	c->status_fd = status[0];
	return 0;

close_status:
	free(merged);
	close(status[0]);
	close(status[1]);
close_gate:
	close(gate[0]);
	close(gate[1]);
	return err;
}

int target_release(struct target_child *c)
{
	int child_err = 0;
	ssize_t n;

	if (write(c->gate_fd, "g", 1) != 1) {
		int err = -errno;
		target_abort(c);
		return err;
	}
	close(c->gate_fd);
	c->gate_fd = -1;
	/* EOF: the exec closed the close-on-exec pipe, so CMD runs */
	n = read(c->status_fd, &child_err, sizeof(child_err));
	close(c->status_fd);
	c->status_fd = -1;
	if (n == (ssize_t)sizeof(child_err)) {
		waitpid(c->pid, NULL, 0);
		return -child_err;
	}
	return 0;
}

void target_abort(struct target_child *c)
{
	if (c->pid > 0) {
		kill(c->pid, SIGKILL);
		waitpid(c->pid, NULL, 0);
		c->pid = -1;
	}
	if (c->gate_fd >= 0)
		close(c->gate_fd);
	if (c->status_fd >= 0)
		close(c->status_fd);
	c->gate_fd = c->status_fd = -1;
}

/* The stat file at path, as target_stat says. */
static const char *stat_at(const char *path, char *buf, size_t len)
{
	FILE *f = fopen(path, "re");

	if (!f)
		return NULL;
	size_t n = fread(buf, 1, len - 1, f);
	fclose(f);
	buf[n] = 0;
	/* "pid (comm) S ...": comm may hold spaces and parentheses */
	char *paren = strrchr(buf, ')');
	if (!paren || paren[1] != ' ') {
		errno = EPROTO;
		return NULL;
	}
	return paren + 1;
}

const char *target_stat(pid_t pid, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/stat", pid);
	return stat_at(path, buf, len);
}

const char *target_task_stat(pid_t pid, uint32_t tid, char *buf, size_t len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/task/%u/stat", pid, tid);
	return stat_at(path, buf, len);
}

bool target_alive(pid_t pid)
{
	char buf[TARGET_STAT_MAX];
	const char *rest = target_stat(pid, buf, sizeof(buf));
	char state = rest ? rest[1] : 0;

	return state && state != 'Z' && state != 'X';
}

/* /proc/PID/stat's flags (the ninth field), 0 when it cannot be read. */
static unsigned long stat_flags(pid_t pid)
{
	char buf[TARGET_STAT_MAX];
	const char *rest = target_stat(pid, buf, sizeof(buf));
	unsigned long flags = 0;

	/* after ") ": state ppid pgrp session tty_nr tpgid flags */
	if (!rest || sscanf(rest, " %*c %*d %*d %*d %*d %*d %lu", &flags) != 1)
		return 0;
	return flags;
}

/* A kernel thread (PF_KTHREAD): no user memory, nothing for tally to trace. */
bool target_is_kthread(pid_t pid)
{
	return stat_flags(pid) & 0x00200000UL;
}

/* Exiting (PF_EXITING: its memory is being torn down, so its maps list
 * part of what it had, or nothing), or gone. */
bool target_exiting(pid_t pid)
{
	return !target_alive(pid) || (stat_flags(pid) & 0x00000004UL);
}

/* The end of the mapping that starts at `start`, or 0. */
static uint64_t map_end(pid_t pid, uint64_t start)
{
	struct maps_iter it;
	struct maps_line l;
	uint64_t end = 0;

	if (maps_open_pid(&it, pid))
		return 0;
	while (!end && maps_next(&it, &l) > 0)
		if (l.fields >= MAPS_END && l.start == start)
			end = l.end;
	maps_close(&it);
	return end;
}

int target_find_lib(pid_t pid, const char *name, char *path, size_t len, uint64_t *bias)
{
	char maps[64];
	uint64_t end;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	int err = target_maps_find_lib(maps, name, path, len, bias);
	if (err || !maps_path_deleted(path, strlen(path)))
		return err ? err : target_reach(pid, path, len);
	/* deleted on disk (a package upgraded under a running process): the
	 * file is still there behind its mapping, and map_files opens it, in
	 * any mount namespace */
	end = map_end(pid, *bias);
	if (!end)
		return -ENOENT;
	if ((size_t)snprintf(path, len, "/proc/%d/map_files/%" PRIx64 "-%" PRIx64, pid, *bias,
			     end) >= len)
		return -ENAMETOOLONG;
	return 0;
}

int target_map_span(pid_t pid, uint64_t start, uint64_t *end)
{
	unsigned int want_major = 0, want_minor = 0;
	uint64_t want_ino = 0;
	struct maps_iter it;
	struct maps_line l;
	int err;

	err = maps_open_pid(&it, pid);
	if (err)
		return err;
	*end = 0;
	while (maps_next(&it, &l) > 0) {
		if (l.fields < MAPS_INODE)
			continue;
		if (l.start == start && l.inode) {
			want_major = l.major;
			want_minor = l.minor;
			want_ino = l.inode;
		}
		/* the file's mappings follow one another (gaps between them
		 * are reserved anonymous memory, part of the span) */
		if (want_ino && l.inode == want_ino && l.major == want_major &&
		    l.minor == want_minor)
			*end = l.end;
	}
	maps_close(&it);
	return *end ? 0 : -ENOENT;
}

/* Whether the mapping's file is the library `name`: "libc.so.6" for
 * "libc.so", but not "libtally_alloc.so" for "libtally.so"; a file deleted
 * since it was mapped too. */
static bool lib_named(const char *file, const char *name)
{
	const char *base = strrchr(file, '/') + 1;
	size_t nl = strlen(name);

	return !strncmp(base, name, nl) &&
	       (!base[nl] || base[nl] == '.' || !strcmp(base + nl, MAPS_DELETED));
}

/* The longest line that names a library: the kernel's line for the longest
 * path (PATH_MAX - 1 bytes), deleted, is about 4180 bytes. A longer one (a
 * path with newlines, each written as the four bytes "\012") names no file
 * and is skipped whole. (Lines were once read into a buffer this long, and
 * a piece past it read as a line: a path could fake a mapping there.) */
#define LIB_LINE_MAX (TARGET_PATH_MAX + 127)

int target_maps_find_lib(const char *maps, const char *name, char *path, size_t len, uint64_t *bias)
{
	struct maps_iter it;
	struct maps_line l;
	int err;

	err = maps_open(&it, maps);
	if (err)
		return err;
	err = -ENOENT;
	while (maps_next(&it, &l) > 0) {
		if (l.fields < MAPS_INODE || l.len > LIB_LINE_MAX || l.path[0] != '/' ||
		    !lib_named(l.path, name))
			continue;
		/* a file mapped since it was replaced comes first; one deleted
		 * is the library when no other is */
		if (l.offset != 0 || (l.deleted && err != -ENOENT))
			continue;
		if (l.path_len >= len) {
			err = -ENAMETOOLONG;
			break;
		}
		memcpy(path, l.path, l.path_len + 1);
		/* shared objects are linked at 0: the first mapping is the bias */
		*bias = l.start;
		err = l.deleted ? 1 : 0;
		if (!l.deleted)
			break;
	}
	maps_close(&it);
	return err > 0 ? 0 : err;
}

int target_comm(pid_t pid, pid_t tid, char *buf, size_t len)
{
	char path[64];
	ssize_t n;
	int fd, err = 0;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/comm", pid, tid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	n = read(fd, buf, len - 1);
	if (n < 0) {
		err = -errno;
		n = 0;
	}
	buf[n] = 0;
	buf[strcspn(buf, "\n")] = 0;
	close(fd);
	return err;
}

int target_threads(pid_t pid, pid_t *tids, int max)
{
	char path[64];
	struct dirent *d;
	int n = 0;
	DIR *dir;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	dir = opendir(path);
	if (!dir)
		return -errno;
	while ((d = readdir(dir)) && n < max) {
		char *end;
		long t = strtol(d->d_name, &end, 10);
		if (*end || t <= 0)
			continue;
		tids[n++] = (pid_t)t;
	}
	closedir(dir);
	return n;
}

int target_children(pid_t pid, pid_t *out, int max)
{
	pid_t tids[256];
	int nt = target_threads(pid, tids, 256), n = 0;

	if (nt < 0)
		return nt;
	for (int i = 0; i < nt && n < max; i++) {
		char path[96], buf[4096];
		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, tids[i]);
		int fd = open(path, O_RDONLY | O_CLOEXEC);
		if (fd < 0)
			continue; /* the thread has gone */
		ssize_t len = read(fd, buf, sizeof(buf) - 1);
		close(fd);
		buf[len > 0 ? len : 0] = 0;
		for (char *c = buf, *end; *c && n < max; c = end) {
			long v = strtol(c, &end, 10);
			if (end == c)
				break;
			if (v > 0)
				out[n++] = (pid_t)v;
		}
	}
	return n;
}

int target_alloc_resident(pid_t pid, uint64_t *bytes)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/smaps", pid);
	return target_smaps_alloc_resident(path, bytes);
}

int target_smaps_alloc_resident(const char *smaps, uint64_t *bytes)
{
	uint64_t rss = 0, total = 0;
	bool have_rss = false;
	char *line = NULL;
	size_t cap = 0;
	FILE *f;

	f = fopen(smaps, "re");
	if (!f)
		return -errno;
	/* each mapping's Rss comes before its VmFlags, which close the entry.
	 * Whole lines: a mapping's path is the target's to choose, and a line
	 * read in pieces would let its tail pass for an Rss line of its own. */
	while (getline(&line, &cap, f) > 0) {
		unsigned long kb;
		if (sscanf(line, "Rss: %lu kB", &kb) == 1) {
			rss = kb * 1024;
			have_rss = true;
		} else if (!strncmp(line, "VmFlags:", 8)) {
			if (have_rss && strstr(line, " nh") && strstr(line, " rr"))
				total += rss;
			have_rss = false;
		}
	}
	free(line);
	fclose(f);
	*bytes = total;
	return 0;
}

/* path opened for libelf: 0 (close *fd after elf_end), or -errno. */
static int elf_open(const char *path, int *fd, Elf **elf)
{
	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	*fd = open(path, O_RDONLY | O_CLOEXEC);
	if (*fd < 0)
		return -errno;
	*elf = elf_begin(*fd, ELF_C_READ, NULL);
	if (!*elf) {
		close(*fd);
		return -EINVAL;
	}
	return 0;
}

int target_elf_symbols(const char *path, const char *const names[], size_t n, uint64_t addr[])
{
	Elf_Scn *scn = NULL;
	int fd, err;
	Elf *elf;

	memset(addr, 0, n * sizeof(addr[0]));
	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		if (!gelf_getshdr(scn, &sh) ||
		    (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
			continue;
		Elf_Data *data = elf_getdata(scn, NULL);
		size_t count = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
		for (size_t i = 0; data && i < count; i++) {
			GElf_Sym s;
			const char *nm;
			/* defined here, not merely imported */
			if (!gelf_getsym(data, (int)i, &s) || s.st_shndx == SHN_UNDEF ||
			    !s.st_value)
				continue;
			nm = elf_strptr(elf, sh.sh_link, s.st_name);
			for (size_t k = 0; nm && k < n; k++)
				if (!addr[k] && !strcmp(nm, names[k]))
					addr[k] = s.st_value;
		}
	}
	elf_end(elf);
	close(fd);
	return err;
}

int target_elf_file_offsets(const char *path, uint64_t addr[], size_t n)
{
	size_t nph = 0;
	int fd, err;
	Elf *elf;

	err = elf_open(path, &fd, &elf);
	if (err)
		return err;
	if (elf_getphdrnum(elf, &nph))
		err = -EINVAL;
	for (size_t k = 0; !err && k < n; k++) {
		bool found = !addr[k]; /* 0: not there, stays 0 */
		for (size_t i = 0; !found && i < nph; i++) {
			GElf_Phdr ph;
			if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
			    addr[k] < ph.p_vaddr || addr[k] >= ph.p_vaddr + ph.p_filesz)
				continue;
			addr[k] = addr[k] - ph.p_vaddr + ph.p_offset;
			found = true;
		}
		if (!found)
			err = -ENOEXEC;
	}
	elf_end(elf);
	close(fd);
	return err;
}

int target_lib_symbol(pid_t pid, const char *lib, const char *sym, char *path, size_t len,
		      uint64_t *addr)
{
	uint64_t bias, a;
	int err = target_find_lib(pid, lib, path, len, &bias);

	if (!err)
		err = target_elf_symbol(path, sym, &a);
	if (!err)
		*addr = bias + a;
	return err;
}

int target_lib_poke(pid_t pid, const char *lib, const char *const names[], const uint64_t v[],
		    size_t n)
{
	char path[TARGET_PATH_MAX];
	uint64_t bias, addr[8];
	int err = n > 8 ? -EINVAL : target_find_lib(pid, lib, path, sizeof(path), &bias);

	if (!err)
		err = target_elf_symbols(path, names, n, addr);
	for (size_t k = 0; !err && k < n; k++) {
		if (!addr[k])
			continue;
		struct iovec local = { (void *)&v[k], sizeof(v[k]) };
		struct iovec remote = { (void *)(uintptr_t)(bias + addr[k]), sizeof(v[k]) };
		if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(v[k]))
			err = -errno;
	}
	return err;
}

int target_elf_symbol(const char *path, const char *sym, uint64_t *addr)
{
	int err = target_elf_symbols(path, &sym, 1, addr);

	return err ? err : *addr ? 0 : -ENOENT;
}
