// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One loader's sched_switch program charging the CPU of many sessions'
 * processes (loader.h, serve --all; docs/DESIGN.md §12): the maps the
 * sessions' objects share, and the processes it follows.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/tally_bpf.h"
#include "../os/target.h"
#include "../util/clock.h"
#include "loader.h"
#include "loader_internal.h"
#include "tally.skel.h"

void loader_cpu_fds(struct loader *l, struct loader_cpu_share *out)
{
	out->threads_fd = bpf_map__fd(l->skel->maps.threads);
	out->cpu_fd = bpf_map__fd(l->skel->maps.proc_cpu);
}

int loader_share_cpu(struct loader *l, const struct loader_cpu_share *sh)
{
	int err = bpf_map__reuse_fd(l->skel->maps.threads, sh->threads_fd);

	if (!err)
		err = bpf_map__reuse_fd(l->skel->maps.proc_cpu, sh->cpu_fd);
	l->no_switch = !err;
	return err;
}

/* Whether thread tid of pid is on a CPU or runnable now (its stat's state). */
static bool thread_running(pid_t pid, uint32_t tid)
{
	char state;

	return !target_thread_state(pid, tid, &state) && state == 'R';
}

/* pid's threads running now, as running from `now`: a thread busy on a CPU
 * switches out seconds later on an idle machine, and its CPU is shown as it
 * goes (loader_running_cpu) rather than then. One that is not running is
 * taken up at its next switch in, as the BPF side does. */
static void seed_running(struct loader *l, pid_t pid, uint64_t now)
{
	int fd = bpf_map__fd(l->skel->maps.threads);
	char path[64];
	struct dirent *de;
	DIR *d;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		uint32_t tid = (uint32_t)strtoul(de->d_name, NULL, 10);
		if (!thread_running(pid, tid))
			continue;
		struct tally_bpf_thread t = { .last_ns = now, .running = 1, .pid = (uint32_t)pid };
		bpf_map_update_elem(fd, &tid, &t, BPF_NOEXIST); /* one the BPF side has: its own */
	}
	closedir(d);
}

int loader_cpu_follow(struct loader *l, pid_t pid)
{
	uint32_t k = (uint32_t)pid;
	uint64_t now = clock_now_ns();

	/* before the process is in the map: a thread of it seen switching out
	 * first has run since its addition, not since the loader's attach */
	if (bpf_map__update_elem(l->skel->maps.added_ns, &k, sizeof(k), &now, sizeof(now), BPF_ANY))
		return -errno;
	seed_running(l, pid, now);
	return loader_add_proc(l, pid, 0);
}
