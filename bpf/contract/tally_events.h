/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Every record that crosses from a traced process to tally: shared by the
 * allocator and the SDK (producers), the BPF programs (carriers) and user/
 * (the replay). Fixed-width fields only, sizes pinned below.
 *
 * The allocator does not fire a probe per operation: each thread appends
 * struct tally_ev records to its own buffer (struct tally_batch) and hands a
 * whole batch over through one USDT probe, tally:batch(batch, bytes).
 *
 * Every record is a transition of the byte identity of docs/DESIGN.md §2:
 *   mapped == live + rounding + cache + span_free + returned + virgin
 *             + hysteresis + segment_overhead
 * and says exactly how many bytes move between which terms, so the replay
 * (user/model/replay.c) needs no knowledge of the allocator's geometry, and the
 * records of a thread can be applied in any order (they are pure sums).
 */
#ifndef TALLY_EVENTS_H
#define TALLY_EVENTS_H

#ifdef __BPF__
/* vmlinux.h provides __u8 ... __u64 */
#else
#include <linux/types.h>
#endif

#define TALLY_BATCH_MAGIC 0x7a11ba7cu
#define TALLY_BATCH_VERSION 5
/* 8-byte words per batch: a probe hit, with the copy of its batch into the
 * ring, costs about 9 us here (measured: bench-trace's traced churn went from
 * 71 to 85 M ops/s when batches doubled from 16 KiB), so a batch carries up to
 * 4096 records (32 KiB), about 2 ns per operation. The batch lives in the
 * thread's heap: 32 KiB of each thread's memory. */
#define TALLY_BATCH_WORDS 4096
#define TALLY_MAX_GROUPS 256 /* group ids 0..255; 0 is "root" */
#define TALLY_GROUP_NAME_MAX 32

/* Where bytes come from in a move whose source varies (field `term`). */
enum tally_term {
	TALLY_TERM_VIRGIN = 0,
	TALLY_TERM_RETURNED = 1,
};

