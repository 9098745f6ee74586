// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Calls into another process's stopped thread that do not need the tracer
 * to come back: at no instant does the thread depend on tally being alive.
 * tally may die at any point (kill -9, or SIGINT before its handler), and
 * the kernel then detaches it, resuming the thread wherever it stood; so it
 * must always stand somewhere it can go on from unaided:
 *
 *   - stopped with its own registers (ptrace's interrupt stop, seized
 *     without PTRACE_O_EXITKILL): the kernel resumes it, and restarts the
 *     system call it was in as it does after any stop;
 *   - in a call (dlopen, the interposer's start): the call's return address
 *     is glibc's `mov $15, %rax; syscall` (__restore_rt, what every signal
 *     handler returns through) above a signal frame that tally wrote below
 *     the thread's stack pointer, holding its registers, its vector state
 *     (the XSAVE image ptrace reads, 64-byte aligned, with its magic words)
 *     and its signal mask: the function returns into rt_sigreturn, which
 *     puts all of that back, and the thread goes on where it was stopped;
 *   - stopped at the entry of that rt_sigreturn (a system-call stop, which
 *     the kernel forgets at a detach): it goes on into it.
 *
 * Nothing is written into the process's code, no breakpoint, no single
 * step (a trap flag or a debug register outlives the tracer: the thread's
 * next trap would kill it with SIGTRAP), no return to an address that
 * faults (the old injector's return to address 0, whose SIGSEGV only tally
 * caught: a kill -9 in a call killed the process, 21 of 100 kills at random
 * points of tests/inject/chaos.sh). The frame's way back is the only way
 * back, dead tally or not: tally follows the thread's system calls through
 * dlopen to its rt_sigreturn, makes the start from there, and lets go while
 * the start runs; the start tells its outcome in the library's memory.
 */
#include <cpuid.h>
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <elf.h>

#include "inject_call.h"
#include "../util/proc_maps.h"

#define CALL_WAIT_MS 20000 /* a call into the process that takes longer is stuck */
#define XSTATE_MAX 16384
#define RED_ZONE 256 /* the System V ABI's 128 bytes below rsp, and as much again */
#define SIGRETURN_CODE "\x48\xc7\xc0\x0f\x00\x00\x00\x0f\x05" /* mov $15,%rax; syscall */
#define SIGRETURN_LEN 9
/* the kernel's, not in glibc's headers */
#define K_ERESTARTSYS 512
#define K_ERESTARTNOINTR 513
#define K_ERESTARTNOHAND 514
#define K_ERESTART_RESTARTBLOCK 516
#define K_UC_FP_XSTATE 0x1
#define K_UC_SIGCONTEXT_SS 0x2
#define K_UC_STRICT_RESTORE_SS 0x4
#define K_FP_XSTATE_MAGIC1 0x46505853U
#define K_FP_XSTATE_MAGIC2 0x46505845U
#define K_FX_SW_OFFSET 464 /* the XSAVE image's software-reserved words */
#define K_XFEATURE_XTILE_DATA (1ULL << 18)

/* rt_sigreturn's frame on x86-64 (arch/x86/include/asm/sigframe.h) */
struct k_ucontext {
	uint64_t flags;
	uint64_t link;
	stack_t stack;
	struct sigcontext mcontext;
	uint64_t sigmask;
};
struct k_sigframe {
	uint64_t pretcode;
	struct k_ucontext uc;
	uint8_t info[128];
};
struct k_fx_sw {
	uint32_t magic1, extended_size;
	uint64_t xfeatures;
	uint32_t xstate_size, pad[7];
};
_Static_assert(sizeof(struct sigcontext) == 256, "x86-64 sigcontext");
_Static_assert(sizeof(stack_t) == 24, "x86-64 stack_t");

static int say(char *why, size_t len, int err, const char *what, pid_t pid)
{
	snprintf(why, len, "process %d: %s: %s", pid, what,
		 err == -ESRCH ? "it exited" : strerror(-err));
	return err;
}

static int poke(pid_t pid, uint64_t addr, const void *data, size_t n)
{
	struct iovec local = { (void *)data, n }, remote = { (void *)(uintptr_t)addr, n };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -errno;
}

