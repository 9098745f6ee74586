/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libtally_interpose.so, what `tally -p PID --inject` loads into a process
 * that runs on glibc's malloc: what its files share. interpose.c has the
 * wrappers and the start (interpose_abi.h: what the injector and the start
 * agree on), interpose_thread.c the library's thread, interpose_batch.c the
 * records' batches, interpose_table.c the blocks since the start,
 * interpose_sample.c the heap profiles, interpose_got.c the process's GOT
 * entries pointed at the wrappers and back.
 */
#ifndef TALLY_ALLOC_INTERPOSE_H
#define TALLY_ALLOC_INTERPOSE_H

#include <errno.h>
#include <stdbool.h>
#include <pthread.h>
#include <sys/mman.h>
#include <stddef.h>
#include <stdatomic.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"
#include "../common/fence.h"
#include "../common/ring.h"

#define IP_API __attribute__((visibility("default")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

/* the tally:batch probe's semaphore (interpose_batch.c) */
extern unsigned short tally_batch_semaphore;

/* interpose.c's state, which its thread (interpose_thread.c) shares */
enum ip_state {
	IP_IDLE = 0,	 /* loaded, nothing patched */
	IP_TRACING = 1,	 /* patched; recording while the semaphore is up */
	IP_GONE = 2,	 /* the tracer left: entries put back, every call passed on */
	IP_PATCHING = 3, /* being patched: nothing recorded until every object is */
};
extern _Atomic int ip_state;
extern pthread_mutex_t ip_lock; /* patching, thread list */
void ip_send_info(void);	/* glibc's own totals, in a record */
int ip_patch_all(void);		/* every object's entries: ip_got_patch */
void ip_depth_add(int d);	/* the calling thread's calls passed on (d > 0) or not */
/* interpose_thread.c: the library's thread, started under ip_lock; a start
 * that takes over from a dead tally; a forked child's */
int ip_thread_start(void);
void ip_take_over(void);
void ip_thread_child(void);

/* One function of the family: the name its GOT entries are bound to, the
 * wrapper they are pointed at. */
struct ip_func {
	const char *name;
	void *wrapper;
};

/* interpose.c, what the injector calls in the process (user/os/inject.c,
 * interpose_abi.h): start recording, sampling for heap profiles one block
 * per sample_rate bytes on average (0: none); the outcome in
 * tally_interpose_outcome: 0, -EALREADY while a tracer records already,
 * -ENOTCONN without one, or -errno. */
IP_API void tally_interpose_begin(uint64_t sample_rate, uint64_t flags, uint32_t token);
extern IP_API _Atomic uint64_t tally_interpose_outcome;

/* The shadow's entries (interpose_shadow.c, below). */
typedef _Atomic uint16_t ip_sh_t;
#define IP_REGIONS 4

/*
 * A thread's records. The flusher hands over the batch of a thread that
 * went quiet, and at exit the library hands over every thread's, so the
 * owner and the flusher must not touch a batch at once; an atomic exchange
 * per call (a lock) cost the owner a fifth of its speed. So they are the
 * two sides of ../common/fence.h's pair: the owner enters `busy` against
 * `claimed` (fence_enter, no fence but the compiler's), the flusher stores
 * `claimed` and reads `busy` past a fence_heavy (microseconds, once a
 * tick). Where membarrier is refused, the owner takes `claimed` as a lock
 * instead (ip_locking). A thread's struct outlives it (reused by the next
 * thread), so that the flusher never reads freed memory.
 */
struct ithread {
	struct tally_batch batch;
	_Atomic uint8_t busy;	 /* the owner is appending */
	_Atomic uint8_t claimed; /* the flusher hands the batch over (or: the lock) */
	_Atomic uint8_t used;	 /* a live thread's */
	uint32_t tid;
	uint64_t heap_id;
	uint64_t seq;
	struct ring_state ring; /* its full batches, while the tracer reads them in place */
	struct ithread *next;	/* every struct, never unlinked */
	/* The shadow regions it used last (interpose.c), by (address >> 21) %
	 * IP_REGIONS, so that a heap's neighbouring regions do not take each
	 * other's place: key, address >> 21 (UINTPTR_MAX: none), and the
	 * region's entries. Here, not in TLS: `t` is at hand, and an indexed
	 * TLS array costs a read of the thread pointer and three more
	 * instructions; two arrays, not one of pairs: an index scaled by 8 is
	 * an address mode, by 16 two more instructions. */
	uintptr_t region_key[IP_REGIONS];
	ip_sh_t *region[IP_REGIONS];
};
extern bool ip_locking; /* no membarrier: `claimed` is a lock */

