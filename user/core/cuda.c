// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading bpf/cuda.bpf.c: entry and return uprobes on the CUDA driver's
 * entry points in libcuda.so.1 (not libcudart: most programs link the
 * runtime statically), sharing tally.bpf.c's ring buffer, lost counters and
 * thread map, and a uprobe on libc's sched_yield.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/cuda_api.h"
#include "cuda.h"
#include "links.h"
#include "cuda.skel.h"
#include "target.h"

enum shape { SHAPE_CALL, SHAPE_OUT_SIZE, SHAPE_PITCH, SHAPE_IMAGE };

struct entry {
	const char *name;
	enum shape shape;
	uint64_t cookie; /* enum cuda_kind | enum tally_gpu_api << CUDA_API_SHIFT */
};

#define API(a) ((uint64_t)(a) << CUDA_API_SHIFT)
static const struct entry entries[] = {
	{ "cuLaunchKernel", SHAPE_CALL, CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL) },
	{ "cuLaunchKernel_ptsz", SHAPE_CALL, CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL) },
	{ "cuLaunchKernelEx", SHAPE_CALL, CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL_EX) },
	{ "cuLaunchKernelEx_ptsz", SHAPE_CALL,
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_KERNEL_EX) },
	{ "cuLaunchCooperativeKernel", SHAPE_CALL,
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE) },
	{ "cuLaunchCooperativeKernel_ptsz", SHAPE_CALL,
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE) },
	{ "cuLaunchCooperativeKernelMultiDevice", SHAPE_CALL,
	  CUDA_KIND_LAUNCH | API(TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI) },
	{ "cuGraphLaunch", SHAPE_CALL, CUDA_KIND_GRAPH | API(TALLY_GPU_API_GRAPH_LAUNCH) },
	{ "cuGraphLaunch_ptsz", SHAPE_CALL, CUDA_KIND_GRAPH | API(TALLY_GPU_API_GRAPH_LAUNCH) },
	{ "cuMemAlloc_v2", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocManaged", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocAsync", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocAsync_ptsz", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocFromPoolAsync_ptsz", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemCreate", SHAPE_OUT_SIZE, CUDA_KIND_DEV_ALLOC },
	{ "cuMemAllocPitch_v2", SHAPE_PITCH, CUDA_KIND_DEV_PITCH },
	{ "cuMemFree_v2", SHAPE_CALL, CUDA_KIND_DEV_FREE },
	{ "cuMemFreeAsync", SHAPE_CALL, CUDA_KIND_DEV_FREE },
	{ "cuMemFreeAsync_ptsz", SHAPE_CALL, CUDA_KIND_DEV_FREE },
	{ "cuMemRelease", SHAPE_CALL, CUDA_KIND_DEV_FREE },
	{ "cuMemHostAlloc", SHAPE_OUT_SIZE, CUDA_KIND_HOST_ALLOC },
	{ "cuMemAllocHost_v2", SHAPE_OUT_SIZE, CUDA_KIND_HOST_ALLOC },
	{ "cuMemHostRegister_v2", SHAPE_OUT_SIZE, CUDA_KIND_HOST_REGISTER },
	{ "cuMemFreeHost", SHAPE_CALL, CUDA_KIND_HOST_FREE },
	{ "cuMemHostUnregister", SHAPE_CALL, CUDA_KIND_HOST_FREE },
	{ "cuModuleLoadData", SHAPE_IMAGE, CUDA_KIND_IMAGE },
	{ "cuModuleLoadDataEx", SHAPE_IMAGE, CUDA_KIND_IMAGE },
	{ "cuModuleLoadFatBinary", SHAPE_IMAGE, CUDA_KIND_IMAGE },
	{ "cuLibraryLoadData", SHAPE_IMAGE, CUDA_KIND_IMAGE },
	{ "cuModuleUnload", SHAPE_CALL, CUDA_KIND_IMAGE_FREE },
	{ "cuLibraryUnload", SHAPE_CALL, CUDA_KIND_IMAGE_FREE },
	{ "cuCtxSynchronize", SHAPE_CALL, CUDA_KIND_SYNC },
	{ "cuStreamSynchronize", SHAPE_CALL, CUDA_KIND_SYNC },
	{ "cuStreamSynchronize_ptsz", SHAPE_CALL, CUDA_KIND_SYNC },
	{ "cuEventSynchronize", SHAPE_CALL, CUDA_KIND_SYNC },
};
#define NENTRIES (sizeof(entries) / sizeof(entries[0]))
#define MAX_LINKS (2 * NENTRIES + 1)