enum tally_ev_type {
	/* bytes = length mapped, n = header bytes (segment_overhead); rest virgin */
	TALLY_EV_SEG_MAP = 1,
	/* bytes = allocator metadata (heaps, tables) mapped (term 0) or unmapped (term 1):
	 * mapped and segment_overhead */
	TALLY_EV_META_MAP = 2,
	/* a class claims a span: spans_assigned +1; n = slot-metadata bytes moving
	 * from `term` to segment_overhead */
	TALLY_EV_SPAN_CLAIM = 3,
	/* the bump cursor rises: bytes move from `term` to span_free */
	TALLY_EV_BUMP = 4,
	/* allocate a slot: n = requested, bytes = slot size; span_free -> live + rounding */
	TALLY_EV_ALLOC = 5,
	/* owner frees a slot (n = requested, bytes = slot): live + rounding -> span_free */
	TALLY_EV_FREE = 6,
	/* another thread frees a slot: live + rounding -> cache */
	TALLY_EV_FREE_FOREIGN = 7,
	/* the owner drains its foreign-free list: bytes cache -> span_free */
	TALLY_EV_DRAIN = 8,
	/* free pages of a live span handed back: bytes span_free -> returned (the
	 * bytes of free slots that lie on the discarded pages) */
	TALLY_EV_RECLAIM = 9,
	/* slots on discarded pages reused: bytes returned -> span_free */
	TALLY_EV_UNRECLAIM = 10,
	/* a span becomes empty: bytes span_free and n segment_overhead (its slot
	 * metadata) -> hysteresis */
	TALLY_EV_SPAN_EMPTY = 11,
	/* an empty span is used again: the reverse of SPAN_EMPTY */
	TALLY_EV_SPAN_REFILL = 12,
	/* an empty span retired after the purge delay: bytes hysteresis and n virgin
	 * -> returned; spans_assigned -1 */
	TALLY_EV_SPAN_RETIRE = 13,
	/* realloc inside the same slot: n = old requested, bytes = new requested */
	TALLY_EV_REALLOC = 14,
	/* large allocation: bytes = requested, n = rounding (mapping - requested);
	 * term = TALLY_LARGE_FRESH (mapped +) or TALLY_LARGE_POOL (hysteresis -) */
	TALLY_EV_LARGE_ALLOC = 15,
	/* large free, fields as LARGE_ALLOC; term says whether the mapping went to
	 * the pool (hysteresis +) or was unmapped (mapped -) */
	TALLY_EV_LARGE_FREE = 16,
	/* a pooled large mapping unmapped: bytes hysteresis -> gone (mapped -) */
	TALLY_EV_POOL_UNMAP = 17,
	/* heap profiles (docs/DESIGN.md §7), beside the identity (they move no
	 * byte): a sampled block, bytes = its sample id, group its group, n =
	 * frames; then TALLY_SAMPLE_WORDS words: its requested bytes, the
	 * sampling rate its gap was drawn with, its birth (CLOCK_MONOTONIC ns,
	 * read as it was sampled: the start of the lifetime its SAMPLE_FREE
	 * says); and n words of return addresses, the allocation's caller
	 * first */
	TALLY_EV_SAMPLE = 18,
	/* a sampled block freed: bytes = its sample id, n = 1 + its lifetime
	 * in microseconds, from its sample to its free, at most UINT32_MAX
	 * (0: not known) */
	TALLY_EV_SAMPLE_FREE = 19,
	/* an object (executable or library) the frames of samples lie in,
	 * once per process and tracer: bytes = its load bias (file address +
	 * bias = process address), n = its path's length, term 1 for the
	 * program itself (0: a library); then a word of its
	 * mapping's start, one of its end, and the path in ceil(n / 8) words,
	 * not NUL-terminated. The tracer needs no /proc/PID/maps, which a
	 * process that has exited no longer has. */
	TALLY_EV_MODULE = 20,
	/* the heap's batches may come through a shared ring from here on
	 * (struct tally_ring, below), announced in a batch of its own, first
	 * in it: bytes = the ring's address in the process, n = its length.
	 * Moves no byte. */
	TALLY_EV_RING = 21,
	/*
	 * libtally_interpose.so's records (source TALLY_SRC_INTERPOSE: a
	 * process on glibc's malloc, attached with --inject). Its ALLOC and
	 * FREE words are blocks allocated since the injection (n = requested,
	 * bytes = glibc's usable size); larger ones LARGE_ALLOC and
	 * LARGE_FREE (bytes = requested, n = usable - requested, term 0).
	 */
	/* a block the interposer did not see allocated (before the injection,
	 * or by code that calls glibc directly) freed: bytes = its usable
	 * size; n = 1 when it was a realloc's old block */
	TALLY_EV_FREE_UNTRACKED = 22,
	/* glibc's own totals (mallinfo2), then TALLY_GLIBC_INFO_WORDS words:
	 * arena, hblkhd, uordblks, fordblks, keepcost, and the blocks whose
	 * free the interposer did not see; n = its calls not recorded (a
	 * table full), bytes = its table's and shadow's bytes */
	TALLY_EV_GLIBC_INFO = 23,
	/* libtally_alloc's owner frees a slot, as FREE but n = the slot's raw
	 * metadata entry (tally_meta_requested), which tally_ev_next decodes:
	 * a reader never sees this type. The free fast path then writes the
	 * entry it has in hand (decoding it there cost the traced free 7
	 * instructions, callgrind). */
	TALLY_EV_FREE_META = 24,

