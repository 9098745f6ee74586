// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * glibc mode (docs/DESIGN.md §1): for a target that does not use
 * libtally_alloc, a uprobe and a uretprobe on each public entry of libc's
 * malloc family, as bcc's memleak does, loaded by user/probes/glibc.c beside
 * bpf/tally.bpf.c. Slow, and the CLI's help says so: a trap and the return's
 * syscall, 5 to 10 us a call on the project's VMs (a probe the kernel must
 * single-step cost about 25). The figures and what they cover: `totals`.
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>

#include "contract/tally_events.h"
#include "tally_bpf.h"
#include "tally_threads.bpf.h"
#include "common.bpf.h"
#include "glibc.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* glibc's chunk header: the size word sits just below the pointer handed
 * out; its low three bits are flags. malloc_usable_size() is chunksize - 16
 * for an mmapped chunk (its own header and no next chunk to borrow from) and
 * chunksize - 8 otherwise (the next chunk's prev_size word is usable). */
#define GLIBC_SIZE_SZ 8
#define GLIBC_SIZE_BITS 7ULL
#define GLIBC_IS_MMAPPED 2ULL
/* After `ret`, a function's stack pointer is its entry's plus the return
 * address it popped. */
#define GLIBC_RET_ADDR_SZ 8

/* Where a probe sits: not always on the entry's first byte. The loader puts
 * it on the first instruction the kernel emulates, past only instructions
 * that change neither the stack pointer nor an argument's register nor
 * memory, and past no branch (user/probes/glibc_site.h). So:
 * - every program reads, through PT_REGS_PARM*() and PT_REGS_SP(), what the
 *   entry had;
 * - the uretprobe finds the return address at the top of the stack. */

/* Set by the loader once every probe is attached: a block allocated while
 * free was not yet probed could be freed unseen, and its address given out
 * again; from `armed` on, every entry and return is seen. */
__u32 armed = 0;

/* The target's execs since attach. An exec replaces the process image and
 * every block with it: the exec program empties the maps and the figures,
 * which then cover the new image only. That is what a started command needs
 * too: tally attaches before exec, and the allocations of its forked child
 * before the exec (setenv) are not the command's. Records of an older epoch
 * that the emptying missed are treated as absent. */
__u32 exec_epoch = 0;

enum glibc_op {
	GLIBC_OP_NONE = 0,	     /* cannot allocate (calloc or reallocarray overflow) */
	GLIBC_OP_ALLOC = 1,	     /* returns the block: malloc, calloc, memalign, ... */
	GLIBC_OP_REALLOC = 2,	     /* realloc, reallocarray: arg is the old pointer */
	GLIBC_OP_POSIX_MEMALIGN = 3, /* returns 0 and stores the block at arg */
};

/* One live block, key: the pointer handed out. */
struct glibc_block {
	__u64 requested; /* bytes the caller asked for */
	__u64 usable;	 /* malloc_usable_size(): >= requested */
	__u32 group;	 /* group charged at allocation; its free is charged here too */
	__u16 mmapped;	 /* 1: an mmapped chunk (counted in large_count) */
	__u16 epoch;	 /* exec_epoch when recorded: older ones died with their image */
};

/* The outermost call a thread is in, key: tid. */
struct glibc_call {
	__u64 sp;		/* stack pointer at its entry (the return address's slot) */
	__u64 size;		/* requested bytes (calloc, reallocarray: the product) */
	__u64 arg;		/* realloc: old pointer; posix_memalign: where the block goes */
	struct glibc_block old; /* realloc: the old block's record, taken out at entry */
	__u32 op;		/* enum glibc_op */
	__u32 depth;		/* traced calls open on the thread: this one and those inside */
	__u32 old_found;	/* realloc: `old` holds the old block's record */
	__u32 epoch;		/* exec_epoch at entry */
};

/* The figures (struct glibc_totals, glibc.h), one copy for the process,
 * updated with atomic adds (probe hits of different threads run
 * concurrently); the loader reads them through the mmapped .bss. Over the
 * blocks allocated since `armed`:
 * - live: requested bytes of blocks not yet freed;
 * - rounding: usable minus requested bytes over those blocks, the usable
 *   size read from the chunk header exactly as glibc's malloc_usable_size
 *   does (glibc_block_add);
 * - large_count: those blocks that are mmapped chunks;
 * - per group: allocated/deallocated bytes and objects (requested sizes). */
struct glibc_totals totals = {};

/* Live blocks, each with its requested size, which C's free() does not
 * pass. Not preallocated: at the default size a preallocated map would hold
 * about 100 MB of kernel memory whatever the target does. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, GLIBC_DEFAULT_BLOCKS); /* set by the loader */
	__uint(map_flags, BPF_F_NO_PREALLOC);
	__type(key, __u64);
	__type(value, struct glibc_block);
} blocks SEC(".maps");