/*
 * The calling thread's state that the wrappers read at every call, in one
 * initial-exec TLS block (interpose_batch.c): one load of its offset from
 * the GOT a call rather than one per variable. (Initial-exec, as all of
 * this library's TLS (the Makefile), though it is dlopen'ed: glibc's static
 * TLS surplus holds the library's 40 bytes (48 before this struct), of the
 * 512 it keeps for such libraries by default (glibc.rtld.optional_static_tls);
 * tests/inject injects into processes started without that tunable.)
 */
struct ip_tls {
	struct ithread *me;  /* its records (NULL until its first) */
	int64_t sample_left; /* interpose_sample.c: bytes left before its next sample */
	int32_t group;	     /* interpose.c: its SDK group (-1: not known yet) */
	int depth;	     /* interpose.c: inside a wrapper, calls are passed on */
};
extern __thread struct ip_tls ip_tls __attribute__((tls_model("initial-exec")));

/* interpose_batch.c: the calling thread's batch takes a record (one word,
 * or two for a block past the one-word sizes), or a record and `nextra`
 * words after it; the batches are handed over when full, by ip_flush_all
 * (every thread's not appending now; `wait`: every thread's) and at a
 * thread's exit (ip_batch_init). In a forked child (one thread), the locks
 * of the parent's other threads are let go, and with `drop` every record
 * the parent's threads held is dropped (the parent hands them over).
 * ip_batch_init: once, at the first start. */
void ip_put_word_slow(uint8_t type, uint16_t group, uint64_t q, uint64_t usable);
/* The common case inline: a one-word record into a batch with room. */
static inline void ip_put_word(uint8_t type, uint16_t group, uint64_t q, uint64_t usable)
{
	struct ithread *t = ip_tls.me;

	if (likely(t && !ip_locking && q <= TALLY_EV_WORD_MAX && usable <= TALLY_EV_WORD_MAX) &&
	    likely(!fence_enter(&t->busy, &t->claimed))) {
		if (likely(t->batch.count < TALLY_BATCH_WORDS)) {
			t->batch.words[t->batch.count++] =
				tally_ev_word(type, group, (uint32_t)q, (uint32_t)usable);
			fence_leave(&t->busy);
			return;
		}
		fence_leave(&t->busy);
	}
	ip_put_word_slow(type, group, q, usable);
}
void ip_put_ev(const struct tally_ev *e, const uint64_t *extra, uint32_t nextra);
void ip_flush_all(bool wait);
int ip_batch_init(void);
void ip_batch_child(bool drop);
extern uint64_t ip_ring_key; /* a new one at each start: the rings announced again */
/* The tracer's cut at its end (interpose_batch.c): whether tally asked for
 * one; every thread's records up to one moment handed over, none after. */
bool ip_cut_asked(void);
void ip_cut_take(void);
/* A start: what every thread's batch holds from an earlier tracer dropped. */
void ip_batch_restart(void);

/* interpose_table.c: the blocks allocated since the start, each with its
 * requested size (q; -1: none), glibc's usable size (0: not kept, when it
 * exceeds the request by 32 KiB or more) and group. put: 0, or -ENOMEM (the
 * table cannot grow) or -E2BIG (a block of a TiB); an entry p had already is
 * returned in *stale. take: p's
 * entry, out of the table; false when it has none. */
struct ip_block {
	int64_t q;
	uint64_t usable;
	uint16_t group; /* the SDK's group it was allocated in */
	bool sampled;	/* a heap profile's sample: its free is told (id: its address) */
};
int ip_table_put(uintptr_t p, const struct ip_block *b, struct ip_block *stale);
bool ip_table_take(uintptr_t p, struct ip_block *out);
uint64_t ip_table_bytes(void);
void ip_table_child(void); /* a forked child: every stripe's lock let go */
/* Empty, at a start after a detach: what an earlier tracer saw allocated is
 * from before this one's injection (no call is recorded meanwhile). */
void ip_table_reset(void);

/* glibc's chunk header: the size word before a block, the chunk's size and
 * flag bits (2: a chunk mapped on its own, whose header is 16 bytes; 8
 * otherwise), read as glibc's malloc_usable_size reads it, which saves a
 * call a record. ip_chunk_check (interpose_shadow.c), at the start: whether
 * it says what glibc's own functions say (not under another layout, or a
 * debugging malloc). */