	/*
	 * GPU records (docs/DESIGN.md §4), from libtally_cupti.so's batches or, one
	 * at a time, from the driver uprobes (TALLY_MSG_GPU). group: the
	 * launching or allocating thread's group; a free carries the group of
	 * its allocation.
	 */
	/* a kernel launch the driver accepted: n = kernel name id (0: unknown),
	 * bytes = the driver entry point (enum tally_gpu_api) */
	TALLY_EV_GPU_LAUNCH = 32,
	/* a graph launch the driver accepted: bytes = the entry point */
	TALLY_EV_GPU_GRAPH_LAUNCH = 33,
	/* a launch (kernel or graph) the driver refused: n = CUresult, bytes =
	 * the entry point */
	TALLY_EV_GPU_LAUNCH_FAILED = 34,
	/* device memory: bytes allocated (term 0) or freed (term 1) */
	TALLY_EV_GPU_DEVICE_MEM = 35,
	/* pinned host memory: bytes pinned (term 0) or unpinned (term 1) */
	TALLY_EV_GPU_HOST_PINNED = 36,
	/* a module or library image: bytes loaded (term 0) or unloaded (term 1) */
	TALLY_EV_GPU_IMAGE = 37,
	/* a kernel's name, once per id: n = id, bytes = length; the name follows
	 * in ceil(length / 8) words, not NUL-terminated (batches only) */
	TALLY_EV_GPU_KERNEL_NAME = 38,
	/* CUPTI refused libtally_cupti.so's subscriber (another profiler holds
	 * it): n = the CUptiResult, bytes = the length of CUPTI's reason (its
	 * result string, and who holds CUPTI when it says), which follows in
	 * ceil(length / 8) words, not NUL-terminated (batches only) */
	TALLY_EV_GPU_CUPTI_REFUSED = 39,
	TALLY_EV_MAX,
};

#define TALLY_KERNEL_NAME_MAX 256  /* longer names are cut */
#define TALLY_SAMPLE_FRAMES_MAX 64 /* deeper stacks are cut */
#define TALLY_SAMPLE_WORDS 3	   /* the words after a TALLY_EV_SAMPLE record, before its frames */
#define TALLY_GLIBC_INFO_WORDS 6   /* the words after a TALLY_EV_GLIBC_INFO record */
#define TALLY_MODULE_PATH_MAX 1024 /* longer paths are cut */

/* The driver entry point a GPU record came from (field `bytes` of launches). */
enum tally_gpu_api {
	TALLY_GPU_API_LAUNCH_KERNEL = 1,
	TALLY_GPU_API_LAUNCH_KERNEL_EX = 2,
	TALLY_GPU_API_LAUNCH_COOPERATIVE = 3,
	TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI = 4,
	TALLY_GPU_API_GRAPH_LAUNCH = 5,
};

enum tally_large_how {
	TALLY_LARGE_FRESH = 0, /* mapped from (or unmapped to) the OS */
	TALLY_LARGE_POOL = 1,  /* taken from (or parked in) the retention pool */
};

/*
 * A record as the replay reads it. In a batch, ALLOC, FREE and FREE_FOREIGN
 * (the records of malloc and free, nearly all of them) take one 8-byte word:
 *   type | group << 8 | n << 16 | bytes << 40   (n and bytes below 2^24)
 * and every other record two words, laid out as this struct.
 */
struct tally_ev {
	__u8 type;   /* enum tally_ev_type */
	__u8 term;   /* enum tally_term or enum tally_large_how, per type */
	__u16 group; /* resource group charged (ALLOC, FREE*, REALLOC, LARGE_*) */
	__u32 n;     /* a small byte count, see the type */
	__u64 bytes; /* a byte count, see the type */
};
_Static_assert(sizeof(struct tally_ev) == 16, "tally_ev is 16 bytes");

#define TALLY_EV_WORD_MAX ((1u << 24) - 1) /* n and bytes of a one-word record */

static inline int tally_ev_is_word(__u8 type)
{
	return type == TALLY_EV_ALLOC || type == TALLY_EV_FREE || type == TALLY_EV_FREE_FOREIGN ||
	       type == TALLY_EV_FREE_META;
}