/* A call's arguments, per thread, from its entry to its return. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct glibc_call);
} calls SEC(".maps");

static __always_inline bool glibc_watching(void)
{
	return armed && in_target();
}

/* A block leaves the map (freed, or found freed unseen): its bytes leave the
 * figures and its free is charged to the group it was allocated in. */
static __always_inline void glibc_block_gone(const struct glibc_block *b)
{
	__u32 g = b->group < TALLY_MAX_GROUPS ? b->group : 0;

	__sync_fetch_and_add(&totals.live, -b->requested);
	__sync_fetch_and_add(&totals.rounding, -(b->usable - b->requested));
	if (b->mmapped)
		__sync_fetch_and_add(&totals.large_count, -1ULL);
	__sync_fetch_and_add(&totals.dealloc_bytes[g], b->requested);
	__sync_fetch_and_add(&totals.dealloc_objs[g], 1);
}

/* Take ptr's record out of the map into *out. False when there is none (not
 * allocated since attach, or not recorded). The delete decides: of two
 * threads racing on one pointer (a bug in the target) only one gets it. */
static __always_inline bool glibc_block_take(__u64 ptr, struct glibc_block *out)
{
	struct glibc_block *b = bpf_map_lookup_elem(&blocks, &ptr);

	if (!b)
		return false;
	*out = *b;
	if (bpf_map_delete_elem(&blocks, &ptr))
		return false;
	return out->epoch == (__u16)exec_epoch;
}

/* glibc handed out ptr for `size` bytes in group g. */
static __always_inline void glibc_block_add(__u64 ptr, __u64 size, __u32 g)
{
	struct glibc_block b = { .requested = size, .group = g, .epoch = (__u16)exec_epoch };
	struct glibc_block stale;
	__u64 word, chunk, hdr;

	if (bpf_probe_read_user(&word, sizeof(word), (void *)(ptr - GLIBC_SIZE_SZ))) {
		__sync_fetch_and_add(&totals.untracked, 1);
		return;
	}
	chunk = word & ~GLIBC_SIZE_BITS;
	b.mmapped = (word & GLIBC_IS_MMAPPED) != 0;
	hdr = b.mmapped ? 2 * GLIBC_SIZE_SZ : GLIBC_SIZE_SZ;
	if (chunk < hdr + size) {
		/* not a glibc chunk holding `size` bytes: no rounding to trust */
		__sync_fetch_and_add(&totals.untracked, 1);
		return;
	}
	b.usable = chunk - hdr;
	/* A record already there means glibc freed that block without our
	 * probe seeing it (it cannot give out a live pointer twice). */
	if (glibc_block_take(ptr, &stale)) {
		glibc_block_gone(&stale);
		__sync_fetch_and_add(&totals.lost, 1);
	}
	if (bpf_map_update_elem(&blocks, &ptr, &b, BPF_NOEXIST)) {
		__sync_fetch_and_add(&totals.untracked, 1);
		return;
	}
	__sync_fetch_and_add(&totals.live, size);
	__sync_fetch_and_add(&totals.rounding, b.usable - size);
	if (b.mmapped)
		__sync_fetch_and_add(&totals.large_count, 1);
	__sync_fetch_and_add(&totals.alloc_bytes[g], size);
	__sync_fetch_and_add(&totals.alloc_objs[g], 1);
}

/*
 * A public entry may run inside another one of the same thread, and only the
 * outermost call says what the caller asked for. glibc 2.36 (Debian 12), read
 * from its disassembly and checked by tests/glibc/test_glibc.c, which counts
 * every call exactly once:
 * - aligned_alloc is an alias of memalign (one address; 2.38 splits them).
 *   Two uprobes on one address both fire, so the loader attaches one per
 *   address.
 * - memalign, valloc, pvalloc and posix_memalign go to the internal
 *   _mid_memalign, which tail-jumps to the public malloc when the alignment
 *   is at most 16 (memalign(16, n), posix_memalign(&p, 8 or 16, n)).
 * - realloc(NULL, n) tail-jumps to malloc; realloc(p, 0) calls free (and
 *   returns NULL); realloc of an mmapped chunk that mremap cannot move, and
 *   a realloc that fails in its arena while other threads exist, call malloc.
 * - reallocarray checks n * m for overflow and tail-jumps to realloc
 *   (through libc's PLT), which may go on to malloc or free as above.
 * - calloc and malloc call no public entry (tcache and arena set-up use the
 *   internal _int_malloc); free calls none.
 * - A thread's exit hands its tcache back through the public free
 *   (__malloc_arena_thread_freeres): blocks the caller had freed already,
 *   and the tcache itself, which _int_malloc made. Both are unknown frees
 *   here, which is right: none of them is live.
 * So a call made while the thread is inside a traced call is counted in
 * `nested` and otherwise left to the outer call. "Inside" is told by the
 * stack pointer: an inner call's entry has one at or below the outer one's
 * (equal after a tail jump), and a depth count pairs the returns (a
 * tail-jumped inner call returns through the same address as its outer one,
 * and both uretprobes fire there, inner first).
 *
 * At an entry: true when the thread is inside a traced call already (the
 * outer call accounts for this one). with_return: this entry has a uretprobe
 * that will pair with a depth increment (free has none). A record whose stack
 * pointer lies below ours belongs to a call that has left without its return
 * being seen (a longjmp out, a uretprobe the kernel could not set): dropped.
 */
