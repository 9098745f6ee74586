// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * session_start (session.h): what tracing needs at all, then the target
 * (started held at the door, or found running), one tally per target, the
 * BPF objects loaded and every probe attached; a started CMD is let go, a
 * running one has its state read from memory (session_state.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/capability.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../os/inject.h"
#include "../os/target_alloc.h"
#include "session.h"
#include "internal.h"
#include "../util/timing.h"

#define TALLY_NICE -10

/* CAP_BPF and CAP_PERFMON (or root's CAP_SYS_ADMIN): the BPF programs need
 * both. That is not all for a uprobe perf event (glibc mode's, and every
 * probe's on a kernel without uprobe_multi): 6.18 refuses one to
 * CAP_PERFMON without CAP_SYS_ADMIN (EACCES), which attach_failed says. */
static bool have_caps(void)
{
	struct __user_cap_header_struct hdr = { _LINUX_CAPABILITY_VERSION_3, 0 };
	struct __user_cap_data_struct data[2];

	if (syscall(SYS_capget, &hdr, data))
		return false;
	uint64_t eff = data[0].effective | ((uint64_t)data[1].effective << 32);
	if (eff & (1ULL << CAP_SYS_ADMIN))
		return true;
	return (eff & (1ULL << CAP_BPF)) && (eff & (1ULL << CAP_PERFMON));
}

/* Where the kernel's BTF is; TALLY_BTF_PATH overrides it, so that the test
 * suite can show what a kernel without BTF gets. */
static bool have_btf(void)
{
	const char *p = getenv("TALLY_BTF_PATH");

	return access(p ? p : "/sys/kernel/btf/vmlinux", R_OK) == 0;
}

/* The libraries installed beside the tally binary. */
static int lib_beside_self(const char *name, char *out, size_t len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n < 0)
		return -errno;
	self[n] = 0;
	char *slash = strrchr(self, '/');
	if (slash)
		*slash = 0;
	if ((size_t)snprintf(out, len, "%s/%s", self, name) >= len)
		return -ENAMETOOLONG;
	return access(out, R_OK) ? -errno : 0;
}

/* A probe that could not be attached: the target may have exited meanwhile,
 * which is said as such (status 5). */
static int attach_failed(struct session *s, const char *what, int err)
{
	if (err == -ESRCH || (!s->spawned && !target_alive(s->pid)))
		return session_fail(TALLY_EXIT_NO_PROCESS, "process %d exited during attach",
				    s->pid);
	if (err == -EACCES || err == -EPERM)
		return session_fail(
			TALLY_EXIT_PERM,
			"cannot attach uprobes to %s: %s: this kernel wants CAP_SYS_ADMIN for "
			"uprobe perf events (CAP_BPF with CAP_PERFMON is not enough)",
			what, strerror(-err));
	return session_fail(TALLY_EXIT_FAIL, "cannot attach to %s: %s", what, strerror(-err));
}

static int attach_libs(struct session *s)
{
	int err;

	if (s->injected) {
		/* before the library is loaded: the kernel raises its semaphore as
		 * dlopen maps it, and the interposer finds its tracer there */
		err = loader_attach_batch(s->loader, s->pid, s->alloc_path);
		if (err)
			return attach_failed(s, s->alloc_path, err);
	} else if (s->alloc_path[0]) {
		err = loader_attach_alloc(s->loader, s->pid, s->alloc_path);
		if (err)
			return attach_failed(s, s->alloc_path, err);
	}
	if (s->sdk_path[0]) {
		err = loader_attach_sdk(s->loader, s->pid, s->sdk_path);
		if (err)
			return attach_failed(s, s->sdk_path, err);
	}
	return TALLY_EXIT_OK;
}