/*
 * libtally_alloc's per-slot metadata entry (a u16), as far as a record
 * carries it (TALLY_EV_FREE_META): 0 = free; bits 0..13 the requested size
 * + 1 in slots below TALLY_META_Q_LIMIT bytes, else the rounding (slot size
 * less requested) + 1; bit 14 an aligned block, bit 15 a foreign free in
 * flight. The requested size of an allocated entry m in a slot of `size`
 * bytes; -1 for an entry no allocated block has (bits 0..13 zero, more
 * than the slot, not a u16).
 */
#define TALLY_META_ROUND_MASK 0x3fffu
#define TALLY_META_Q_LIMIT TALLY_META_ROUND_MASK
static inline __s64 tally_meta_requested(__u32 size, __u32 m)
{
	__u32 v = (m & TALLY_META_ROUND_MASK) - 1;

	if (!(m & TALLY_META_ROUND_MASK) || m > 0xffff)
		return -1;
	if (size < TALLY_META_Q_LIMIT)
		return v <= size ? (__s64)v : -1;
	return v <= size ? (__s64)(size - v) : -1;
}

/* Heap-profile records: beside the identity, they move no byte. */
static inline int tally_ev_is_sample(__u8 type)
{
	return type == TALLY_EV_SAMPLE || type == TALLY_EV_SAMPLE_FREE || type == TALLY_EV_MODULE;
}

static inline __u64 tally_ev_word(__u8 type, __u16 group, __u32 n, __u32 bytes)
{
	return (__u64)type | (__u64)(group & 0xff) << 8 | (__u64)n << 16 | (__u64)bytes << 40;
}

/* Append a record, in one word or two; the caller has room for two. */
static inline void tally_ev_put(__u64 *words, __u32 *count, const struct tally_ev *e)
{
	if (tally_ev_is_word(e->type)) {
		words[(*count)++] = tally_ev_word(e->type, e->group, e->n, (__u32)e->bytes);
		return;
	}
	__builtin_memcpy(&words[*count], e, sizeof(*e));
	*count += 2;
}

/* The record at words[*pos] (of count), decoded; advances *pos. 0, or -1
 * when the record runs past count. */
static inline int tally_ev_next(const __u64 *words, __u32 count, __u32 *pos, struct tally_ev *e)
{
	__u64 w;

	if (*pos >= count)
		return -1;
	w = words[*pos];
	if (tally_ev_is_word((__u8)w)) {
		e->type = (__u8)w;
		e->term = 0;
		e->group = (__u16)((w >> 8) & 0xff);
		e->n = (__u32)((w >> 16) & TALLY_EV_WORD_MAX);
		e->bytes = w >> 40;
		if (e->type == TALLY_EV_FREE_META) {
			__s64 q = tally_meta_requested((__u32)e->bytes, e->n);
			if (q < 0)
				return -1;
			e->type = TALLY_EV_FREE;
			e->n = (__u32)q;
		}
		*pos += 1;
		return 0;
	}
	if (*pos + 2 > count)
		return -1;
	__builtin_memcpy(e, &words[*pos], sizeof(*e));
	*pos += 2;
	if (e->type == TALLY_EV_GPU_KERNEL_NAME || e->type == TALLY_EV_GPU_CUPTI_REFUSED) {
		/* the text is in the words that follow the record */
		__u64 extra = (e->bytes + 7) / 8;
		if (e->bytes > TALLY_KERNEL_NAME_MAX || *pos + extra > count)
			return -1;
		*pos += (__u32)extra;
	}
	if (e->type == TALLY_EV_SAMPLE) {
		if (e->n > TALLY_SAMPLE_FRAMES_MAX || *pos + TALLY_SAMPLE_WORDS + e->n > count)
			return -1;
		*pos += TALLY_SAMPLE_WORDS + e->n;
	}
	if (e->type == TALLY_EV_GLIBC_INFO) {
		if (*pos + TALLY_GLIBC_INFO_WORDS > count)
			return -1;
		*pos += TALLY_GLIBC_INFO_WORDS;
	}
	if (e->type == TALLY_EV_MODULE) {
		__u32 extra = 2 + (e->n + 7) / 8;
		if (e->n > TALLY_MODULE_PATH_MAX || *pos + extra > count)
			return -1;
		*pos += extra;
	}
	return 0;
}