static __always_inline bool glibc_nested(__u32 tid, __u64 sp, bool with_return)
{
	struct glibc_call *c = bpf_map_lookup_elem(&calls, &tid);

	if (!c || c->epoch != exec_epoch)
		return false;
	if (sp <= c->sp) {
		if (with_return)
			c->depth++;
		__sync_fetch_and_add(&totals.nested, 1);
		return true;
	}
	bpf_map_delete_elem(&calls, &tid);
	__sync_fetch_and_add(&totals.lost, 1);
	return false;
}

/* Entry of an outermost call: keep what its return needs. */
static __always_inline void glibc_call_open(struct pt_regs *ctx, struct glibc_call *c)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();

	c->sp = PT_REGS_SP(ctx);
	c->depth = 1;
	c->epoch = exec_epoch;
	__sync_fetch_and_add(&totals.calls, 1);
	if (bpf_map_update_elem(&calls, &tid, c, BPF_ANY)) {
		/* 16384 threads inside malloc at once: this one goes unseen */
		__sync_fetch_and_add(&totals.lost, 1);
		if (c->old_found)
			glibc_block_gone(&c->old);
	}
}

/* Common entry for calls of one size argument; false if nested or unwatched. */
static __always_inline bool glibc_enter(struct pt_regs *ctx)
{
	if (!glibc_watching())
		return false;
	return !glibc_nested((__u32)bpf_get_current_pid_tgid(), PT_REGS_SP(ctx), true);
}

/* n * m overflows 64 bits. The quotient is kept opaque: clang would turn
 * the division test back into a 128-bit multiply, which BPF lacks. */
static __always_inline bool glibc_mul_overflows(__u64 n, __u64 m)
{
	__u64 max;

	if (!m)
		return false;
	max = ~0ULL / m;
	asm volatile("" : "+r"(max));
	return n > max;
}

/* malloc(size); also valloc(size) and pvalloc(size): the caller asked for
 * `size` bytes, pvalloc's page rounding is rounding. */
SEC("uprobe")
int BPF_KPROBE(glibc_malloc, __u64 size)
{
	struct glibc_call c = { .op = GLIBC_OP_ALLOC, .size = size };

	if (glibc_enter(ctx))
		glibc_call_open(ctx, &c);
	return 0;
}

