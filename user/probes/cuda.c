// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading bpf/cuda.bpf.c: entry and return uprobes on the CUDA driver's
 * entry points in libcuda.so (not libcudart: most programs link the runtime
 * statically), sharing tally.bpf.c's ring buffer, lost counters, thread and
 * process maps; a uprobe on the dynamic loader's debugger hook, which holds
 * a thread that maps a driver until its probes are attached here; and one
 * on libc's sched_yield.
 *
 * Each process gets its own driver probes, attached for its pid only: a
 * pid-wide uprobe on a file every GPU program of the machine maps would
 * trap in all of them.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/cuda_api.h"
#include "../util/clock.h"
#include "../util/grow.h"
#include "cuda.h"
#include "cuda.skel.h"
#include "loader.h"
#include "../os/target.h"
#include "uprobe_multi.h"

struct entry {
	const char *name;
	uint64_t cookie; /* enum cuda_kind | enum tally_gpu_api << CUDA_API_SHIFT */
};

#define API(a) ((uint64_t)(a) << CUDA_API_SHIFT)
static const struct entry entries[] = {
	{ "cuLaunchKernel", CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL) },
	{ "cuLaunchKernel_ptsz", CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL) },
	{ "cuLaunchKernelEx", CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL_EX) },
	{ "cuLaunchKernelEx_ptsz", CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL_EX) },
	{ "cuLaunchCooperativeKernel", CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE) },
	{ "cuLaunchCooperativeKernel_ptsz",
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE) },
	{ "cuLaunchCooperativeKernelMultiDevice",
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI) },
	{ "cuGraphLaunch", CUDA_KIND_GRAPH | API(TALLY_GPU_API_GRAPH_LAUNCH) },
	{ "cuGraphLaunch_ptsz", CUDA_KIND_GRAPH | API(TALLY_GPU_API_GRAPH_LAUNCH) },
	{ "cuMemAlloc_v2", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocManaged", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocAsync", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocAsync_ptsz", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync_ptsz", CUDA_KIND_DEV_ALLOC },
	{ "cuMemCreate", CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocPitch_v2", CUDA_KIND_DEV_PITCH },
	{ "cuMemFree_v2", CUDA_KIND_DEV_FREE },
	{ "cuMemFreeAsync", CUDA_KIND_DEV_FREE },
	{ "cuMemFreeAsync_ptsz", CUDA_KIND_DEV_FREE },
	{ "cuMemRelease", CUDA_KIND_DEV_FREE },
	{ "cuMemHostAlloc", CUDA_KIND_HOST_ALLOC },
	{ "cuMemAllocHost_v2", CUDA_KIND_HOST_ALLOC },
	{ "cuMemHostRegister_v2", CUDA_KIND_HOST_REGISTER },
	{ "cuMemFreeHost", CUDA_KIND_HOST_FREE },
	{ "cuMemHostUnregister", CUDA_KIND_HOST_FREE },
	{ "cuModuleLoadData", CUDA_KIND_IMAGE },
	{ "cuModuleLoadDataEx", CUDA_KIND_IMAGE },
	{ "cuModuleLoadFatBinary", CUDA_KIND_IMAGE },
	{ "cuLibraryLoadData", CUDA_KIND_IMAGE },
	{ "cuModuleUnload", CUDA_KIND_IMAGE_FREE },
	{ "cuLibraryUnload", CUDA_KIND_IMAGE_FREE },
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))

/* One process's driver probes: its entry and return links. */
struct cuda_proc {
	pid_t pid;
	unsigned nprobed; /* entry points found in its driver */
	int links[3];	  /* entry, return, sched_yield's; -1: none */
	bool late, hold_timed_out, attach_failed, cupti;
};

struct cuda_trace {
	struct cuda_bpf *skel;
	pid_t root;
	pthread_mutex_t lock; /* the drain thread of a late attach attaches too */
	int loader;	      /* the dynamic loader's probe (a link), or -1 */
	struct cuda_proc **procs;
	unsigned nprocs, cap;
};

