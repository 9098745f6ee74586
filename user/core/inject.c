// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject: libtally_interpose.so loaded into a running process, as gdb
 * and heaptrack do it. tally seizes the process's main thread with ptrace,
 * waits for a point where the thread holds none of glibc's locks, saves
 * every register (the vector state too: the calls clobber it), and makes
 * the thread call dlopen(lib) and then the library's tally_interpose_start,
 * each returning to address 0, whose fault tally catches; then it puts the
 * registers back (a system call the thread was in restarts as the kernel
 * would have restarted it) and lets go. The other threads run throughout.
 *
 * Never by surprise: the checks refuse a process that another tracer holds,
 * that is set-uid, has no glibc, allocates with another malloc, runs under
 * a seccomp filter (which may forbid what dlopen does) or in another mount
 * namespace (the library's path means nothing there).
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "target.h"
#include "target_alloc.h"

#define INTERPOSE_LIB "libtally_interpose.so"
#define XSTATE_MAX 16384
#define SAFE_TRIES 400	   /* about 2 s of looking for a safe point */
#define CALL_WAIT_MS 20000 /* a call into the process that takes longer is stuck */

static int say(char *why, size_t len, int err, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, len, fmt, ap);
	va_end(ap);
	return err;
}

/* The number after `key` in /proc/PID/status; -1 when absent. */
static long status_field(const char *status, const char *key)
{
	const char *p = strstr(status, key);

	return p ? strtol(p + strlen(key), NULL, 10) : -1;
}

/* What /proc/PID/status says: another tracer, seccomp. */
static int check_status(pid_t pid, char *why, size_t len)
{
	char path[64], status[4096];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0)
		return say(why, len, -errno, "cannot read %s: %s", path, strerror(errno));
	n = read(fd, status, sizeof(status) - 1);
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
	int err = check_status(pid, why, len);

	if (!err)
		err = check_namespaces(pid, interposer, why, len);
	if (!err)
		err = check_program(pid, why, len);
	/* one that exits meanwhile lists part of its maps, or none (it has not
	 * lost glibc) */
	if (err && target_exiting(pid))
		err = say(why, len, -ESRCH, "process %d exited during attach", pid);
	return err;
}

/* ---- the stopped thread ---- */

struct stopped {
	pid_t pid;
	struct user_regs_struct regs;
	char *xstate;
	struct iovec xiov;
	/* the text of libc, ld.so and the interposer: no safe point inside */
	uint64_t lo[3], hi[3];
	unsigned nranges;
};

static int wait_stop(pid_t pid, int *status)
{
	for (;;) {
		if (waitpid(pid, status, __WALL) < 0)
			return -errno;
		if (WIFEXITED(*status) || WIFSIGNALED(*status))
			return -ESRCH;
		if (WIFSTOPPED(*status))
			return 0;
	}
}

/* Interrupt the seized thread: 0 once it is in the interrupt's stop.
 * Signals that arrive first are delivered on the way. */
static int interrupt(pid_t pid)
{
	int st, err;

	if (ptrace(PTRACE_INTERRUPT, pid, 0, 0))
		return -errno;
	for (;;) {
		if ((err = wait_stop(pid, &st)))
			return err;
		if (st >> 16 == PTRACE_EVENT_STOP)
			return 0;
		if (ptrace(PTRACE_CONT, pid, 0, (void *)(long)WSTOPSIG(st)))
			return -errno;
	}
}

/* Executable mappings of the files named `part` into s's ranges. */
static void text_ranges(struct stopped *s, const char *part)
{
	char path[64], line[4352], perms[8];
	unsigned long lo, hi;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/maps", s->pid);
	if (!(f = fopen(path, "re")))
		return;
	while (s->nranges < 3 && fgets(line, sizeof(line), f)) {
		const char *name = strrchr(line, '/');
		if (name && strstr(name, part) &&
		    sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && perms[2] == 'x') {
			s->lo[s->nranges] = lo;
			s->hi[s->nranges++] = hi;
			break;
		}
	}
	fclose(f);
}

/* Whether the thread, stopped, may call dlopen: not inside glibc or the
 * loader (it may hold malloc's or the loader's lock there), and, in a
 * system call, not in one that such code makes while it holds one (a
 * plain futex wait is a contended lock; condition variables and joins wait
 * with FUTEX_WAIT_BITSET). */