static int start_glibc(struct session *s)
{
	char libc[TARGET_PATH_MAX];
	uint64_t bias;
	int err;

	/* a started command maps the libc tally maps; a running one says which */
	err = target_find_lib(s->spawned ? getpid() : s->pid, "libc.so", libc, sizeof(libc), &bias);
	if (err && !s->spawned && !target_alive(s->pid))
		return session_fail(TALLY_EXIT_NO_PROCESS, "process %d exited during attach",
				    s->pid);
	if (err)
		return session_fail(TALLY_EXIT_FAIL, "no libc mapped in %d: %s", s->pid,
				    strerror(-err));
	session_loaded(s);
	timing_mark("glibc.bpf.o: loaded (waited for)");
	if (!s->glibc)
		return session_fail(TALLY_EXIT_FAIL, "cannot load the glibc probes: %s",
				    strerror(-s->glibc_err));
	err = glibc_trace_attach(s->glibc, s->pid, libc);
	timing_mark("glibc: attach");
	if (err)
		return attach_failed(s, libc, err);
	return TALLY_EXIT_OK;
}

/* The dynamic loader a process of the tree uses: a started command's is
 * the one tally maps (as its libc is); a running one says. */
static int find_ldso(pid_t pid, char *path, size_t len)
{
	static const char *const names[] = { "ld-linux-x86-64", "ld-linux-aarch64", "ld-linux" };
	uint64_t bias;
	int err = -ENOENT;

	for (size_t i = 0; err && i < sizeof(names) / sizeof(names[0]); i++)
		err = target_find_lib(pid, names[i], path, len, &bias);
	return err;
}

/* The driver's probes and sched_yield's, for the GPU figures. Not fatal: a
 * process without a GPU has none of this. The driver is found as it is
 * loaded, from wherever it comes (the probe on the dynamic loader holds the
 * loading thread until its probes are attached), or at once when a running
 * process has it already: then what it did before cannot be known. */
enum gpu_mode { GPU_OFF, GPU_AUTO, GPU_ON }; /* s->gpu_mode */

/* TALLY_GPU: "off" (no GPU probes at all), "on" (follow the dynamic loader
 * for a driver even on a machine without a GPU: a fake driver, a container
 * that brings its own), or "auto", the default: follow it where an NVIDIA
 * driver is installed (/proc/driver/nvidia, /dev/nvidiactl, or WSL's
 * /dev/dxg), since the probe costs every dlopen a trap. */
static enum gpu_mode gpu_mode(void)
{
	const char *e = getenv("TALLY_GPU");

	if (e && !strcmp(e, "off"))
		return GPU_OFF;
	if (e && !strcmp(e, "on"))
		return GPU_ON;
	if (e && *e && strcmp(e, "auto"))
		fprintf(stderr, "tally: TALLY_GPU=%s: want on, off or auto; auto it is\n", e);
	return GPU_AUTO;
}

static bool have_gpu_driver(void)
{
	return !access("/proc/driver/nvidia", F_OK) || !access("/dev/nvidiactl", F_OK) ||
	       !access("/dev/dxg", F_OK);
}

static void start_cuda(struct session *s, bool verbose)
{
	enum gpu_mode mode = s->gpu_mode;
	char ldso[TARGET_PATH_MAX], libc[TARGET_PATH_MAX];
	pid_t self_or_target = s->spawned ? getpid() : s->pid;
	uint64_t bias;
	int err;

	if (mode == GPU_OFF)
		return;
	session_loaded(s);
	timing_mark("cuda.bpf.o: loaded (waited for)");
	if (!s->cuda) {
		fprintf(stderr, "tally: no GPU figures: cannot load the driver probes: %s\n",
			strerror(-s->cuda_err));
		return;
	}
	/* following, on the loader's file for every process of the tree: one
	 * that execs loads its first objects before tally could attach per pid */
	err = s->gpu_follow ? find_ldso(self_or_target, ldso, sizeof(ldso)) : -ENODEV;
	if (!err)
		err = cuda_trace_follow_loader(s->cuda, s->follow ? -1 : s->pid, ldso);
	if (err == -ENODEV && verbose)
		fprintf(stderr, "tally: no GPU driver installed here: a CUDA driver loaded later "
				"is not followed (TALLY_GPU=on follows it)\n");
	else if (err && verbose)
		fprintf(stderr,
			"tally: no dynamic loader hook in %d (%s): a CUDA driver it loads later "
			"is not seen\n",
			s->pid, strerror(-err));
	if (!s->spawned)
		session_cuda_running(s, s->pid);
	if (!target_find_lib(self_or_target, "libc.so", libc, sizeof(libc), &bias))
		cuda_trace_attach_yield(s->cuda, s->pid, libc);
	timing_mark("cuda: attach loader, sched_yield");
}