int ic_peek(pid_t pid, uint64_t addr, void *data, size_t n)
{
	struct iovec local = { data, n }, remote = { (void *)(uintptr_t)addr, n };

	return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -errno;
}

/* The thread's next report, ms at most: 0 with its status, -ETIMEDOUT, or
 * -ESRCH once it has ended. A system call's stop comes within microseconds
 * of the last: looked for without sleeping for the first 2000 looks (a
 * sleep's timer slack alone is 50 us, and dlopen makes some 50 stops). */
static int wait_thread(pid_t pid, int *st, long ms)
{
	for (long us = 0, looks = 0;; looks++) {
		pid_t w = waitpid(pid, st, __WALL | WNOHANG);
		if (w < 0 && errno != EINTR)
			return -errno;
		if (w > 0)
			return WIFEXITED(*st) || WIFSIGNALED(*st) ? -ESRCH : 0;
		if (us > ms * 1000)
			return -ETIMEDOUT;
		if (looks < 2000) {
			sched_yield();
			continue;
		}
		long step = us < 100000 ? 20 : 1000;
		struct timespec ts = { 0, step * 1000 };
		nanosleep(&ts, NULL);
		us += step;
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
		if ((err = wait_thread(pid, &st, CALL_WAIT_MS)))
			return err;
		if (st >> 16 == PTRACE_EVENT_STOP)
			return 0;
		int sig = WSTOPSIG(st) == (SIGTRAP | 0x80) ? 0 : WSTOPSIG(st);
		if (ptrace(PTRACE_CONT, pid, 0, (void *)(long)sig))
			return -errno;
	}
}

/* Executable mappings of the files named `part` into s's ranges; `loader`:
 * a system call from there is no safe point either. */
static void text_ranges(struct stopped *s, const char *part, bool loader)
{
	struct maps_iter it;
	struct maps_line l;

	if (maps_open_pid(&it, s->pid))
		return;
	while (s->nranges < 3 && maps_next(&it, &l) > 0) {
		const char *name = strrchr(l.path, '/');
		/* the path is "" on a line that is no mapping */
		if (name && strstr(name, part) && l.perms[2] == 'x') {
			s->lo[s->nranges] = l.start;
			s->loader |= (unsigned)loader << s->nranges;
			s->hi[s->nranges++] = l.end;
			break;
		}
	}
	maps_close(&it);
}

/* The range of s's that holds rip: its index, or -1. */
static int range_of(const struct stopped *s, uint64_t rip)
{
	for (unsigned i = 0; i < s->nranges; i++)
		if (rip >= s->lo[i] && rip < s->hi[i])
			return (int)i;
	return -1;
}

/*
 * Whether the thread, stopped, may call dlopen: not inside glibc or the
 * loader (it may hold malloc's or the loader's lock there), and, in a
 * system call, not in one that such code makes while it holds one (a
 * plain futex wait is a contended lock; condition variables and joins wait
 * with FUTEX_WAIT_BITSET), nor in one of the loader's own: ld.so makes
 * system calls only to load or unload an object, under its lock, and a
 * dlopen nested there returns the object half loaded. An injection killed
 * inside its dlopen leaves the thread loading the interposer's libgcc_s;
 * the next one stopped it in ld.so's close and called the start through
 * the unrelocated library, SIGSEGV (fresh processes whose first
 * injections were killed 0..3 ms after the seizure: 1 to 3 in 100 before,
 * 0 in 2000 after; tests/inject/chaos.sh sweeps 100 of them, and holds a
 * thread in the loader's openat to check this rule every run).
 */
static bool safe_point(const struct stopped *s, const struct user_regs_struct *r)
{
	long nr = (long)r->orig_rax;
	int in = range_of(s, r->rip);

	if (nr < 0)
		return in < 0;
	switch (nr) {
	case SYS_futex:
		if (!(r->rsi & 0x7f) /* FUTEX_WAIT */)
			return false;
		break;
	case SYS_mmap:
	case SYS_munmap:
	case SYS_mprotect:
	case SYS_brk:
	case SYS_mremap:
	case SYS_madvise:
		return false;
	default:
		break;
	}
	return in < 0 || !(s->loader >> in & 1);
}

#define SAFE_TRIES 400 /* about 2 s of looking for a safe point */