static bool safe_point(const struct stopped *s, const struct user_regs_struct *r)
{
	long nr = (long)r->orig_rax;

	if (nr >= 0) {
		switch (nr) {
		case SYS_futex:
			return (r->rsi & 0x7f) != 0 /* FUTEX_WAIT */;
		case SYS_mmap:
		case SYS_munmap:
		case SYS_mprotect:
		case SYS_brk:
		case SYS_mremap:
		case SYS_madvise:
			return false;
		default:
			return true;
		}
	}
	for (unsigned i = 0; i < s->nranges; i++)
		if (r->rip >= s->lo[i] && r->rip < s->hi[i])
			return false;
	return true;
}

static int find_safe_point(struct stopped *s, char *why, size_t len)
{
	for (int i = 0; i < SAFE_TRIES; i++) {
		int err = interrupt(s->pid);
		if (err)
			return say(why, len, err, "process %d: %s while stopping it", s->pid,
				   err == -ESRCH ? "it exited" : strerror(-err));
		if (ptrace(PTRACE_GETREGS, s->pid, 0, &s->regs))
			return say(why, len, -errno, "process %d: cannot read its registers: %s",
				   s->pid, strerror(errno));
		if (safe_point(s, &s->regs))
			return 0;
		if (i == SAFE_TRIES - 1)
			break; /* stopped, for the detach */
		/* let it run on a little, and look again */
		if (ptrace(PTRACE_CONT, s->pid, 0, 0))
			return say(why, len, -errno, "process %d: %s", s->pid, strerror(errno));
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	return say(why, len, -EAGAIN,
		   "process %d: its main thread stayed inside glibc (or waiting on a lock) for "
		   "2 s: no safe point to load the library at",
		   s->pid);
}

static int poke(pid_t pid, uint64_t addr, const void *data, size_t n)
{
	struct iovec local = { (void *)data, n }, remote = { (void *)(uintptr_t)addr, n };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -errno;
}

static int peek(pid_t pid, uint64_t addr, void *data, size_t n)
{
	struct iovec local = { data, n }, remote = { (void *)(uintptr_t)addr, n };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -errno;
}

/*
 * Call fn(a1, a2) in the stopped thread, `data` (n bytes) placed on its
 * stack first (its address as a1 when a1 is 0 and n is not): the result in
 * *ret. Signals that arrive meanwhile are delivered (the program's handlers
 * run on top of the call, as for any function it calls).
 */
static int remote_call(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, const void *data,
		       size_t n, uint64_t *ret)
{
	struct user_regs_struct r = s->regs;
	uint64_t sp = (s->regs.rsp - 256 - n) & ~15ULL, zero = 0;
	int st, err;

	if (n) {
		if ((err = poke(s->pid, sp, data, n)))
			return err;
		if (!a1)
			a1 = sp;
	}
	sp -= 8; /* the return address: the function entered as if called */
	if ((err = poke(s->pid, sp, &zero, sizeof(zero))))
		return err;
	r.rsp = sp;
	r.rip = fn;
	r.rdi = a1;
	r.rsi = a2;
	r.rax = 0;
	r.orig_rax = (uint64_t)-1; /* no system call to restart on the way */
	if (ptrace(PTRACE_SETREGS, s->pid, 0, &r) || ptrace(PTRACE_CONT, s->pid, 0, 0))
		return -errno;
	for (int waited = 0;;) {
		pid_t w = waitpid(s->pid, &st, __WALL | WNOHANG);
		if (w < 0)
			return -errno;
		if (w == 0) {
			if (++waited > CALL_WAIT_MS)
				return -ETIMEDOUT;
			struct timespec ts = { 0, 1000000 };
			nanosleep(&ts, NULL);
			continue;
		}
		if (WIFEXITED(st) || WIFSIGNALED(st))
			return -ESRCH;
		if (!WIFSTOPPED(st))
			continue;
		int sig = WSTOPSIG(st);
		if (st >> 16 == PTRACE_EVENT_STOP) {
			/* a stop of the whole process (SIGSTOP): carry on */
			if (ptrace(PTRACE_CONT, s->pid, 0, 0))
				return -errno;
			continue;
		}
		if (sig == SIGSEGV) {
			if (ptrace(PTRACE_GETREGS, s->pid, 0, &r))
				return -errno;
			if (r.rip == 0) {
				*ret = r.rax;
				return 0;
			}
			return -EFAULT; /* the call itself faulted */
		}
		if (ptrace(PTRACE_CONT, s->pid, 0, (void *)(long)sig))
			return -errno;
	}
}

static int put_back(struct stopped *s)
{
	int err = 0;

	if (ptrace(PTRACE_SETREGS, s->pid, 0, &s->regs))
		err = -errno;
	if (s->xiov.iov_len && ptrace(PTRACE_SETREGSET, s->pid, NT_X86_XSTATE, &s->xiov))
		err = err ? err : -errno;
	return err;
}

static int load_in(struct stopped *s, const char *lib, uint64_t sample_rate, char *why, size_t len)
{
	char path[4096];
	uint64_t dlopen_at, dlerror_at, start_at, ret;
	int err;

	uint64_t bias;
	if (target_find_lib(s->pid, INTERPOSE_LIB, path, sizeof(path), &bias) < 0) {
		err = target_lib_symbol(s->pid, "libc.so.6", "dlopen", path, sizeof(path),
					&dlopen_at);
		if (err)
			return say(why, len, err, "process %d: no dlopen in its glibc: %s", s->pid,
				   strerror(-err));
		err = remote_call(s, dlopen_at, 0, 2 /* RTLD_NOW */, lib, strlen(lib) + 1, &ret);
		if (!err && !ret) {
			char msg[256] = "";
			uint64_t at;
			if (!target_lib_symbol(s->pid, "libc.so.6", "dlerror", path, sizeof(path),
					       &dlerror_at) &&
			    !remote_call(s, dlerror_at, 0, 0, NULL, 0, &at) && at)
				peek(s->pid, at, msg, sizeof(msg) - 1);
			return say(why, len, -ENOEXEC, "process %d: dlopen(%s) failed: %s", s->pid,
				   lib, msg[0] ? msg : "no reason given");
		}
		if (err)
			return say(why, len, err, "process %d: calling dlopen: %s", s->pid,
				   strerror(-err));
	}
	err = target_lib_symbol(s->pid, INTERPOSE_LIB, "tally_interpose_start", path, sizeof(path),
				&start_at);
	if (err)
		return say(why, len, err, "process %d: %s loaded, but no tally_interpose_start: %s",
			   s->pid, INTERPOSE_LIB, strerror(-err));
	if ((err = remote_call(s, start_at, sample_rate, 0, NULL, 0, &ret)))
		return say(why, len, err, "process %d: calling tally_interpose_start: %s", s->pid,
			   strerror(-err));
	if ((int)ret == -EALREADY)
		return say(why, len, -EBUSY,
			   "process %d: another tally records its calls already (--inject)",
			   s->pid);
	if ((int)ret < 0)
		return say(why, len, (int)ret, "process %d: the interposer could not start: %s",
			   s->pid, strerror(-(int)ret));
	return 0;
}

int inject_load(pid_t pid, const char *lib, uint64_t sample_rate, char *why, size_t len)
{
	struct stopped s = { .pid = pid };
	int err;

	if (ptrace(PTRACE_SEIZE, pid, 0, 0))
		return say(why, len, -errno, "process %d: cannot ptrace it: %s", pid,
			   strerror(errno));
	text_ranges(&s, "libc.so.6");
	text_ranges(&s, "ld-linux");
	text_ranges(&s, INTERPOSE_LIB);
	err = find_safe_point(&s, why, len);
	if (err)
		goto out;
	s.xstate = calloc(1, XSTATE_MAX);
	s.xiov = (struct iovec){ s.xstate, XSTATE_MAX };
	if (!s.xstate || ptrace(PTRACE_GETREGSET, pid, NT_X86_XSTATE, &s.xiov)) {
		err = say(why, len, s.xstate ? -errno : -ENOMEM,
			  "process %d: cannot save its vector registers", pid);
		s.xiov.iov_len = 0;
		goto out;
	}
	err = load_in(&s, lib, sample_rate, why, len);
	int perr = put_back(&s);
	if (perr && !err)
		err = say(why, len, perr, "process %d: cannot put its registers back: %s", pid,
			  strerror(-perr));
out:
	ptrace(PTRACE_DETACH, pid, 0, 0);
	free(s.xstate);
	return err;
}