static int spawn(struct session *s, const struct session_opts *o)
{
	char alloc[PATH_MAX], sdk[PATH_MAX], preload[2 * PATH_MAX + 2];
	char cupti[PATH_MAX], inject[PATH_MAX + 32];
	char rate[48];
	char *env_extra[3] = { NULL, NULL, NULL };
	int err;

	err = lib_beside_self("libtally_alloc.so", alloc, sizeof(alloc));
	if (!err)
		err = lib_beside_self("libtally.so", sdk, sizeof(sdk));
	if (err)
		return session_fail(TALLY_EXIT_FAIL, "tally's libraries are not beside it: %s",
				    strerror(-err));
	snprintf(preload, sizeof(preload), "%s:%s", alloc, sdk);
	/* CUPTI for a command tally starts, when it was built (a CUDA toolkit
	 * was there) and nobody else injects */
	if (!lib_beside_self("libtally_cupti.so", cupti, sizeof(cupti)) &&
	    !getenv("CUDA_INJECTION64_PATH")) {
		snprintf(inject, sizeof(inject), "CUDA_INJECTION64_PATH=%s", cupti);
		env_extra[0] = inject;
		s->cupti = true;
	}
	/* the allocator reads its sampling rate at start */
	snprintf(rate, sizeof(rate), "TALLY_SAMPLE_RATE=%llu", (unsigned long long)s->sample_rate);
	env_extra[env_extra[0] ? 1 : 0] = rate;
	err = target_spawn(o->cmd, o->no_preload ? NULL : preload, env_extra, o->cmd_stdio,
			   o->cmd_stdout_to_stderr, &s->child);
	if (err)
		return session_fail(TALLY_EXIT_CMD, "cannot start %s: %s", o->cmd[0],
				    strerror(-err));
	s->pid = s->child.pid;
	s->spawned = true;
	/* the probes sit on the files; with --no-preload they fire if CMD loads them */
	strcpy(s->alloc_path, alloc);
	strcpy(s->sdk_path, sdk);
	return TALLY_EXIT_OK;
}

/* A process on a malloc tally cannot trace (jemalloc, tcmalloc, mimalloc,
 * a static program's own): named, and glibc mode's probes left out (they
 * would see nothing: redis-server on jemalloc showed as "glibc" with 0 live
 * bytes, and advice to use --inject, which refuses it). */
static bool foreign_malloc(struct session *s)
{
	char path[TARGET_PATH_MAX];
	const char *name;

	if (target_allocator(s->pid, &name, path, sizeof(path)) || target_allocator_traced(name))
		return false;
	s->foreign_alloc = name;
	fprintf(stderr,
		"tally: %d allocates with %s (%s): tally traces its own allocator and glibc's "
		"malloc, not this one: its heap is not traced (CPU, groups and GPU are)\n",
		s->pid, name, path);
	return true;
}

static int find_running(struct session *s)
{
	uint64_t bias;
	int err;

	if (!target_alive(s->pid))
		return session_fail(TALLY_EXIT_NO_PROCESS, "no process %d", s->pid);
	if (target_is_kthread(s->pid))
		return session_fail(TALLY_EXIT_NO_PROCESS,
				    "process %d is a kernel thread: it has no user memory to trace",
				    s->pid);
	err = target_find_lib(s->pid, "libtally_alloc.so", s->alloc_path, sizeof(s->alloc_path),
			      &bias);
	if (err == -ENOENT && s->injected) {
		char why[512];
		int rc = lib_beside_self("libtally_interpose.so", s->alloc_path,
					 sizeof(s->alloc_path));
		if (rc)
			return session_fail(TALLY_EXIT_FAIL,
					    "libtally_interpose.so is not beside tally: %s",
					    strerror(-rc));
		rc = inject_check(s->pid, s->alloc_path, why, sizeof(why));
		if (rc)
			return session_fail(rc == -EPERM ? TALLY_EXIT_PERM :
					    rc == -ESRCH ? TALLY_EXIT_NO_PROCESS :
							   TALLY_EXIT_FAIL,
					    "%s", why);
	} else if (err == -ENOENT) {
		s->alloc_path[0] = 0;
		if (!foreign_malloc(s) && !s->no_glibc)
			fprintf(stderr,
				"tally: %d does not use libtally_alloc: glibc mode (a probe per "
				"malloc call: slow, and only what is allocated from now on; "
				"--inject is faster)\n",
				s->pid);
	} else if (err == -EACCES || err == -EPERM) {
		return session_fail(TALLY_EXIT_PERM,
				    "no permission to read the memory map of process %d: %s",
				    s->pid, strerror(-err));
	} else if (err) {
		return session_fail(TALLY_EXIT_NO_PROCESS, "cannot read the maps of %d: %s", s->pid,
				    strerror(-err));
	} else if (s->injected) {
		return session_fail(
			TALLY_EXIT_USAGE,
			"process %d uses libtally_alloc already: trace it without --inject",
			s->pid);
	} else {
		s->heaps_addr = bias; /* plus the symbol's address, below */
	}
	if (target_find_lib(s->pid, "libtally.so", s->sdk_path, sizeof(s->sdk_path), &bias))
		s->sdk_path[0] = 0;
	else
		s->registry_addr = bias;
	return TALLY_EXIT_OK;
}