enum tally_batch_source {
	TALLY_SRC_ALLOC = 1,	 /* libtally_alloc.so */
	TALLY_SRC_CUPTI = 2,	 /* libtally_cupti.so */
	TALLY_SRC_INTERPOSE = 3, /* libtally_interpose.so (--inject) */
};

/*
 * A batch as it sits in the producer's memory. Records are numbered by the
 * word they start at: seq_first is the per-heap number of words[0], so a
 * tracer that read a heap's state at position S (late attach, docs/DESIGN.md §8)
 * applies only the records that start at S or later.
 */
struct tally_batch {
	__u32 magic;   /* TALLY_BATCH_MAGIC */
	__u16 version; /* TALLY_BATCH_VERSION */
	__u16 source;  /* enum tally_batch_source */
	__u32 tid;     /* thread that handed the batch over */
	__u32 count;   /* words used in words[] */
	__u64 heap_id; /* the producing heap (heaps outlive threads) */
	__u64 seq_first;
	__u64 words[TALLY_BATCH_WORDS];
};
_Static_assert(sizeof(struct tally_batch) == 32 + 8 * TALLY_BATCH_WORDS, "batch layout");

/* A producer's batch made ready to hand over: its header filled in; returns
 * its valid bytes (the header and count words). */
static inline __u64 tally_batch_seal(struct tally_batch *b, __u16 source, __u32 tid, __u64 heap_id,
				     __u64 seq_first)
{
	b->magic = TALLY_BATCH_MAGIC;
	b->version = TALLY_BATCH_VERSION;
	b->source = source;
	b->tid = tid;
	b->heap_id = heap_id;
	b->seq_first = seq_first;
	return __builtin_offsetof(struct tally_batch, words) +
	       (__u64)b->count * sizeof(b->words[0]);
}

/*
 * The reader's side of tally_batch_seal: what is wrong with a batch of which
 * `bytes` are valid (its header and words[]), the first fault in the order
 * below, or TALLY_BATCH_FAULT_NONE. The order is part of the contract: a
 * reader that needs only the header's heap and seq_first (heap_rings_before,
 * putting two transports back in order) stops at the first three and leaves
 * the last two to the model. `sources` is a mask of TALLY_SRC_BIT(source),
 * the producers the reader takes. Written once for every reader of user/
 * (model, replay, trace, heap rings): a field added to the seal is checked
 * everywhere at once.
 */
enum tally_batch_fault {
	TALLY_BATCH_FAULT_NONE = 0,
	TALLY_BATCH_FAULT_SHORT = 1,   /* fewer bytes than the header */
	TALLY_BATCH_FAULT_MAGIC = 2,   /* not TALLY_BATCH_MAGIC: not a batch */
	TALLY_BATCH_FAULT_SOURCE = 3,  /* a source not in `sources` */
	TALLY_BATCH_FAULT_VERSION = 4, /* not TALLY_BATCH_VERSION */
	TALLY_BATCH_FAULT_COUNT = 5,   /* count past TALLY_BATCH_WORDS or past `bytes` */
};
#define TALLY_SRC_BIT(source) (1u << (source))

