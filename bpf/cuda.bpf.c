// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The CUDA driver, probed for processes tally did not start with its CUPTI
 * library (docs/DESIGN.md §4): entry and return uprobes on libcuda.so.1's entry
 * points. The entry saves the arguments the return needs (out-pointers,
 * sizes, handles) per thread; the return reads the CUresult and the
 * out-parameters and emits one GPU record (TALLY_MSG_GPU) into tally.bpf.c's
 * ring buffer, whose map this object shares, as it shares `threads` (the
 * calling thread's group) and `lost`.
 *
 * One entry program and one return program serve every entry point, each
 * attached once per process as a uprobe_multi link (a link let go waits
 * for the kernel's grace periods: two, not seventy); which entry point
 * fired is the attach cookie (enum cuda_kind | enum tally_gpu_api <<
 * CUDA_API_SHIFT, bpf/cuda_api.h; set by user/probes/cuda.c).
 *
 * The driver may come from any path (LD_LIBRARY_PATH, RUNPATH, a dlopen by a
 * library), so its probes are attached per process as it loads it: a probe
 * on the dynamic loader's debugger hook, _dl_debug_state (what gdb uses),
 * sees each set of objects mapped, before they are relocated and before
 * any of their code runs; when one is a driver whose probes are not
 * attached for that process, it tells the tracer and holds the thread until
 * the tracer says they are (or a deadline passes, which it says too).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "contract/tally_events.h"
#include "tally_bpf.h"
#include "tally_maps.bpf.h"
#include "common.bpf.h"
#include "tally_procs.bpf.h"
#include "cuda_api.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* Live allocations, pins and images the block map holds; those past it
 * count in `untracked`. */
#define CUDA_MAX_BLOCKS 65536

/* The processes whose driver the tracer has dealt with (key: tgid): its
 * probes attached, or given up on. The loader's probe holds a thread that
 * maps a driver until its process is here. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} driver_ready SEC(".maps");

/* Where each process mapped its driver (key: tgid): a sched_yield called
 * from in there is the driver's own spin-wait, not the program's. */
struct driver_span {
	__u64 lo, hi;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct driver_span);
} driver_spans SEC(".maps");

/* A call between its entry and its return, per thread. */
struct pending {
	__u64 api;  /* the cookie: enum cuda_kind | enum tally_gpu_api << CUDA_API_SHIFT */
	__u64 out;  /* out-pointer (dptr, pPitch's partner, module, handle) */
	__u64 arg;  /* a size, a handle or a pointer, per shape */
	__u64 arg2; /* pPitch's height, or an image's size */
	__u64 pitch_ptr;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct pending);
} calls SEC(".maps");

/* What a free, unpin or unload gives back: keyed by kind and handle. */
struct block_key {
	__u64 kind; /* TALLY_EV_GPU_DEVICE_MEM, _HOST_PINNED or _IMAGE */
	__u64 handle;
};
struct block {
	__u64 bytes;
	__u32 group;
	__u32 pad;
};

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, CUDA_MAX_BLOCKS);
	__type(key, struct block_key);
	__type(value, struct block);
} blocks SEC(".maps");

/* Figures the loader reads: blocks the map could not hold, frees of
 * handles never seen (allocated before the attach). */
__u64 untracked = 0;
__u64 unknown_frees = 0;

/* sched_yield calls the program made, per process and group. */
struct yield_key {
	__u32 tgid;
	__u32 group;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 16384);
	__type(key, struct yield_key);
	__type(value, __u64);
} os_yields SEC(".maps");

/* A message the ring had no room for. */
static __always_inline void count_lost_msg(void)
{
	__u32 zero = 0;
	struct tally_lost *l = bpf_map_lookup_elem(&lost, &zero);

	if (l)
		l->msgs++;
}

static __always_inline void emit(__u8 type, __u8 term, __u32 group, __u32 n, __u64 bytes)
{
	struct tally_msg_gpu *m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);

	if (!m) {
		count_lost_msg();
		return;
	}
	fill_hdr_current(&m->hdr, TALLY_MSG_GPU, bpf_ktime_get_ns());
	m->ev.type = type;
	m->ev.term = term;
	m->ev.group = (__u16)group;
	m->ev.n = n;
	m->ev.bytes = bytes;
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
}