/* A cleared session, its --group rules, and what tracing needs at all. */
static int session_prepare(struct session *s, const struct session_opts *o)
{
	memset(s, 0, sizeof(*s));
	s->pidfd = -1;
	s->lock.fd = s->lock.dir_fd = -1;
	s->child.gate_fd = s->child.status_fd = -1;
	s->held_tail = &s->held;
	s->tree_held_tail = &s->tree_held;
	s->sample_rate = o->sample_rate;
	tree_init(&s->tree);
	s->pview = malloc(sizeof(*s->pview)); /* NULL: running children say so */
	model_init(&s->model);
	for (unsigned i = 0; i < o->nrules; i++) {
		if (model_add_rule(&s->model, o->rules[i]))
			return session_fail(TALLY_EXIT_USAGE, "bad --group '%s': want NAME=GLOB",
					    o->rules[i]);
	}
	if (!have_caps())
		return session_fail(TALLY_EXIT_PERM,
				    "needs root (CAP_SYS_ADMIN; CAP_SYS_PTRACE too for "
				    "another user's process)");
	if (!have_btf())
		return session_fail(
			TALLY_EXIT_NO_BTF,
			"the kernel has no BTF (/sys/kernel/btf/vmlinux): tally needs a kernel "
			"built with CONFIG_DEBUG_INFO_BTF");
	return TALLY_EXIT_OK;
}

/* One tally per target; then the addresses find_running left as biases:
 * the symbols' addresses added. */
static int session_lock(struct session *s)
{
	uint64_t a;
	int rc = target_lock(&s->lock, TARGET_LOCK_DIR, s->pid);

	if (rc == -EBUSY)
		return session_fail(TALLY_EXIT_BUSY, "another tally is tracing process %d", s->pid);
	if (rc)
		fprintf(stderr,
			"tally: warning: no lock for process %d in %s (%s): another tally could "
			"trace it too\n",
			s->pid, TARGET_LOCK_DIR, strerror(-rc));
	uint64_t c;
	s->cut_addr = 0; /* an allocator built before cuts were answered: none */
	if (s->heaps_addr && !target_elf_symbol(s->alloc_path, "tally_cut", &c))
		s->cut_addr = s->heaps_addr + c;
	if (s->heaps_addr && !target_elf_symbol(s->alloc_path, "tally_heaps", &a))
		s->heaps_addr += a;
	else
		s->heaps_addr = s->cut_addr = 0;
	if (s->registry_addr && !target_elf_symbol(s->sdk_path, "tally_registry", &a))
		s->registry_addr += a;
	else
		s->registry_addr = 0;
	return TALLY_EXIT_OK;
}

/* CMD held at the door: every probe on, then let it run. Addresses are only
 * known once it runs: session_read_final finds them. */