static inline size_t ip_chunk_usable(const void *p)
{
	size_t h = ((const size_t *)p)[-1];
	return (h & ~(size_t)7) - (h & 2 ? 16 : 8);
}
static inline bool ip_chunk_mapped(const void *p)
{
	return ((const size_t *)p)[-1] & 2;
}
bool ip_chunk_check(void *(*m)(size_t), void (*f)(void *), size_t (*usable)(void *));

/* Zeroed anonymous memory for the interposer's own tables, NULL when there
 * is none; errno as the program's malloc left it, whether or not the
 * mapping succeeded (a malloc that succeeds leaves errno alone, and the
 * program's may have been the call that came here). */
static inline void *ip_map(size_t bytes)
{
	int saved = errno;
	void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	errno = saved;
	return p == MAP_FAILED ? NULL : p;
}

/* interpose_shadow.c: the blocks of glibc's arenas allocated since the start
 * (the rest go to the table). put: 0, -EXDEV (not a block for the shadow:
 * misaligned, too high, rounded past 63 bytes) or -ENOMEM; an entry p had
 * already comes back in *stale, its size taken as this block's usable size
 * less its rounding. take: p's entry, whose usable size is `usable`, out of
 * the shadow; false when it has none. reset: as ip_table_reset. */
int ip_shadow_put(uintptr_t p, const struct ip_block *b, struct ip_block *stale);
/* The shadow's layout, for the wrappers' inline path (interpose.c): a
 * directory per 32 GiB, 2 MiB a region, an entry per 16-byte granule:
 * valid << 15 | sampled << 14 | rounding << 8 | group. */
#define IP_SHADOW_L1_SHIFT 35
#define IP_SHADOW_L1_SIZE (1u << (47 - IP_SHADOW_L1_SHIFT)) /* user addresses below 2^47 */
#define IP_SHADOW_REGION_SHIFT 21
#define IP_SHADOW_L2_SIZE (1u << (IP_SHADOW_L1_SHIFT - IP_SHADOW_REGION_SHIFT))
#define IP_SHADOW_GRANULES (1u << (IP_SHADOW_REGION_SHIFT - 4))
#define IP_SHADOW_VALID 0x8000u
#define IP_SHADOW_SAMPLED 0x4000u
#define IP_SHADOW_ROUND_MAX 0x3fu
extern ip_sh_t *_Atomic *_Atomic ip_shadow_l1[IP_SHADOW_L1_SIZE];
/* Address p's entry (16-aligned, below 2^47), NULL while its region has
 * none mapped. */
static inline ip_sh_t *ip_shadow_find(uintptr_t p)
{
	ip_sh_t *_Atomic *dir =
		atomic_load_explicit(&ip_shadow_l1[p >> IP_SHADOW_L1_SHIFT], memory_order_acquire);

	if (unlikely(!dir))
		return NULL;
	ip_sh_t *region =
		atomic_load_explicit(&dir[(p >> IP_SHADOW_REGION_SHIFT) & (IP_SHADOW_L2_SIZE - 1)],
				     memory_order_acquire);
	if (unlikely(!region))
		return NULL;
	return &region[(p >> 4) & (IP_SHADOW_GRANULES - 1)];
}
bool ip_shadow_take(uintptr_t p, uint64_t usable, struct ip_block *out);
void ip_shadow_reset(void);
uint64_t ip_shadow_bytes(void);

/* interpose_sample.c: heap profiles. The rate at a start (0: none); whether
 * a block of q bytes ends the calling thread's gap; its sample (its stack,
 * the objects of its frames, its record); its free. */
void ip_sample_start(uint64_t sample_rate);
bool ip_sample_gap_ended(void);
static inline bool ip_sample_due(size_t q)
{
	ip_tls.sample_left -= (int64_t)q;
	return unlikely(ip_tls.sample_left < 0) && ip_sample_gap_ended();
}
void ip_sample_take(void *p, size_t q, uint16_t group);
void ip_sample_free(void *p);
void ip_sample_child(void); /* a forked child: the locks let go */

/* interpose_got.c: point every GOT entry of `funcs` in every loaded object
 * (but this library's) at its wrapper, remembering what each held; objects
 * already done are skipped, so it is called again after a dlopen. Returns
 * the entries patched so far, or -errno. */
int ip_got_patch(const struct ip_func *funcs, size_t n);
/* Put back every entry ip_got_patch changed that still holds its wrapper. */
void ip_got_restore(void);

#endif /* TALLY_ALLOC_INTERPOSE_H */