/* The size of a module image, as bpf/image_size.h defines it for this
 * object and the CUPTI library alike, read from the target's memory: a read
 * of a page it has not mapped fails, and so the image's size is 0. PTX text
 * is measured in chunks of the per-CPU scratch buffer: up to PTX_CHUNKS *
 * (PTX_CHUNK - 1) bytes, about 16 MiB (a longer one counts that much). */
#define PTX_CHUNK 4096	/* bytes per read, the NUL's included */
#define PTX_CHUNKS 4096 /* reads, at most */

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, char[PTX_CHUNK]);
} scratch SEC(".maps");

struct ptx_walk {
	__u64 addr;
	__u64 len;   /* bytes before the NUL so far */
	bool failed; /* a chunk could not be read */
};

static long ptx_step(__u64 i, void *ctx)
{
	struct ptx_walk *c = ctx;
	__u32 zero = 0;
	char *buf = bpf_map_lookup_elem(&scratch, &zero);
	long n;

	if (!buf) {
		c->failed = true;
		return 1;
	}
	n = bpf_probe_read_user_str(buf, PTX_CHUNK, (const void *)(c->addr + i * (PTX_CHUNK - 1)));
	if (n <= 0) {
		c->failed = true;
		return 1;
	}
	c->len += (__u64)n - 1;
	return n < PTX_CHUNK; /* a NUL before the chunk's end: done */
}

/* How image_size.h reads the traced process's memory. */
static __always_inline long image_read(void *dst, __u32 len, __u64 addr)
{
	return bpf_probe_read_user(dst, len, (const void *)addr);
}

static __always_inline __u64 image_strlen(__u64 addr)
{
	struct ptx_walk c = { .addr = addr };

	bpf_loop(PTX_CHUNKS, ptx_step, &c, 0);
	return c.failed ? 0 : c.len;
}

#include "image_size.h"

/* Every entry point: what its return needs, by the kind the cookie says
 * (its argument shape, bpf/cuda_api.h). */
SEC("uprobe")
int BPF_KPROBE(cuda_entry, __u64 a0, __u64 a1, __u64 a2, __u64 a3)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending p = { .api = bpf_get_attach_cookie(ctx) };

	if (!in_tree())
		return 0;
	switch (p.api & CUDA_KIND_MASK) {
	case CUDA_KIND_DEV_ALLOC:     /* (CUdeviceptr *out, size_t size, ...) */
	case CUDA_KIND_HOST_ALLOC:    /* (void **out, size_t size, ...) */
	case CUDA_KIND_HOST_REGISTER: /* (void *p, size_t size, ...) */
		p.out = a0;
		p.arg = a1;
		break;
	case CUDA_KIND_DEV_PITCH: /* (CUdeviceptr *out, size_t *pitch, width, height, ...) */
		p.out = a0;
		p.pitch_ptr = a1;
		p.arg2 = a3;
		break;
	case CUDA_KIND_IMAGE: /* (module *out, image, ...) */
		p.out = a0;
		p.arg2 = image_size(a1);
		break;
	default: /* launches, frees, unloads: the first argument */
		p.arg = a0;
		break;
	}
	(void)a2;
	bpf_map_update_elem(&calls, &tid, &p, BPF_ANY);
	return 0;
}

static __always_inline void remember(__u64 kind, __u64 handle, __u64 bytes, __u32 group)
{
	struct block_key k = { kind, handle };
	struct block b = { bytes, group, 0 };

	if (bpf_map_update_elem(&blocks, &k, &b, BPF_ANY))
		__sync_fetch_and_add(&untracked, 1);
	else
		emit((__u8)kind, 0, group, 0, bytes);
}

static __always_inline void forget(__u64 kind, __u64 handle)
{
	struct block_key k = { kind, handle };
	struct block *b = bpf_map_lookup_elem(&blocks, &k);

	if (!b) {
		__sync_fetch_and_add(&unknown_frees, 1);
		return;
	}
	emit((__u8)kind, 1, b->group, 0, b->bytes);
	bpf_map_delete_elem(&blocks, &k);
}

/* A launch returned: the CUresult decides the record; n carries it when it
 * is an error, bytes the entry point (enum tally_gpu_api). */