static int find_safe_point(struct stopped *s, char *why, size_t len)
{
	for (int i = 0; i < SAFE_TRIES; i++) {
		int err = interrupt(s->pid);
		if (err)
			return say(why, len, err, "while stopping it", s->pid);
		if (ptrace(PTRACE_GETREGS, s->pid, 0, &s->regs))
			return say(why, len, -errno, "cannot read its registers", s->pid);
		if (safe_point(s, &s->regs))
			return 0;
		if (i == SAFE_TRIES - 1)
			break; /* stopped, for the detach */
		/* let it run on a little, and look again */
		if (ptrace(PTRACE_CONT, s->pid, 0, 0))
			return say(why, len, -errno, "cannot let it go on", s->pid);
		struct timespec ts = { 0, 5000000 };
		nanosleep(&ts, NULL);
	}
	snprintf(why, len,
		 "process %d: its main thread stayed inside glibc or its loader (or waiting on a "
		 "lock) for 2 s: "
		 "no safe point to load the library at",
		 s->pid);
	return -EAGAIN;
}

/* `mov $15, %rax; syscall` in the text of the process's libc (the first
 * range text_ranges found): glibc's __restore_rt, not an exported symbol,
 * found by its bytes, which are all that matters of it. */
static int find_sigreturn(struct stopped *s)
{
	static char buf[65536 + SIGRETURN_LEN];

	if (!s->nranges)
		return -ENOENT;
	for (uint64_t at = s->lo[0]; at < s->hi[0]; at += 65536) {
		size_t n = s->hi[0] - at < sizeof(buf) ? s->hi[0] - at : sizeof(buf);
		if (ic_peek(s->pid, at, buf, n))
			return -EFAULT;
		const char *hit = memmem(buf, n, SIGRETURN_CODE, SIGRETURN_LEN);
		if (hit) {
			s->sigreturn = at + (uint64_t)(hit - buf);
			return 0;
		}
	}
	return -ENOENT;
}

/* The thread's blocked signals (SigBlk: rt_sigreturn sets the mask). */
static int blocked_mask(pid_t pid, uint64_t *mask)
{
	char path[64], status[4096];
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", pid, pid);
	if (!(f = fopen(path, "re")))
		return -errno;
	size_t n = fread(status, 1, sizeof(status) - 1, f);
	fclose(f);
	status[n] = 0;
	const char *p = strstr(status, "SigBlk:");
	if (!p)
		return -EIO;
	*mask = strtoull(p + 7, NULL, 16);
	return 0;
}

/* Whether the thread was stopped in a system call the kernel would restart
 * (the -ERESTART* codes, which never reach the program). */
static bool restartable(const struct user_regs_struct *r)
{
	long ret = (long)r->rax;

	return (long)r->orig_rax >= 0 &&
	       (ret == -K_ERESTARTSYS || ret == -K_ERESTARTNOINTR || ret == -K_ERESTARTNOHAND ||
		ret == -K_ERESTART_RESTARTBLOCK);
}

/* The size of the standard XSAVE image that holds `features`: the end of
 * the last one (CPUID leaf 0xD gives each its offset and size). */
static uint32_t xsave_size(uint64_t features)
{
	uint32_t size = 576, a, b, c, d;

	for (unsigned i = 2; i < 64; i++) {
		if (!(features >> i & 1))
			continue;
		__cpuid_count(0xd, i, a, b, c, d);
		if (b + a > size)
			size = b + a;
	}
	return size;
}

/* The thread's vector state as rt_sigreturn takes it, into img (xlen + 8
 * bytes): the XSAVE image ptrace gave, its software-reserved words made a
 * signal frame's (ptrace puts XCR0 in the first of them, for gdb; the
 * frame's say which features and how many bytes, as the kernel writes
 * them: without, it restores x87 and SSE alone and resets the upper halves
 * of the vector registers), and the second magic after it. AMX's tile data,
 * which a process has only once it asked, is left out unless in use: a
 * frame larger than the process's own signal frames is refused. Its size. */
