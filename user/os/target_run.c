// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Whether a thread ran: its scheduler state and the CPU time it has had, from
 * /proc. A cut (user/session/cut_read.c) reads a heap whose owner has not
 * answered its request only while the owner is out of the allocator, and
 * this is how it knows; the charging loader (user/probes/loader_cpu.c) takes
 * up a thread running as it is added.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "internal.h"
#include "target.h"

/* gone (no such thread) is an answer, not an error */
static int gone_or(int err)
{
	return err == ENOENT || err == ESRCH ? 0 : -err;
}

int target_thread_state(pid_t pid, uint32_t tid, char *state)
{
	char buf[TARGET_STAT_MAX];
	const char *rest = target_task_stat(pid, tid, buf, sizeof(buf));

	*state = 0;
	if (!rest)
		return gone_or(errno);
	if (!rest[1])
		return -EPROTO;
	*state = rest[1];
	return 0;
}

int target_thread_run(pid_t pid, uint32_t tid, struct thread_run *out)
{
	char path[64];

	*out = (struct thread_run){ .gone = true };
	int err = target_thread_state(pid, tid, &out->state);
	if (err || !out->state)
		return err;
	snprintf(path, sizeof(path), "/proc/%d/task/%u/schedstat", (int)pid, tid);
	FILE *f = fopen(path, "re");
	if (!f)
		return gone_or(errno);
	int n = fscanf(f, "%" SCNu64, &out->run_ns);
	fclose(f);
	if (n != 1)
		return -EPROTO;
	out->gone = out->state == 'Z' || out->state == 'X';
	return 0;
}