struct cuda_trace {
	struct cuda_bpf *skel;
	struct bpf_link *links[MAX_LINKS];
	unsigned nlinks;
	unsigned nprobed; /* entry points found in the driver */
};

struct cuda_trace *cuda_trace_open(pid_t tgid, const struct cuda_shared *maps, int *err)
{
	struct cuda_trace *c = calloc(1, sizeof(*c));

	if (!c) {
		*err = -ENOMEM;
		return NULL;
	}
	c->skel = cuda_bpf__open();
	if (!c->skel) {
		*err = -errno;
		goto fail;
	}
	c->skel->rodata->target_tgid = (uint32_t)tgid;
	*err = bpf_map__reuse_fd(c->skel->maps.events, maps->events_fd);
	if (!*err)
		*err = bpf_map__reuse_fd(c->skel->maps.lost, maps->lost_fd);
	if (!*err)
		*err = bpf_map__reuse_fd(c->skel->maps.threads, maps->threads_fd);
	if (!*err)
		*err = cuda_bpf__load(c->skel);
	if (*err)
		goto fail;
	return c;
fail:
	cuda_trace_close(c);
	return NULL;
}

static int keep_link(struct cuda_trace *c, struct bpf_link *link)
{
	return links_keep(c->links, &c->nlinks, MAX_LINKS, link);
}

static int attach_one(struct cuda_trace *c, struct bpf_program *prog, pid_t pid, const char *path,
		      const char *func, uint64_t cookie, bool ret)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .func_name = func, .retprobe = ret,
		    .bpf_cookie = cookie);

	return keep_link(c, bpf_program__attach_uprobe_opts(prog, pid, path, 0, &opts));
}

/* Undo a partial attach: the links made since there were `first`. */
static void detach_to(struct cuda_trace *c, unsigned first)
{
	links_drop_to(c->links, &c->nlinks, first);
}

/* 0, or a negative errno and no probe of the driver attached (-EALREADY
 * when it is attached already). */
int cuda_trace_attach(struct cuda_trace *c, pid_t pid, const char *libcuda)
{
	struct cuda_bpf *s = c->skel;
	struct bpf_program *progs[] = { [SHAPE_CALL] = s->progs.cuda_call,
					[SHAPE_OUT_SIZE] = s->progs.cuda_out_size,
					[SHAPE_PITCH] = s->progs.cuda_pitch,
					[SHAPE_IMAGE] = s->progs.cuda_image };
	const char *names[NENTRIES];
	uint64_t addr[NENTRIES];
	unsigned first = c->nlinks, probed = 0;
	int err;

	if (c->nprobed)
		return -EALREADY;
	for (size_t i = 0; i < NENTRIES; i++)
		names[i] = entries[i].name;
	err = target_elf_symbols(libcuda, names, NENTRIES, addr);
	if (err)
		goto detach;
	for (size_t i = 0; i < NENTRIES; i++) {
		const struct entry *e = &entries[i];
		/* a driver without some entry point (older, or a fake) is fine */
		if (!addr[i])
			continue;
		err = attach_one(c, progs[e->shape], pid, libcuda, e->name, e->cookie, false);
		if (!err)
			err = attach_one(c, s->progs.cuda_return, pid, libcuda, e->name, 0, true);
		if (err)
			goto detach;
		probed++;
	}
	err = probed ? 0 : -ENOENT;
	if (err)
		goto detach;
	c->nprobed = probed;
	return 0;

detach:
	/* a partial attach would count half of the figures (allocations
	 * without their frees): none of the driver's probes stays */
	detach_to(c, first);
	return err;
}

int cuda_trace_attach_yield(struct cuda_trace *c, pid_t pid, const char *libc)
{
	return attach_one(c, c->skel->progs.cuda_sched_yield, pid, libc, "sched_yield", 0, false);
}

void cuda_trace_read(const struct cuda_trace *c, struct cuda_figures *f)
{
	memset(f, 0, sizeof(*f));
	if (!c)
		return;
	f->untracked = c->skel->bss->untracked;
	f->unknown_frees = c->skel->bss->unknown_frees;
	memcpy(f->os_yields, (const void *)c->skel->bss->os_yields, sizeof(f->os_yields));
	f->entry_points = c->nprobed;
}

void cuda_trace_close(struct cuda_trace *c)
{
	if (!c)
		return;
	detach_to(c, 0);
	cuda_bpf__destroy(c->skel);
	free(c);
}