static size_t fp_image(const struct stopped *s, char *img)
{
	uint64_t xcr0, in_use;
	uint32_t magic2 = K_FP_XSTATE_MAGIC2;

	memcpy(img, s->xstate, s->xlen);
	memcpy(&xcr0, s->xstate + K_FX_SW_OFFSET, sizeof(xcr0));
	memcpy(&in_use, s->xstate + 512, sizeof(in_use)); /* the header's XSTATE_BV */
	if (!(in_use & K_XFEATURE_XTILE_DATA))
		xcr0 &= ~K_XFEATURE_XTILE_DATA;
	struct k_fx_sw sw = { .magic1 = K_FP_XSTATE_MAGIC1,
			      .xfeatures = xcr0,
			      .xstate_size = xsave_size(xcr0) };
	if (sw.xstate_size + sizeof(magic2) > s->xlen + 8) {
		/* not an image this kernel's frames hold: x87 and SSE, the rest reset */
		memset(img + K_FX_SW_OFFSET, 0, sizeof(sw));
		return 512;
	}
	sw.extended_size = sw.xstate_size + sizeof(magic2);
	memcpy(img + K_FX_SW_OFFSET, &sw, sizeof(sw));
	memcpy(img + sw.xstate_size, &magic2, sizeof(magic2));
	return sw.extended_size;
}

/* What rt_sigreturn puts back: the registers as a signal with SA_RESTART
 * leaves them, a stopped system call issued again (a sleep with a relative
 * time, which the kernel would have resumed with its time left, from its
 * start: a wait may be longer than asked, never shorter or failed). */
static void frame_regs(struct k_sigframe *f, const struct stopped *s, uint64_t fp, uint64_t mask)
{
	const struct user_regs_struct *r = &s->regs;
	struct sigcontext *c = &f->uc.mcontext;

	*c = (struct sigcontext){ .r8 = r->r8,
				  .r9 = r->r9,
				  .r10 = r->r10,
				  .r11 = r->r11,
				  .r12 = r->r12,
				  .r13 = r->r13,
				  .r14 = r->r14,
				  .r15 = r->r15,
				  .rdi = r->rdi,
				  .rsi = r->rsi,
				  .rbp = r->rbp,
				  .rbx = r->rbx,
				  .rdx = r->rdx,
				  .rax = r->rax,
				  .rcx = r->rcx,
				  .rsp = r->rsp,
				  .rip = r->rip,
				  .eflags = r->eflags,
				  .cs = (unsigned short)r->cs,
				  .__pad0 = (unsigned short)r->ss };
	c->fpstate = (struct _fpstate *)(uintptr_t)fp;
	if (restartable(r)) {
		c->rax = r->orig_rax;
		c->rip -= 2; /* the syscall instruction */
	}
	f->pretcode = s->sigreturn;
	f->uc.flags = K_UC_FP_XSTATE | K_UC_SIGCONTEXT_SS | K_UC_STRICT_RESTORE_SS;
	/* a mode sigaltstack refuses: the thread's alternate stack is left as
	 * it is (rt_sigreturn sets it from the frame, and ignores a refusal) */
	f->uc.stack.ss_flags = SS_ONSTACK | SS_DISABLE;
	f->uc.sigmask = mask;
}

/* Below the red zone: the data, the vector state, the frame (the return
 * address at s->frame, 8 bytes off a 16-byte boundary, as after a call). */
static int put_frame(struct stopped *s, const void *data, size_t n)
{
	struct k_sigframe f = { 0 };
	uint64_t mask = 0, fp;
	char *img = malloc(s->xlen + 8);
	int err;

	if (!img)
		return -ENOMEM;
	size_t ni = fp_image(s, img);
	s->data = (s->regs.rsp - RED_ZONE - n) & ~15ULL;
	fp = (s->data - ni) & ~63ULL;
	s->frame = ((fp - sizeof(f)) & ~15ULL) - 8;
	err = blocked_mask(s->pid, &mask);
	if (!err) {
		frame_regs(&f, s, fp, mask);
		err = poke(s->pid, s->data, data, n);
	}
	if (!err)
		err = poke(s->pid, fp, img, ni);
	if (!err)
		err = poke(s->pid, s->frame, &f, sizeof(f));
	free(img);
	return err;
}