/* memalign(align, size); also aligned_alloc where it is a separate entry. */
SEC("uprobe")
int BPF_KPROBE(glibc_memalign, __u64 align, __u64 size)
{
	struct glibc_call c = { .op = GLIBC_OP_ALLOC, .size = size };

	if (glibc_enter(ctx))
		glibc_call_open(ctx, &c);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(glibc_calloc, __u64 n, __u64 m)
{
	struct glibc_call c = { .op = GLIBC_OP_ALLOC, .size = n * m };

	if (!glibc_enter(ctx))
		return 0;
	/* glibc returns NULL on overflow, but the call is still a call */
	if (glibc_mul_overflows(n, m))
		c.op = GLIBC_OP_NONE;
	glibc_call_open(ctx, &c);
	return 0;
}

/*
 * The old block leaves the map at entry, not at return: realloc may release
 * it before it returns, and another thread may be handed the same address
 * and record it before this return runs. A failed realloc (NULL, size not 0)
 * leaves the old block allocated, and the return puts its record back.
 */
static __always_inline void glibc_realloc_open(struct pt_regs *ctx, __u64 old, __u64 size)
{
	struct glibc_call c = { .op = GLIBC_OP_REALLOC, .size = size, .arg = old };

	if (old && glibc_block_take(old, &c.old))
		c.old_found = 1;
	glibc_call_open(ctx, &c);
}

SEC("uprobe")
int BPF_KPROBE(glibc_realloc, __u64 old, __u64 size)
{
	if (glibc_enter(ctx))
		glibc_realloc_open(ctx, old, size);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(glibc_reallocarray, __u64 old, __u64 n, __u64 m)
{
	struct glibc_call c = { .op = GLIBC_OP_NONE };

	if (!glibc_enter(ctx))
		return 0;
	if (glibc_mul_overflows(n, m)) {
		/* NULL and ENOMEM, the old block untouched */
		glibc_call_open(ctx, &c);
		return 0;
	}
	glibc_realloc_open(ctx, old, n * m);
	return 0;
}

SEC("uprobe")
int BPF_KPROBE(glibc_posix_memalign, __u64 memptr, __u64 align, __u64 size)
{
	struct glibc_call c = { .op = GLIBC_OP_POSIX_MEMALIGN, .size = size, .arg = memptr };

	if (glibc_enter(ctx))
		glibc_call_open(ctx, &c);
	return 0;
}

/* free needs no return probe: the block leaves the map at entry, before
 * glibc can give its address to anyone else. */
SEC("uprobe")
int BPF_KPROBE(glibc_free, __u64 ptr)
{
	struct glibc_block b;

	if (!glibc_watching())
		return 0;
	if (glibc_nested((__u32)bpf_get_current_pid_tgid(), PT_REGS_SP(ctx), false))
		return 0;
	__sync_fetch_and_add(&totals.calls, 1);
	if (!ptr)
		return 0;
	if (glibc_block_take(ptr, &b))
		glibc_block_gone(&b);
	else
		__sync_fetch_and_add(&totals.unknown_frees, 1);
	return 0;
}

static __always_inline void glibc_realloc_done(struct glibc_call *c, __u64 ret)
{
	if (!ret && c->size) {
		/* failed: the old block is still the caller's */
		if (c->old_found && bpf_map_update_elem(&blocks, &c->arg, &c->old, BPF_NOEXIST)) {
			/* no room to put it back (another thread filled the
			 * map meanwhile): it leaves the figures as if freed,
			 * and its real free will be an unknown one */
			glibc_block_gone(&c->old);
			__sync_fetch_and_add(&totals.untracked, 1);
		}
		return;
	}
	/* the old block is gone (moved, resized in place, or freed by size 0) */
	if (c->arg) {
		if (c->old_found)
			glibc_block_gone(&c->old);
		else
			__sync_fetch_and_add(&totals.unknown_frees, 1);
	}
	if (ret)
		glibc_block_add(ret, c->size, current_group());
}

/* The one return probe, on every entry but free. */
SEC("uretprobe")
int BPF_KRETPROBE(glibc_return, __u64 ret)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct glibc_call *c, done;
	__u64 ptr = 0;

	if (!glibc_watching())
		return 0;
	c = bpf_map_lookup_elem(&calls, &tid);
	if (!c || c->epoch != exec_epoch)
		return 0; /* entered before the probes were armed, or before an exec */
	/* after `ret`, the stack pointer is the entry's plus 8; above that,
	 * the recorded call is one we have returned past unseen */
	if (PT_REGS_SP(ctx) > c->sp + GLIBC_RET_ADDR_SZ) {
		bpf_map_delete_elem(&calls, &tid);
		__sync_fetch_and_add(&totals.lost, 1);
		return 0;
	}
	if (c->depth > 1) {
		c->depth--;
		return 0;
	}
	done = *c;
	bpf_map_delete_elem(&calls, &tid);

	switch (done.op) {
	case GLIBC_OP_ALLOC:
		if (ret)
			glibc_block_add(ret, done.size, current_group());
		break;
	case GLIBC_OP_POSIX_MEMALIGN:
		/* returns 0 or an errno value (an int) */
		if ((__u32)ret == 0 && !bpf_probe_read_user(&ptr, sizeof(ptr), (void *)done.arg) &&
		    ptr)
			glibc_block_add(ptr, done.size, current_group());
		break;
	case GLIBC_OP_REALLOC:
		glibc_realloc_done(&done, ret);
		break;
	default:
		break;
	}
	return 0;
}

static long glibc_forget_block(struct bpf_map *map, __u64 *key, struct glibc_block *b, void *ctx)
{
	bpf_map_delete_elem(map, key);
	return 0;
}

static long glibc_forget_call(struct bpf_map *map, __u32 *key, struct glibc_call *c, void *ctx)
{
	bpf_map_delete_elem(map, key);
	return 0;
}

/* The target execs: its blocks are gone with its image (see exec_epoch). The
 * other threads are gone too (this runs after de_thread), so no probe of the
 * target runs meanwhile and the figures can be zeroed without atomics. */
SEC("tp_btf/sched_process_exec")
int BPF_PROG(glibc_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	if (p->tgid != target_tgid)
		return 0;
	__sync_fetch_and_add(&exec_epoch, 1);
	bpf_for_each_map_elem(&blocks, glibc_forget_block, NULL, 0);
	bpf_for_each_map_elem(&calls, glibc_forget_call, NULL, 0);
	/* word by word: clang would make a memset of it, which BPF lacks */
	for (__u32 i = 0; i < sizeof(totals) / sizeof(__u64); i++) {
		((__u64 *)&totals)[i] = 0;
		asm volatile("" ::: "memory");
	}
	return 0;
}
