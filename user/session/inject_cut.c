// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject's cut at the end (inject_cut.h). The interposer hands a thread's
 * batch over when it is full, at the thread's exit and at its own thread's
 * tick (20 ms); what the threads held when tally stopped reading was
 * missing, and a free handed over without its allocation showed as
 * negative live bytes called exact. tally writes a new number to the
 * library's tally_interpose_cut_req; its thread stops every thread at its
 * next record, hands every batch over, drops what comes later, and writes
 * the number to tally_interpose_cut_done (alloc/interpose/interpose_batch.c).
 */
#include <errno.h>
#include <sys/uio.h>

#include "inject_cut.h"
#include "session.h"
#include "internal.h"

#define LIB "libtally_interpose.so"
/* The library's thread answers within its tick (20 ms) plus the handover;
 * a loaded machine stretches both. */
#define CUT_WAIT_MS 2000

static int mem(pid_t pid, uint64_t addr, uint64_t *v, bool write)
{
	struct iovec local = { v, sizeof(*v) }, remote = { (void *)(uintptr_t)addr, sizeof(*v) };
	ssize_t n = write ? process_vm_writev(pid, &local, 1, &remote, 1, 0) :
			    process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return n == (ssize_t)sizeof(*v) ? 0 : -EIO;
}

int session_inject_cut(struct session *s)
{
	char path[TARGET_PATH_MAX];
	uint64_t req_at, done_at, done, want;
	int err = target_lib_symbol(s->pid, LIB, "tally_interpose_cut_req", path, sizeof(path),
				    &req_at);

	if (!err)
		err = target_lib_symbol(s->pid, LIB, "tally_interpose_cut_done", path, sizeof(path),
					&done_at);
	if (!err)
		err = mem(s->pid, done_at, &done, false);
	want = done + 1;
	if (!err)
		err = mem(s->pid, req_at, &want, true);
	for (int ms = 0; !err; ms++) {
		if ((err = mem(s->pid, done_at, &done, false)) || done == want)
			break;
		if (session_poll(s, 1) > 0)
			err = -ESRCH; /* gone: its exit handed everything over */
		else if (ms >= CUT_WAIT_MS)
			err = -ETIMEDOUT;
	}
	/* every batch of the cut is in the ring now */
	if (!err)
		session_drain_ring(s);
	s->src.inject_uncut = err && err != -ESRCH;
	return err;
}