static inline enum tally_batch_fault tally_batch_check(const struct tally_batch *b, __u64 bytes,
						       __u32 sources)
{
	__u64 hdr = __builtin_offsetof(struct tally_batch, words);

	if (bytes < hdr)
		return TALLY_BATCH_FAULT_SHORT;
	if (b->magic != TALLY_BATCH_MAGIC)
		return TALLY_BATCH_FAULT_MAGIC;
	/* the producer's number: a shift past the mask's width is no source */
	if (b->source >= 32 || !(sources & TALLY_SRC_BIT(b->source)))
		return TALLY_BATCH_FAULT_SOURCE;
	if (b->version != TALLY_BATCH_VERSION)
		return TALLY_BATCH_FAULT_VERSION;
	if (b->count > TALLY_BATCH_WORDS || bytes < hdr + (__u64)b->count * sizeof(b->words[0]))
		return TALLY_BATCH_FAULT_COUNT;
	return TALLY_BATCH_FAULT_NONE;
}

/*
 * A heap's shared ring: where a traced thread puts its full batches for the
 * tracer to read in place, instead of handing each to tally:batch, whose
 * copy into the BPF ring buffer costs the thread 8 to 75 us a batch (a
 * memcpy here costs about 1). The allocator maps it shared and announces it
 * (TALLY_EV_RING); the tracer maps the same pages (/proc/PID/map_files) and
 * takes it by writing `accepted`. A slot is the producer's while full[i] is
 * 0, the tracer's while it is 1; the producer fills slots in order, and a
 * batch that finds its slot still full goes through tally:batch as before:
 * the tracer puts the two streams back in order by seq_first. The pages
 * outlive the process in the tracer's mapping, so nothing put here is lost
 * when it exits, execs or is killed.
 */
#define TALLY_RING_MAGIC 0x7a11f1f0u
#define TALLY_RING_VERSION 1
/* a ring holds about 1.5 ms of a thread that does nothing but malloc and
 * free (90 M records a second); with 16 slots the tracer, polling every
 * 250 us, found a ring full at one drain in two */
#define TALLY_RING_SLOTS 32
#define TALLY_RING_HEADER 4096
struct tally_ring {
	__u32 magic;	 /* TALLY_RING_MAGIC */
	__u16 version;	 /* TALLY_RING_VERSION */
	__u16 slots;	 /* TALLY_RING_SLOTS */
	__u64 heap_id;	 /* the heap whose batches it carries */
	__u64 announced; /* the key of the tracer it was last announced to */
	__u64 accepted;	 /* that key, written by the tracer once it reads the ring */
	__u32 full[TALLY_RING_SLOTS];
	/* when each slot was filled (CLOCK_MONOTONIC): its place among the
	 * BPF ring's messages (a fork, an exec) */
	__u64 ts_ns[TALLY_RING_SLOTS];
	__u8 pad[TALLY_RING_HEADER - 32 - 12 * TALLY_RING_SLOTS];
	struct tally_batch slot[TALLY_RING_SLOTS];
};
_Static_assert(sizeof(struct tally_ring) ==
		       TALLY_RING_HEADER + TALLY_RING_SLOTS * sizeof(struct tally_batch),
	       "ring layout");
/* its mapping's length, in whole pages */
#define TALLY_RING_BYTES ((sizeof(struct tally_ring) + 4095) & ~(__u64)4095)

/*
 * What the BPF programs put in the ring buffer: every message starts with
 * struct tally_msg; `kind` says which payload follows. The allocator's
 * batches are copied whole (struct tally_msg_batch); the SDK's probes, the
 * scheduler's thread events and the allocator's exit hand-over are small
 * fixed messages.
 */