/* The maps tally.bpf.c shares; every program on uprobe_multi links. */
static int configure(struct cuda_bpf *skel, const struct cuda_shared *maps)
{
	static const char *const uprobes[] = { "uprobe", "uprobe.s", "uretprobe", NULL };
	int err = bpf_map__reuse_fd(skel->maps.events, maps->events_fd);

	if (!err)
		err = bpf_map__reuse_fd(skel->maps.lost, maps->lost_fd);
	if (!err)
		err = bpf_map__reuse_fd(skel->maps.threads, maps->threads_fd);
	if (!err)
		err = bpf_map__reuse_fd(skel->maps.procs, maps->procs_fd);
	if (!err)
		err = uprobe_multi_prepare(skel->obj, uprobes);
	return err;
}

/* Without a driver to probe, the maps only its probes use get one entry:
 * each is made whole at the load (preallocated), ~30 ms for all of them. */
static int size_for_no_driver(struct cuda_bpf *skel)
{
	struct bpf_map *unused[] = { skel->maps.driver_ready, skel->maps.driver_spans,
				     skel->maps.calls, skel->maps.blocks, skel->maps.walked };
	int err = 0;

	for (size_t i = 0; !err && i < sizeof(unused) / sizeof(unused[0]); i++)
		err = bpf_map__set_max_entries(unused[i], 1);
	return err;
}

struct cuda_trace *cuda_trace_open(pid_t root, const struct cuda_shared *maps, bool driver,
				   int *err)
{
	struct cuda_trace *c = calloc(1, sizeof(*c));

	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	pthread_mutex_init(&c->lock, NULL);
	c->root = root;
	c->loader = -1;
	c->skel = cuda_bpf__open();
	if (!c->skel) {
		*err = -errno;
		goto fail;
	}
	c->skel->rodata->target_tgid = (uint32_t)root;
	*err = configure(c->skel, maps);
	if (!*err && !driver)
		*err = size_for_no_driver(c->skel);
	if (!*err) {
		loader_log_begin();
		*err = cuda_bpf__load(c->skel);
		LOADER_LOG_END("cuda.bpf.o");
	}
	if (*err)
		goto fail;
	return c;
fail:
	cuda_trace_close(c);
	return NULL;
}

static struct cuda_proc *proc_of(struct cuda_trace *c, pid_t pid, bool create)
{
	struct cuda_proc *p = NULL;

	for (unsigned i = 0; i < c->nprocs; i++) {
		if (c->procs[i]->pid == pid)
			return c->procs[i];
		if (!c->procs[i]->pid && !p)
			p = c->procs[i]; /* a process that ended */
	}
	if (!create)
		return NULL;
	if (p) {
		p->pid = pid;
		return p;
	}
	size_t cap = c->cap;
	if (grow((void **)&c->procs, &cap, (size_t)c->nprocs + 1, sizeof(*c->procs), 8))
		return NULL;
	c->cap = (unsigned)cap;
	p = calloc(1, sizeof(*p));
	if (p) {
		p->pid = pid;
		p->links[0] = p->links[1] = p->links[2] = -1;
		c->procs[c->nprocs++] = p;
	}
	return p;
}

/* One uprobe_multi link of prog on the offsets of `path`, for pid only
 * (-1: every process that maps it). */
static int link_multi(struct bpf_program *prog, const char *path, const uint64_t *off,
		      const uint64_t *cookies, unsigned n, pid_t pid, bool ret)
{
	return uprobe_multi_link(bpf_program__fd(prog), path, off, NULL, cookies, n, pid, ret);
}