static __always_inline void launch_done(__u64 api, int err, __u32 group)
{
	__u8 ok = (api & CUDA_KIND_MASK) == CUDA_KIND_GRAPH ? TALLY_EV_GPU_GRAPH_LAUNCH :
							      TALLY_EV_GPU_LAUNCH;

	if (err)
		emit(TALLY_EV_GPU_LAUNCH_FAILED, 0, group, (__u32)err, api >> CUDA_API_SHIFT);
	else
		emit(ok, 0, group, 0, api >> CUDA_API_SHIFT);
}

/* A call that made a block returned: remembered if it succeeded and its
 * out-parameters can be read. */
static __always_inline void block_made(const struct pending *p, int err, __u32 group)
{
	__u64 handle = 0, pitch = 0;

	if (err)
		return;
	switch (p->api & CUDA_KIND_MASK) {
	case CUDA_KIND_DEV_ALLOC:
	case CUDA_KIND_HOST_ALLOC:
		if (bpf_probe_read_user(&handle, sizeof(handle), (void *)p->out))
			break;
		remember((p->api & CUDA_KIND_MASK) == CUDA_KIND_DEV_ALLOC ?
				 TALLY_EV_GPU_DEVICE_MEM :
				 TALLY_EV_GPU_HOST_PINNED,
			 handle, p->arg, group);
		break;
	case CUDA_KIND_DEV_PITCH:
		if (bpf_probe_read_user(&handle, sizeof(handle), (void *)p->out) ||
		    bpf_probe_read_user(&pitch, sizeof(pitch), (void *)p->pitch_ptr))
			break;
		remember(TALLY_EV_GPU_DEVICE_MEM, handle, pitch * p->arg2, group);
		break;
	case CUDA_KIND_HOST_REGISTER: /* (void *p, size_t size): p is the handle */
		remember(TALLY_EV_GPU_HOST_PINNED, p->out, p->arg, group);
		break;
	case CUDA_KIND_IMAGE:
		if (bpf_probe_read_user(&handle, sizeof(handle), (void *)p->out))
			break;
		remember(TALLY_EV_GPU_IMAGE, handle, p->arg2, group);
		break;
	}
}

/* A free, unpin or unload returned: its block is forgotten if it succeeded. */
static __always_inline void block_released(const struct pending *p, int err)
{
	if (err)
		return;
	switch (p->api & CUDA_KIND_MASK) {
	case CUDA_KIND_DEV_FREE:
		forget(TALLY_EV_GPU_DEVICE_MEM, p->arg);
		break;
	case CUDA_KIND_HOST_FREE:
		forget(TALLY_EV_GPU_HOST_PINNED, p->arg);
		break;
	case CUDA_KIND_IMAGE_FREE:
		forget(TALLY_EV_GPU_IMAGE, p->arg);
		break;
	}
}

SEC("uretprobe")
int BPF_KRETPROBE(cuda_return, long rc)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct pending *p;

	if (!in_tree())
		return 0;
	p = bpf_map_lookup_elem(&calls, &tid);
	if (!p)
		return 0;
	switch (p->api & CUDA_KIND_MASK) {
	case CUDA_KIND_LAUNCH:
	case CUDA_KIND_GRAPH:
		launch_done(p->api, (int)rc, current_group());
		break;
	case CUDA_KIND_DEV_FREE:
	case CUDA_KIND_HOST_FREE:
	case CUDA_KIND_IMAGE_FREE:
		block_released(p, (int)rc);
		break;
	default: /* allocations, pins, images */
		block_made(p, (int)rc, current_group());
		break;
	}
	bpf_map_delete_elem(&calls, &tid);
	return 0;
}

/* libc's sched_yield: an OS yield, unless the driver called it (its
 * synchronize spinning): the return address says who did. */
SEC("uprobe")
int BPF_KPROBE(cuda_sched_yield)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	struct driver_span *d;
	__u64 ret = 0;

	if (!in_tree())
		return 0;
	d = bpf_map_lookup_elem(&driver_spans, &tgid);
	if (d && !bpf_probe_read_user(&ret, sizeof(ret), (void *)PT_REGS_SP(ctx)) && ret >= d->lo &&
	    ret < d->hi)
		return 0;
	struct yield_key k = { tgid, current_group() };
	__u64 one = 1, *n = bpf_map_lookup_elem(&os_yields, &k);
	if (n)
		__sync_fetch_and_add(n, 1);
	else
		bpf_map_update_elem(&os_yields, &k, &one, BPF_NOEXIST);
	return 0;
}

#include "driver_loader.bpf.h"
