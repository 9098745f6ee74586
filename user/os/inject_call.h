/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Calls into a stopped thread of another process that need no tracer to
 * come back (inject_call.c): what inject.c makes the target run.
 */
#ifndef TALLY_CORE_INJECT_CALL_H
#define TALLY_CORE_INJECT_CALL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

struct stopped {
	pid_t pid;
	struct user_regs_struct regs; /* as it was stopped */
	char *xstate;		      /* its vector state (NT_X86_XSTATE) */
	size_t xlen;
	uint64_t lo[3], hi[3]; /* the text of libc, ld.so, the interposer: no safe point */
	unsigned nranges;
	unsigned loader;    /* bit i: range i's system calls are no safe point either */
	uint64_t sigreturn; /* `mov $15, %rax; syscall` in its text */
	uint64_t frame;	    /* the signal frame: the calls' return address */
	uint64_t data;	    /* the calls' data, above the frame */
	bool running;	    /* resumed inside a call (ic_call), not stopped */
	bool detached;	    /* let go (ic_call_last, ic_release) */
};

/* Seize pid's main thread at a point where it holds none of glibc's locks
 * and put on its stack, below what it uses, a signal frame of its state and
 * `data` (n bytes, at s->data). 0, or -errno with a line in why; the thread
 * is left stopped for ic_call either way until ic_release. */
int ic_seize(struct stopped *s, const void *data, size_t n, char *why, size_t len);

/* fn(a1, a2, a3) in the thread, returning through the frame: 0 once it has
 * returned, stopped at the frame's rt_sigreturn (which a further call skips,
 * and a detach lets run), or -errno (-ESRCH: the process is gone). */
int ic_call(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3);

/* The same, started and let go at once: the thread runs it and returns
 * through the frame on its own (its outcome is for the caller to read in
 * memory). 0 or -errno. */
int ic_call_last(struct stopped *s, uint64_t fn, uint64_t a1, uint64_t a2, uint64_t a3);

/* Let go (a thread inside a call comes back through the frame). */
void ic_release(struct stopped *s);

int ic_peek(pid_t pid, uint64_t addr, void *data, size_t n);

#endif /* TALLY_CORE_INJECT_CALL_H */