int ic_seize(struct stopped *s, const void *data, size_t n, char *why, size_t len)
{
	struct iovec iov;
	int err;

	if (ptrace(PTRACE_SEIZE, s->pid, 0, (void *)(long)PTRACE_O_TRACESYSGOOD))
		return say(why, len, -errno, "cannot ptrace it", s->pid);
	text_ranges(s, "libc.so.6", false);
	text_ranges(s, "ld-linux", true);
	text_ranges(s, "libtally_interpose.so", true);
	if ((err = find_sigreturn(s)))
		return say(why, len, err, "no rt_sigreturn in its libc's text", s->pid);
	if ((err = find_safe_point(s, why, len)))
		return err;
	if (!(s->xstate = calloc(1, XSTATE_MAX)))
		return say(why, len, -ENOMEM, "cannot save its vector registers", s->pid);
	iov = (struct iovec){ s->xstate, XSTATE_MAX };
	err = ptrace(PTRACE_GETREGSET, s->pid, NT_X86_XSTATE, &iov) ? -errno : 0;
	if (err || iov.iov_len < 512)
		return say(why, len, err ? err : -EIO, "cannot save its vector registers", s->pid);
	s->xlen = iov.iov_len;
	if ((err = put_frame(s, data, n)))
		return say(why, len, err, "cannot write on its stack", s->pid);
	return 0;
}

/* Whether the thread stopped at the entry of rt_sigreturn from the frame:
 * the call has returned. */
static bool at_return(const struct stopped *s, const struct user_regs_struct *r)
{
	return r->orig_rax == SYS_rt_sigreturn && r->rip == s->sigreturn + SIGRETURN_LEN &&
	       r->rsp == s->frame + 8 && (long)r->rax == -ENOSYS;
}

/* Resumed, the thread runs the call; its system calls stop it (ptrace's
 * syscall stops, which the kernel forgets at a detach; with
 * PTRACE_O_TRACESYSGOOD, whose stop code is no signal: without it, a
 * tracer that dies there leaves the thread a SIGTRAP) until the one that
 * is its return. Signals are delivered (their handlers run on top of the
 * call, as for any function it calls); a stop of the whole process
 * (SIGSTOP) waits for the call's end. */
static int follow_call(struct stopped *s)
{
	struct user_regs_struct r;
	int st, err, sig = 0;

	for (;;) {
		if (ptrace(PTRACE_SYSCALL, s->pid, 0, (void *)(long)sig))
			return -errno;
		s->running = true;
		sig = 0;
		if ((err = wait_thread(s->pid, &st, CALL_WAIT_MS)))
			return err;
		s->running = false;
		if (st >> 16 == PTRACE_EVENT_STOP)
			continue;
		if (WSTOPSIG(st) != (SIGTRAP | 0x80)) {
			sig = WSTOPSIG(st);
			continue;
		}
		if (ptrace(PTRACE_GETREGS, s->pid, 0, &r))
			return -errno;
		if (at_return(s, &r))
			return 0;
	}
}

/* The thread's registers for fn(a1, a2, a3), returning through the frame. */
static int set_call(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3)
{
	struct user_regs_struct r = s->regs;
	int err;

	r.rip = fn;
	r.rsp = s->frame;
	r.rdi = a1;
	r.rsi = a2;
	r.rdx = a3;
	r.rax = 0;
	r.eflags &= ~0x400ULL; /* DF clear, as the ABI has it at a call */
	/* no system call restarted, or run (at the rt_sigreturn stop: skipped) */
	r.orig_rax = (uint64_t)-1;
	/* the return address again: what the last call popped, or a signal
	 * delivered since wrote over */
	if ((err = poke(s->pid, s->frame, &s->sigreturn, sizeof(s->sigreturn))))
		return err;
	return ptrace(PTRACE_SETREGS, s->pid, 0, &r) ? -errno : 0;
}

int ic_call(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3)
{
	int err = set_call(s, fn, a1, a2, a3);

	return err ? err : follow_call(s);
}

int ic_call_last(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3)
{
	int err = set_call(s, fn, a1, a2, a3);

	if (!err && ptrace(PTRACE_DETACH, s->pid, 0, 0))
		err = -errno;
	if (!err)
		s->detached = true;
	return err;
}

void ic_release(struct stopped *s)
{
	/* a thread running a call that did not come back (it returns through
	 * the frame by itself) is stopped for the detach */
	if (!s->detached && s->running && !interrupt(s->pid))
		s->running = false;
	if (!s->detached)
		ptrace(PTRACE_DETACH, s->pid, 0, 0);
	s->detached = true;
	free(s->xstate);
	s->xstate = NULL;
}