enum tally_msg_kind {
	TALLY_MSG_BATCH = 1,	      /* struct tally_msg_batch */
	TALLY_MSG_GROUP_REGISTER = 2, /* struct tally_msg_group: group, name */
	TALLY_MSG_GROUP_ENTER = 3,    /* struct tally_msg_group: group entered, other = previous */
	TALLY_MSG_GROUP_EXIT = 4,     /* struct tally_msg_group: group restored, other = left */
	TALLY_MSG_YIELD = 5,	      /* struct tally_msg_group: group */
	TALLY_MSG_REJECT = 6,	      /* struct tally_msg_group: group */
	TALLY_MSG_THREAD_NEW = 7,     /* struct tally_msg_thread: the new thread */
	TALLY_MSG_THREAD_EXIT = 8,    /* struct tally_msg_thread: group_dead set when the last */
	TALLY_MSG_THREAD_NAME = 9,    /* struct tally_msg_thread: comm after a rename or exec */
	TALLY_MSG_STATS = 10,	      /* struct tally_msg_stats: the allocator's figures at exit */
	TALLY_MSG_GPU = 11, /* struct tally_msg_gpu: one GPU record from the driver probes */
	/* struct tally_msg_thread: a new process of the followed tree (fork,
	 * vfork, clone without CLONE_THREAD); hdr.pid and hdr.tid the child's,
	 * `pid` its parent, `parent_tid` the forking thread */
	TALLY_MSG_PROC_FORK = 12,
	/* struct tally_msg_driver: a process of the tree mapped a CUDA driver
	 * whose probes are not attached (bpf/cuda.bpf.c's probe on the dynamic
	 * loader); the thread waits until the tracer says they are */
	TALLY_MSG_DRIVER_LOAD = 13,
	/* struct tally_msg_driver: ... and how that wait ended */
	TALLY_MSG_DRIVER_HELD = 14,
	/* struct tally_msg_oom: the OOM killer chose a process of the tree
	 * (tracepoint oom:mark_victim); hdr.pid the victim. The records its
	 * heaps held then, when they could be read, come just before it as
	 * TALLY_MSG_BATCH messages of its pid */
	TALLY_MSG_OOM = 15,
};

struct tally_msg {
	__u16 kind;   /* enum tally_msg_kind */
	__u16 flags;  /* per kind */
	__u32 tid;    /* the thread the message is about */
	__u64 ts_ns;  /* CLOCK_MONOTONIC */
	__u32 pid;    /* its process (thread group): which model of the tree it feeds */
	__u32 ns_pid; /* PROC_FORK: the child's pid in its own PID namespace; else 0 */
};
_Static_assert(sizeof(struct tally_msg) == 24, "tally_msg is 24 bytes");

struct tally_msg_batch {
	struct tally_msg hdr;
	__u32 bytes; /* bytes of batch that are valid: header and count records */
	__u32 pad;
	struct tally_batch batch;
};

struct tally_msg_group {
	struct tally_msg hdr;
	__u32 group;
	__u32 other;
	char name[TALLY_GROUP_NAME_MAX]; /* GROUP_REGISTER only */
};
_Static_assert(sizeof(struct tally_msg_group) == 64, "tally_msg_group layout");

#define TALLY_COMM_LEN 16
/* The allocator's own thread (purge.c), which sweeps only under the heaps'
 * lock, which fork takes: never in the middle of an operation at a fork. */
#define TALLY_PURGER_COMM "tally-purge"
#define TALLY_THREAD_GROUP_DEAD 1 /* flags of THREAD_EXIT: the whole process is gone */
#define TALLY_THREAD_EXEC 2	  /* flags of THREAD_NAME: the process exec'd a new image */
#define TALLY_PROC_SHARED_VM                                                                       \
	4 /* flags of PROC_FORK: the child shares its parent's memory
				   * (vfork, posix_spawn) until it execs */
struct tally_msg_thread {
	struct tally_msg hdr;
	__u32 pid;	  /* thread group */
	__u32 parent_tid; /* THREAD_NEW: the creator; THREAD_EXIT | GROUP_DEAD: the wait status */
	char comm[TALLY_COMM_LEN];
};
_Static_assert(sizeof(struct tally_msg_thread) == 48, "tally_msg_thread layout");

/* One GPU record (TALLY_EV_GPU_*) from the uprobes on libcuda. */
struct tally_msg_gpu {
	struct tally_msg hdr;
	struct tally_ev ev;
};
_Static_assert(sizeof(struct tally_msg_gpu) == 40, "tally_msg_gpu layout");