int cuda_trace_follow_loader(struct cuda_trace *c, pid_t pid, const char *ldso)
{
	const char *names[] = { "_dl_debug_state", "_r_debug" };
	uint64_t addr[2], off, cookie;
	int err = target_elf_symbols(ldso, names, 2, addr);

	if (!err && (!addr[0] || !addr[1]))
		err = -ENOENT;
	off = addr[0];
	if (!err)
		err = target_elf_file_offsets(ldso, &off, 1);
	if (err)
		return err;
	/* the probe finds _r_debug from where it fired */
	cookie = addr[1] - addr[0];
	pthread_mutex_lock(&c->lock);
	if (c->loader >= 0) {
		err = -EALREADY;
	} else {
		/* a uprobe_multi link too: a perf event's costs ~70 ms to let go */
		c->loader =
			link_multi(c->skel->progs.cuda_loader, ldso, &off, &cookie, 1, pid, false);
		err = c->loader < 0 ? c->loader : 0;
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

/* Letting a link go waits for the kernel's grace periods (~70 ms here):
 * on a thread of its own, not the one that takes the ring. Every probe is
 * a uprobe_multi link: letting one go takes no lock that attaching another
 * needs (a perf event's does: the tracing core's event_mutex, held across
 * the grace period, which a thread held at a driver's load delays). */
static void *close_fds(void *arg)
{
	int *fds = arg;

	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	free(fds);
	return NULL;
}

/* p's links from [0] up to [n - 1] go: the driver's (2), or all (3). */
static void unlink_proc(struct cuda_proc *p, int n)
{
	int *fds = malloc(3 * sizeof(*fds));
	pthread_t t;

	for (int i = 0; i < 3; i++) {
		if (fds)
			fds[i] = i < n ? p->links[i] : -1;
		else if (i < n && p->links[i] >= 0)
			close(p->links[i]);
		if (i < n)
			p->links[i] = -1;
	}
	if (fds && pthread_create(&t, NULL, close_fds, fds))
		close_fds(fds);
	else if (fds)
		pthread_detach(t);
}

/* The file offsets of n symbols of `path` (0: not there), as uprobes want them. */
static int symbol_offsets(const char *path, const char *const names[], size_t n, uint64_t off[])
{
	int err = target_elf_symbols(path, names, n, off);

	return err ? err : target_elf_file_offsets(path, off, n);
}

/* Entry and return probes on every entry point the driver at `path` has,
 * for pid only; both or none (a partial attach would count half of the
 * figures: allocations without their frees). */
static int attach_driver(struct cuda_trace *c, struct cuda_proc *p, const char *path)
{
	const char *names[NENTRIES];
	uint64_t off[NENTRIES], cookies[NENTRIES];
	unsigned n = 0;
	int err;

	for (size_t i = 0; i < NENTRIES; i++)
		names[i] = entries[i].name;
	err = symbol_offsets(path, names, NENTRIES, off);
	if (err)
		return err;
	/* a driver without some entry point (older, or a fake) is fine */
	for (size_t i = 0; i < NENTRIES; i++) {
		if (!off[i])
			continue;
		off[n] = off[i];
		cookies[n++] = entries[i].cookie;
	}
	if (!n)
		return -ENOENT;
	p->links[0] = link_multi(c->skel->progs.cuda_entry, path, off, cookies, n, p->pid, false);
	p->links[1] = link_multi(c->skel->progs.cuda_return, path, off, cookies, n, p->pid, true);
	err = p->links[0] < 0 ? p->links[0] : p->links[1] < 0 ? p->links[1] : 0;
	if (err)
		unlink_proc(p, 2);
	else
		p->nprobed = n;
	return err;
}

/* sched_yield in pid's libc at `path`: a link's fd, or a negative errno. */
static int attach_yield(struct cuda_trace *c, pid_t pid, const char *path)
{
	const char *name = "sched_yield";
	uint64_t off, cookie = 0;
	int err = symbol_offsets(path, &name, 1, &off);

	if (!err && !off)
		err = -ENOENT;
	if (err)
		return err;
	return link_multi(c->skel->progs.cuda_sched_yield, path, &off, &cookie, 1, pid, false);
}

/* Where the driver lies in pid, for the sched_yield probe. */
static void note_span(struct cuda_trace *c, pid_t pid, uint64_t base)
{
	uint64_t end;
	uint32_t k = (uint32_t)pid;
	struct {
		uint64_t lo, hi;
	} span;

	if (target_map_span(pid, base, &end))
		return;
	span.lo = base;
	span.hi = end;
	bpf_map__update_elem(c->skel->maps.driver_spans, &k, sizeof(k), &span, sizeof(span),
			     BPF_ANY);
}

/* The loader's probe lets pid's threads go, and holds none of it again. */
static void set_ready(struct cuda_trace *c, pid_t pid)
{
	uint32_t k = (uint32_t)pid, one = 1;

	bpf_map__update_elem(c->skel->maps.driver_ready, &k, sizeof(k), &one, sizeof(one), BPF_ANY);
}

/* held: a thread of pid waits in the loader's probe, let go either way;
 * else pid is held no more only once it has a driver dealt with. */
static int attach_mapped(struct cuda_trace *c, pid_t pid, bool late, bool held)
{
	char path[TARGET_PATH_MAX];
	struct cuda_proc *p;
	uint64_t base;
	int err = target_find_lib(pid, "libcuda.so", path, sizeof(path), &base);

	if (err == -ENOENT && !held)
		return err;
	if (err)
		goto out;
	p = proc_of(c, pid, true);
	if (!p) {
		err = -ENOMEM;
		goto out;
	}
	if (p->nprobed || p->cupti) /* a second load message, or CUPTI speaks already */
		goto out;
	p->late = late;
	err = attach_driver(c, p, path);
	p->attach_failed = err != 0;
	if (!err)
		note_span(c, pid, base);
	/* another process of the tree: its yields count from its driver's load
	 * (a pid-wide probe on libc would trap in every program's sched_yield) */
	if (!err && pid != c->root && p->links[2] < 0 &&
	    !target_find_lib(pid, "libc.so", path, sizeof(path), &base))
		p->links[2] = attach_yield(c, pid, path);
out:
	set_ready(c, pid);
	return err;
}

int cuda_trace_attach_mapped(struct cuda_trace *c, pid_t pid, bool late)
{
	pthread_mutex_lock(&c->lock);
	int err = attach_mapped(c, pid, late, false);
	pthread_mutex_unlock(&c->lock);
	return err;
}

void cuda_trace_on_msg(struct cuda_trace *c, const struct tally_msg_driver *m, bool verbose)
{
	pid_t pid = (pid_t)m->hdr.pid;
	struct cuda_proc *p;
	uint64_t t0 = clock_now_ns();
	int err;

	pthread_mutex_lock(&c->lock);
	if (m->hdr.kind == TALLY_MSG_DRIVER_LOAD) {
		err = attach_mapped(c, pid, false, true);
		if (err && err != -ENOENT)
			fprintf(stderr, "tally: cannot probe the CUDA driver in %d: %s\n", pid,
				strerror(-err));
		else if (verbose)
			fprintf(stderr,
				"tally: %d loaded the CUDA driver: its probes attached in %.1f ms\n",
				pid, (double)(clock_now_ns() - t0) / 1e6);
	} else if (m->hdr.kind == TALLY_MSG_DRIVER_HELD &&
		   (m->hdr.flags & TALLY_DRIVER_TIMED_OUT) && (p = proc_of(c, pid, true)) &&
		   !p->hold_timed_out) {
		p->hold_timed_out = true;
		fprintf(stderr,
			"tally: %d: the CUDA driver's probes came %.1f s after it loaded the "
			"driver: its first GPU calls may be missing\n",
			pid, (double)m->waited_ns / 1e9);
	}
	pthread_mutex_unlock(&c->lock);
}

void cuda_trace_cupti_spoke(struct cuda_trace *c, pid_t pid, bool verbose)
{
	struct cuda_proc *p;

	pthread_mutex_lock(&c->lock);
	p = proc_of(c, pid, true);
	if (p && !p->cupti) {
		bool had = p->links[0] >= 0;
		p->cupti = true;
		unlink_proc(p, 2);
		set_ready(c, pid); /* and never held at a driver's load again */
		if (had && verbose)
			fprintf(stderr,
				"tally: %d: CUPTI speaks for it: the driver's probes let go\n",
				pid);
	}
	pthread_mutex_unlock(&c->lock);
}

/* pid's entries of the map of yields (few: one per process and group):
 * into out by group, or (out NULL) deleted. */
static void yields_of(struct cuda_trace *c, pid_t pid, uint64_t out[TALLY_MAX_GROUPS])
{
	struct {
		uint32_t tgid, group;
	} k, next;
	int fd = bpf_map__fd(c->skel->maps.os_yields);
	uint64_t v;

	for (int more = !bpf_map_get_next_key(fd, NULL, &next); more;) {
		k = next;
		/* the next key first: deleting k must not lose the walk */
		more = !bpf_map_get_next_key(fd, &k, &next);
		if (k.tgid != (uint32_t)pid)
			continue;
		if (!out)
			bpf_map_delete_elem(fd, &k);
		else if (k.group < TALLY_MAX_GROUPS && !bpf_map_lookup_elem(fd, &k, &v))
			out[k.group] = v;
	}
}

void cuda_trace_forget(struct cuda_trace *c, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	struct cuda_proc *p;

	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	p = proc_of(c, pid, false);
	if (p) {
		unlink_proc(p, 3);
		*p = (struct cuda_proc){ .pid = 0, .links = { -1, -1, -1 } }; /* a free slot */
	}
	/* a pid used again is a process of its own */
	bpf_map__delete_elem(c->skel->maps.driver_ready, &key, sizeof(key), 0);
	bpf_map__delete_elem(c->skel->maps.driver_spans, &key, sizeof(key), 0);
	bpf_map__delete_elem(c->skel->maps.walked, &key, sizeof(key), 0);
	yields_of(c, pid, NULL);
	pthread_mutex_unlock(&c->lock);
}

int cuda_trace_attach_yield(struct cuda_trace *c, pid_t pid, const char *libc)
{
	struct cuda_proc *p;
	int err = -ENOMEM;

	pthread_mutex_lock(&c->lock);
	p = proc_of(c, pid, true);
	if (p && p->links[2] < 0) {
		p->links[2] = attach_yield(c, pid, libc);
		err = p->links[2] < 0 ? p->links[2] : 0;
	}
	pthread_mutex_unlock(&c->lock);
	return err;
}

void cuda_trace_read(struct cuda_trace *c, pid_t pid, struct cuda_figures *f)
{
	const struct cuda_proc *p;

	memset(f, 0, sizeof(*f));
	if (!c)
		return;
	pthread_mutex_lock(&c->lock);
	if (pid == c->root) {
		f->untracked = c->skel->bss->untracked;
		f->unknown_frees = c->skel->bss->unknown_frees;
	}
	yields_of(c, pid, f->os_yields);
	p = proc_of(c, pid, false);
	if (p) {
		f->entry_points = p->nprobed;
		f->late = p->late;
		f->hold_timed_out = p->hold_timed_out;
		f->attach_failed = p->attach_failed;
		f->cupti_took_over = p->cupti && p->nprobed;
	}
	pthread_mutex_unlock(&c->lock);
}

void cuda_trace_close(struct cuda_trace *c)
{
	int *fds;
	unsigned n = 0;

	if (!c)
		return;
	/* every link at once: their releases' grace periods overlap */
	fds = malloc((3 * c->nprocs + 1) * sizeof(*fds));
	for (unsigned i = 0; i < c->nprocs; i++) {
		for (int k = 0; k < 3; k++) {
			if (fds)
				fds[n++] = c->procs[i]->links[k];
			else if (c->procs[i]->links[k] >= 0)
				close(c->procs[i]->links[k]);
		}
		free(c->procs[i]);
	}
	if (fds)
		fds[n++] = c->loader;
	else if (c->loader >= 0)
		close(c->loader);
	uprobe_multi_close(fds, n);
	free(fds);
	free(c->procs);
	cuda_bpf__destroy(c->skel);
	pthread_mutex_destroy(&c->lock);
	free(c);
}
