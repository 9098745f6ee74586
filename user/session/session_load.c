// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * session_load (internal.h): the BPF objects a session needs, loaded
 * side by side. Each load takes ~80 ms, most of it libbpf parsing the
 * kernel's BTF (every object parses it again) and the verifier: two CPUs
 * do two objects in the time of one. tally.bpf.o loads on the caller's
 * thread; the driver's (cuda.bpf.c) and glibc mode's (glibc.bpf.c), which
 * take its shared maps, on threads of their own, started as soon as the
 * open has made those maps; the attach then waits for them
 * (session_loaded). tally forks nothing from here on: the threads are safe.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "session.h"
#include "internal.h"
#include "../util/timing.h"

enum { LOAD_CUDA, LOAD_GLIBC };

static void *load_cuda(void *arg)
{
	struct session *s = arg;
	struct cuda_shared maps;
	uint64_t t0 = timing_now();

	loader_shared_fds(s->loader, &maps.events_fd, &maps.lost_fd, &maps.threads_fd);
	maps.procs_fd = loader_procs_fd(s->loader);
	/* a driver is probed where one is followed, or where a running target
	 * may have one mapped already */
	s->cuda = cuda_trace_open(s->pid, &maps, s->gpu_follow || !s->spawned, &s->cuda_err);
	timing_span("cuda.bpf.o: open and load (its thread)", t0);
	return NULL;
}

static void *load_glibc(void *arg)
{
	struct session *s = arg;
	int events_fd, lost_fd, threads_fd;
	uint64_t t0 = timing_now();

	loader_shared_fds(s->loader, &events_fd, &lost_fd, &threads_fd);
	s->glibc = glibc_trace_open(s->pid, threads_fd, 0, &s->glibc_err);
	timing_span("glibc.bpf.o: open and load (its thread)", t0);
	return NULL;
}

static void load_beside(struct session *s, int which, void *(*fn)(void *))
{
	s->loading[which] = !pthread_create(&s->load_threads[which], NULL, fn, s);
	if (!s->loading[which])
		fn(s); /* no thread: here, then */
}

void session_loaded(struct session *s)
{
	for (int i = 0; i < 2; i++) {
		if (s->loading[i])
			pthread_join(s->load_threads[i], NULL);
		s->loading[i] = false;
	}
}

int session_load(struct session *s, const struct session_opts *o, bool cuda, bool glibc)
{
	int err;

	s->pidfd = (int)syscall(SYS_pidfd_open, s->pid, 0);
	if (s->pidfd < 0 && !s->spawned)
		return session_fail(TALLY_EXIT_NO_PROCESS, "no process %d", s->pid);
	loader_libbpf_messages(o->verbose);
	s->follow = o->follow;
	s->verbose = o->verbose;
	s->cuda_err = s->glibc_err = -ENOENT; /* not loaded: not asked for */
	err = loader_open(&s->loader, s->pid, o->follow, o->ring_bytes, session_on_msg, s);
	if (!err && o->cpu_share) /* before the other objects take its maps */
		err = loader_share_cpu(s->loader, o->cpu_share);
	if (!err && cuda)
		load_beside(s, LOAD_CUDA, load_cuda);
	if (!err && glibc)
		load_beside(s, LOAD_GLIBC, load_glibc);
	if (!err)
		err = loader_load(s->loader);
	if (err)
		return session_fail(err == -EPERM ? TALLY_EXIT_PERM : TALLY_EXIT_FAIL,
				    "cannot load the BPF programs: %s", strerror(-err));
	err = loader_attach_sched(s->loader);
	timing_mark("attach: scheduler tracepoints");
	if (err)
		return session_fail(TALLY_EXIT_FAIL, "cannot attach to the scheduler: %s",
				    strerror(-err));
	s->start_ns = clock_now_ns();
	return TALLY_EXIT_OK;
}