/* A driver's load, seen at the dynamic loader's debugger hook. */
#define TALLY_DRIVER_TIMED_OUT 1 /* flags of DRIVER_HELD: the tracer never said */
struct tally_msg_driver {
	struct tally_msg hdr;
	__u64 base;	 /* the driver's load address (link_map's l_addr) */
	__u64 waited_ns; /* DRIVER_HELD: how long the thread waited */
};
_Static_assert(sizeof(struct tally_msg_driver) == 40, "tally_msg_driver layout");

/* The allocator's own figures as it hands them over at exit (probe
 * tally:stats): struct tally_stats's eleven fields in order, and the bytes
 * of its mappings that were resident then (mincore). hdr.flags: */
#define TALLY_STATS_FIELDS 11
/* other threads still running held records they never handed over (exit()
 * while they ran): the figures include what the tracer did not receive */
#define TALLY_STATS_THREADS_HELD 1
struct tally_msg_stats {
	struct tally_msg hdr;
	__u64 stats[TALLY_STATS_FIELDS];
	__u64 resident;
};
_Static_assert(sizeof(struct tally_msg_stats) == 24 + 8 * 12, "tally_msg_stats layout");

/* flags of TALLY_MSG_OOM */
#define TALLY_OOM_SHARES_MM 1  /* the thread that ran the killer had the victim's memory */
#define TALLY_OOM_HEAPS_READ 2 /* its heaps' held records were read and sent (some or all) */
/* ... every heap, to the end of the list, each copy whole: the victim's
 * figures are those of the moment it was chosen, nothing held missing */
#define TALLY_OOM_HEAPS_ALL 4
/* the heaps were read as its last thread exited, the killer having run in
 * another process: the same moment, as none of its code ran since */
#define TALLY_OOM_AT_EXIT 8
#define TALLY_OOM_NO_LIMIT (~(__u64)0) /* limit: no memory limit on its cgroup's path */
/* The OOM killer's victim as oom:mark_victim saw it. The memory figures are
 * the tracepoint's own (KiB, as the kernel's "Killed process" line); the
 * limit is the one the OOM is for: of the nearest cgroup on the path from
 * the victim's memory cgroup up whose counter is at its limit, memory.max
 * (v2), memory.limit_in_bytes or, memsw set, memory.memsw.limit_in_bytes
 * (v1); none when no counter is (the system's OOM killer). */
struct tally_msg_oom {
	struct tally_msg hdr;
	__u64 cgroup_id;       /* the victim's memory cgroup: its directory's inode */
	__u64 limit_cgroup_id; /* the cgroup whose limit is `limit` (its inode) */
	__u64 limit;	       /* bytes, or TALLY_OOM_NO_LIMIT */
	__u64 usage;	       /* bytes charged to that cgroup then */
	__u64 total_vm_kb, anon_rss_kb, file_rss_kb, shmem_rss_kb, pgtables_kb;
	__u32 uid;
	__s32 oom_score_adj;
	__u32 heaps; /* heaps whose held records were sent */
	__u16 v1;    /* 1: the memory controller is on a cgroup v1 hierarchy */
	__u16 memsw; /* 1: the limit is v1's memory and swap counter's */
	char comm[TALLY_COMM_LEN];
};
_Static_assert(sizeof(struct tally_msg_oom) == 24 + 8 * 9 + 16 + 16, "tally_msg_oom layout");

/* Per-CPU counters of what the BPF side could not carry (map `lost`). */
struct tally_lost {
	__u64 msgs;  /* messages whose ring reservation failed */
	__u64 words; /* words of allocator records inside lost batches */
	__u64 bad;   /* malformed batches refused by the BPF program */
	__u64 procs; /* new processes of the tree not followed: the map of processes was full */
	__u64 cpu;   /* CPU intervals not charged: the map of CPU per process was full */
};

#endif /* TALLY_EVENTS_H */
