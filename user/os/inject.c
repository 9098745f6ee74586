// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject: libtally_interpose.so loaded into a running process, as gdb
 * and heaptrack do it, but safe against tally's death at any instant
 * (inject_call.c): tally seizes the process's main thread with ptrace,
 * waits for a point where the thread holds none of glibc's locks, writes a
 * signal frame of its registers, vector state and mask below its stack, and
 * makes the thread call dlopen(lib) and then the library's
 * tally_interpose_begin, each returning into rt_sigreturn on that frame
 * (a system call the thread was stopped in is issued again, as after a
 * signal with SA_RESTART); it lets go while the start runs, and reads its
 * outcome in the library's memory. The other threads run throughout.
 *
 * Never by surprise: the checks refuse a process that another tracer holds,
 * that is set-uid, has no glibc, allocates with another malloc, runs under
 * a seccomp filter (which may forbid what dlopen does) or in another mount
 * namespace (the library's path means nothing there).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "../../bpf/contract/interpose_abi.h"
#include "inject.h"
#include "inject_call.h"
#include "target.h"
#include "target_alloc.h"

#define INTERPOSE_LIB "libtally_interpose.so"

static int say(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}

/* The numbers on /proc/PID/status's line `key` (as "Uid:"), up to n of
 * them into v: how many. The key is matched at a line's start ("Gid:" is
 * not "Tgid:"); status begins with "Name:", never asked for. */
static size_t status_numbers(const char *status, const char *key, unsigned long *v, size_t n)
{
	char at[32];
	const char *p;
	size_t k = 0;

	snprintf(at, sizeof(at), "\n%s", key);
	if (!(p = strstr(status, at)))
		return 0;
	for (p += strlen(at); k < n; k++) {
		char *end;

		p += strspn(p, " \t");
		if (*p < '0' || *p > '9')
			break;
		v[k] = strtoul(p, &end, 10);
		p = end;
	}
	return k;
}

/* The number after `key` in /proc/PID/status; -1 when absent. */
static long status_field(const char *status, const char *key)
{
	unsigned long v;

	return status_numbers(status, key, &v, 1) ? (long)v : -1;
}

/* What /proc/PID/status says: another tracer, seccomp. The text is read
 * into status (size bytes) for check_readable too. */
static int check_status(pid_t pid, char *status, size_t size, char *why, size_t len)
{
	char path[64];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return say(why, len, -errno, "cannot read %s: %s", path, strerror(errno));
	n = read(fd, status, size - 1);
	close(fd);
	if (n <= 0)
		return say(why, len, -EIO, "cannot read %s", path);
	status[n] = 0;
	long tracer = status_field(status, "TracerPid:");
	if (tracer > 0)
		return say(why, len, -EBUSY,
			   "process %d is already traced by process %ld (a debugger, strace?): "
			   "--inject needs ptrace",
			   pid, tracer);
	/* a shadow stack (CET) takes the calls' return into rt_sigreturn for
	 * an attack: the process would die of it */
	const char *cet = strstr(status, "x86_Thread_features:");
	if (cet && strstr(cet, "shstk") && strstr(cet, "shstk") < strchrnul(cet, '\n'))
		return say(why, len, -ENOTSUP,
			   "process %d runs with a shadow stack (CET), which --inject's calls "
			   "into it would break",
			   pid);
	long seccomp = status_field(status, "Seccomp:");
	const char *allow = getenv("TALLY_INJECT_SECCOMP");
	if (seccomp > 0 && !(seccomp == 2 && allow && !strcmp(allow, "allow")))
		return say(
			why, len, -EPERM,
			"process %d runs under seccomp (mode %ld), which may forbid what loading "
			"a library takes (openat, mmap, mprotect); TALLY_INJECT_SECCOMP=allow "
			"tries anyway where the filter is known to allow them",
			pid, seccomp);
	return 0;
}

/* Its namespaces: a thread it can start, the library it can open. */
static int check_namespaces(pid_t pid, const char *interposer, char *why, size_t len)
{
	char path[64], ns[64], ns_kids[64], there[4096 + 64];
	struct stat mine, theirs;

	/* after unshare(CLONE_NEWPID) a process makes no more threads (its
	 * children go to the new namespace: clone refuses CLONE_THREAD), and
	 * the interposer needs one */
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	ssize_t a = readlink(path, ns, sizeof(ns) - 1);
	snprintf(path, sizeof(path), "/proc/%d/ns/pid_for_children", pid);
	ssize_t b = readlink(path, ns_kids, sizeof(ns_kids) - 1);
	if (a > 0 && b > 0 && (a != b || memcmp(ns, ns_kids, (size_t)a)))
		return say(why, len, -EINVAL,
			   "process %d has unshared the PID namespace of its children (unshare "
			   "--pid): it cannot start the thread --inject needs; inject its child",
			   pid);
	/* the library is opened by path in the process: it must be there the
	 * same file (another mount namespace that shares the files, as
	 * `unshare --mount` leaves it, is fine; a container's root is not) */
	snprintf(there, sizeof(there), "/proc/%d/root%s", pid, interposer);
	if (stat(interposer, &mine) || stat(there, &theirs) || mine.st_dev != theirs.st_dev ||
	    mine.st_ino != theirs.st_ino)
		return say(why, len, -EXDEV,
			   "process %d does not see %s (a container, or another root): --inject "
			   "cannot load its library there yet",
			   pid, interposer);
	return 0;
}

/* Whether those credentials have `bit` (4 read, 1 search) on st by its mode
 * bits (an ACL that grants more is not read: the refusal then names the
 * path, and the user can open it). */
static bool may(const struct stat *st, unsigned long uid, unsigned long gid, const unsigned long *g,
		size_t ng, unsigned bit)
{
	bool in_group = st->st_gid == gid;

	if (uid == 0)
		return true;
	if (st->st_uid == uid)
		return (st->st_mode >> 6) & bit;
	for (size_t i = 0; i < ng && !in_group; i++)
		in_group = g[i] == st->st_gid;
	return ((in_group ? st->st_mode >> 3 : st->st_mode) & bit) != 0;
}

/* The process opens the library itself, as the user it runs as (an nginx
 * worker runs as nobody): each directory on the path searchable for it and
 * the file readable, else dlopen fails there with nothing tally can say. */
static int check_readable(pid_t pid, const char *status, const char *interposer, char *why,
			  size_t len)
{
	unsigned long ids[2], groups[256]; /* Uid: and Gid: are real, effective, ... */
	char part[4096];
	struct stat st;

	if (status_numbers(status, "Uid:", ids, 2) < 2 || strlen(interposer) >= sizeof(part))
		return 0; /* not known: dlopen says */
	unsigned long uid = ids[1];
	if (status_numbers(status, "Gid:", ids, 2) < 2)
		return 0;
	unsigned long gid = ids[1];
	size_t ng = status_numbers(status, "Groups:", groups, sizeof(groups) / sizeof(groups[0]));
	/* every directory from the root down, searched; then the file, read */
	for (const char *c = interposer; c; c = strchr(c + 1, '/')) {
		snprintf(part, sizeof(part), "%.*s", c == interposer ? 1 : (int)(c - interposer),
			 interposer);
		if (stat(part, &st))
			return 0;
		if (!may(&st, uid, gid, groups, ng, 1))
			return say(
				why, len, -EACCES,
				"process %d runs as uid %lu, which cannot search %s: --inject needs "
				"tally's libraries where that user can read them",
				pid, uid, part);
	}
	if (!stat(interposer, &st) && !may(&st, uid, gid, groups, ng, 4))
		return say(
			why, len, -EACCES,
			"process %d runs as uid %lu, which cannot read %s: --inject needs tally's "
			"libraries where that user can read them",
			pid, uid, interposer);
	return 0;
}

/* Its program: not set-uid, on glibc's malloc. */
static int check_program(pid_t pid, char *why, size_t len)
{
	char path[64], lib[TARGET_PATH_MAX];
	const char *name = "glibc";
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (stat(path, &st))
		return say(why, len, -errno, "cannot stat %s: %s", path, strerror(errno));
	if (st.st_mode & (S_ISUID | S_ISGID))
		return say(
			why, len, -EPERM,
			"process %d runs a set-user-ID or set-group-ID program: --inject refuses "
			"it",
			pid);
	target_allocator(pid, &name, lib, sizeof(lib));
	if (!strcmp(name, "static") || !strcmp(name, "musl"))
		return say(why, len, -ENOTSUP,
			   "process %d has no glibc (%s): --inject needs glibc's malloc and "
			   "dlopen, and tally does not trace its heap",
			   pid, name[0] == 's' ? "statically linked" : "musl's C library");
	if (strcmp(name, "glibc"))
		return say(why, len, -ENOTSUP,
			   "process %d allocates with %s (%s), not glibc's malloc: --inject is "
			   "for glibc's, and tally does not trace %s's heap",
			   pid, name, lib, name);
	return 0;
}

int inject_check(pid_t pid, const char *interposer, char *why, size_t len)
{
	char status[4096];
	int err = check_status(pid, status, sizeof(status), why, len);

	if (!err)
		err = check_namespaces(pid, interposer, why, len);
	if (!err)
		err = check_program(pid, why, len);
	if (!err)
		err = check_readable(pid, status, interposer, why, len);
	/* one that exits meanwhile lists part of its maps, or none (it has not
	 * lost glibc) */
	if (err && target_exiting(pid))
		err = say(why, len, -ESRCH, "process %d exited during attach", pid);
	return err;
}

/* ---- the load ---- */

#define OUTCOME_WAIT_MS 20000 /* a start that takes longer is stuck */

/* The start's outcome, once the library has written it beside our token. */
static int start_outcome(pid_t pid, uint64_t at, uint32_t token, char *why, size_t len)
{
	uint64_t v = 0;
	int err = 0;

	for (int ms = 0; ms < OUTCOME_WAIT_MS; ms++) {
		if ((err = ic_peek(pid, at, &v, sizeof(v))) || v >> 32 == token)
			break;
		struct timespec ts = { 0, 1000000 };
		nanosleep(&ts, NULL);
	}
	if (err || v >> 32 != token)
		return say(why, len, err ? err : -ETIMEDOUT,
			   "process %d: no outcome from the interposer's start: %s", pid,
			   strerror(err ? -err : ETIMEDOUT));
	int res = (int32_t)(uint32_t)v;
	if (res == -EALREADY)
		return say(why, len, -EBUSY,
			   "process %d: another tally records its calls already (--inject)", pid);
	if (res == -ENOTCONN)
		return say(
			why, len, -ENOTCONN,
			"process %d: the interposer does not see tally's probe (its semaphore is "
			"down)",
			pid);
	if (res < 0)
		return say(why, len, res, "process %d: the interposer could not start: %s", pid,
			   strerror(-res));
	return 0;
}

/* dlopen(lib) in the thread, followed to its return: 0 once lib is mapped. */
static int open_in(struct stopped *s, const char *lib, char *why, size_t len)
{
	char path[4096];
	uint64_t dlopen_at, bias;
	int err = target_lib_symbol(s->pid, "libc.so.6", "dlopen", path, sizeof(path), &dlopen_at);

	if (err)
		return say(why, len, err, "process %d: no dlopen in its glibc: %s", s->pid,
			   strerror(-err));
	err = ic_call(s, dlopen_at, s->data, 2 /* RTLD_NOW */, 0);
	if (err)
		return say(why, len, err, "process %d: calling dlopen: %s", s->pid, strerror(-err));
	/* its handle went where every register went, back: the maps say */
	if (target_find_lib(s->pid, INTERPOSE_LIB, path, sizeof(path), &bias) < 0)
		return say(why, len, -ENOEXEC,
			   "process %d: dlopen(%s) failed there (its dlerror() says why)", s->pid,
			   lib);
	return 0;
}

static int load_in(struct stopped *s, const char *lib, uint64_t sample_rate, bool takeover,
		   char *why, size_t len)
{
	char path[4096];
	uint64_t begin_at, outcome_at, bias;
	struct timespec now;
	int err = 0;

	if (target_find_lib(s->pid, INTERPOSE_LIB, path, sizeof(path), &bias) < 0)
		err = open_in(s, lib, why, len);
	if (err)
		return err;
	if (target_lib_symbol(s->pid, INTERPOSE_LIB, TALLY_INTERPOSE_BEGIN, path, sizeof(path),
			      &begin_at) ||
	    target_lib_symbol(s->pid, INTERPOSE_LIB, TALLY_INTERPOSE_OUTCOME, path, sizeof(path),
			      &outcome_at))
		return say(why, len, -EPROTO,
			   "process %d: the %s it has loaded is not this tally's (another version)",
			   s->pid, INTERPOSE_LIB);
	clock_gettime(CLOCK_MONOTONIC, &now);
	uint32_t token = (uint32_t)now.tv_nsec | 1;
	err = ic_call_last(s, begin_at, sample_rate, takeover ? TALLY_INTERPOSE_TAKEOVER : 0,
			   token);
	if (err)
		return say(why, len, err, "process %d: calling %s: %s", s->pid,
			   TALLY_INTERPOSE_BEGIN, strerror(-err));
	return start_outcome(s->pid, outcome_at, token, why, len);
}

int inject_load(pid_t pid, const char *lib, uint64_t sample_rate, bool takeover, char *why,
		size_t len)
{
	struct stopped s = { .pid = pid };
	int err;

	if (strlen(lib) >= 4096)
		return say(why, len, -ENAMETOOLONG, "%s: path too long", lib);
	err = ic_seize(&s, lib, strlen(lib) + 1, why, len);
	if (!err)
		err = load_in(&s, lib, sample_rate, takeover, why, len);
	ic_release(&s);
	return err;
}