static int attach_spawned(struct session *s, const struct session_opts *o)
{
	char cupti[PATH_MAX];
	int rc = attach_libs(s), err;

	timing_mark("attach: USDT of the libraries");
	if (rc)
		return rc;
	if (s->cupti && (lib_beside_self("libtally_cupti.so", cupti, sizeof(cupti)) ||
			 loader_attach_batch(s->loader, s->pid, cupti)))
		s->cupti = false;
	timing_mark("attach: USDT of libtally_cupti");
	start_cuda(s, o->verbose);
	/* CMD may bring libtally_alloc itself: the glibc probes are a fallback
	 * here, and the batches decide which fed the figures */
	if (o->no_preload && start_glibc(s)) {
		fprintf(stderr, "tally: glibc mode unavailable for %s\n", o->cmd[0]);
		glibc_trace_close(s->glibc);
		s->glibc = NULL;
	}
	err = target_release(&s->child);
	timing_mark("target's exec (first instruction)");
	if (err)
		return session_fail(TALLY_EXIT_CMD, "cannot run %s: %s", o->cmd[0], strerror(-err));
	return TALLY_EXIT_OK;
}

/* A running process: the probes, then its state read from memory. */
static int attach_running(struct session *s, bool verbose)
{
	int rc;

	/* before the probes raise the semaphores: the first gaps are drawn at
	 * this rate */
	if (s->alloc_path[0] && !s->injected)
		session_sample_attach(s, s->pid);
	rc = attach_libs(s);
	if (!rc && s->injected) {
		char why[512];
		/* holding the target's lock, a recording found there is a dead
		 * tally's: taken over */
		int err = inject_load(s->pid, s->alloc_path, s->sample_rate, s->lock.fd >= 0, why,
				      sizeof(why));
		timing_mark("inject: libtally_interpose.so loaded and started");
		if (err)
			return session_fail(err == -ESRCH ? TALLY_EXIT_NO_PROCESS : TALLY_EXIT_FAIL,
					    "--inject: %s", why);
	}

	if (!rc && !s->alloc_path[0] && !s->foreign_alloc && !s->no_glibc)
		rc = start_glibc(s);
	if (!rc)
		start_cuda(s, verbose);
	if (!rc)
		rc = session_read_attach(s);
	if (rc)
		return rc;
	if (s->follow)
		session_adopt_descendants(s);
	if (!target_alive(s->pid))
		return session_fail(TALLY_EXIT_NO_PROCESS, "process %d exited during attach",
				    s->pid);
	return TALLY_EXIT_OK;
}

int session_start(struct session *s, const struct session_opts *o)
{
	int rc = session_prepare(s, o);

	if (rc)
		return rc;
	s->pid = o->pid;
	s->late = !o->cmd;
	s->injected = o->inject;
	s->no_glibc = o->no_glibc;
	timing_enable(o->verbose);
	timing_mark("prepare (caps, BTF present)");
	rc = o->cmd ? spawn(s, o) : find_running(s);
	timing_mark(o->cmd ? "spawn (held at the door)" : "find the running target");
	if (rc)
		return rc;
	/* A target busy on every CPU would starve the consumer, and the ring
	 * holds only milliseconds of a busy allocator's records: tally runs
	 * ahead of it (a started CMD was forked before, at the usual nice;
	 * threads tally starts from here on inherit it). */
	setpriority(PRIO_PROCESS, 0, TALLY_NICE); /* not fatal: a full ring is counted */
	rc = session_lock(s);
	timing_mark("lock, library symbols");
	s->gpu_mode = gpu_mode();
	s->gpu_follow = s->gpu_mode == GPU_ON || (s->gpu_mode == GPU_AUTO && have_gpu_driver());
	/* glibc mode: a started command's fallback, or a running one's that
	 * does not use tally's allocator */
	if (!rc)
		rc = session_load(s, o, s->gpu_mode != GPU_OFF,
				  s->spawned ?
					  o->no_preload :
					  !s->alloc_path[0] && !s->foreign_alloc && !s->no_glibc);
	if (!rc)
		rc = s->spawned ? attach_spawned(s, o) : attach_running(s, o->verbose);
	if (rc)
		return rc;
	target_comm(s->pid, s->pid, s->comm, sizeof(s->comm));
	session_place(s);
	if (o->verbose)
		fprintf(stderr, "tally: attached to %d (%s)\n", s->pid, s->comm);
	return TALLY_EXIT_OK;
}
