// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's wrappers and its start (docs/DESIGN.md §10), what
 * `tally -p PID --inject` loads into a process on glibc's malloc
 * (user/os/inject.c makes it dlopen the library, then call
 * tally_interpose_begin). The malloc family's GOT entries lead here
 * (interpose_got.c); each wrapper calls glibc's own function and, while
 * traced, records the call in the thread's batch (interpose_batch.c). A
 * block allocated since the start is known by its address: the shadow for
 * glibc's arena blocks (interpose_shadow.c), the table for the rest
 * (interpose_table.c); a free of one neither holds is recorded as untracked,
 * never as negative live bytes. The library's thread, and what it does when
 * tally leaves: interpose_thread.c.
 */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "../../bpf/contract/tally_events.h"
#include "internal.h"
#include "interpose_fast.h"
#include "../../bpf/contract/interpose_abi.h"
#include "../common/probes.h"
#include "../common/sdk_lookup.h"

/* ---- glibc's own functions ---- */

static struct {
	void *(*malloc)(size_t);
	void (*free)(void *);
	void *(*calloc)(size_t, size_t);
	void *(*realloc)(void *, size_t);
	void *(*memalign)(size_t, size_t);
	int (*posix_memalign)(void **, size_t, size_t);
	void *(*aligned_alloc)(size_t, size_t);
	void *(*valloc)(size_t);
	void *(*pvalloc)(size_t);
	size_t (*usable)(void *);
	struct mallinfo2 (*mallinfo2)(void);
	void *(*dlopen)(const char *, int);
} real;

/* ---- state ---- */

_Atomic int ip_state;		      /* enum ip_state */
static _Atomic uint64_t ip_untracked; /* calls not recorded (the table could not grow) */
static _Atomic uint64_t ip_unseen;    /* blocks given again whose free was not seen */
pthread_mutex_t ip_lock = PTHREAD_MUTEX_INITIALIZER; /* patching, thread list */

/* ---- recording ---- */

/*
 * Whether this call is recorded: recording is on and it is not glibc
 * calling back from inside a wrapper (tracing), tally's probe is attached
 * and this is not a child forked without glibc's fork (probe_on:
 * probe_guard.c, which fixes such a child up before its first record goes
 * through the probe). Recording starts after the guard is set up
 * (start_locked), so its word is read without asking whether there is one.
 *
 * malloc's and free's inline path (interpose_fast.h) asks tracing() only
 * (five instructions a call fewer): it reaches neither the probe nor a lock
 * (a batch the flusher claimed, which the guard's fix-up lets go of in such
 * a child, sends it to the general path, which asks probe_on first); and a
 * semaphore down means tally has gone, after which the library's thread
 * turns recording off within a tick (interpose_thread.c), and what was
 * recorded meanwhile nobody reads (a next start drops it: ip_batch_restart,
 * and empties the shadow).
 */
static inline bool tracing(void)
{
	return likely(atomic_load_explicit(&ip_state, memory_order_acquire) == IP_TRACING) &&
	       !ip_tls.depth;
}

static inline bool probe_on(void)
{
	return likely(tally_batch_semaphore != 0) &&
	       (likely(__atomic_load_n(tally_probe_guard, __ATOMIC_ACQUIRE) == PROBE_GUARD_LIVE) ||
		probe_guard_ok());
}

static inline bool recording(void)
{
	return likely(tally_batch_semaphore != 0) && tracing() && probe_on();
}

static bool usable_inline; /* the chunk's header says what glibc says (start) */
bool ip_fast_ok;	   /* interpose_fast.h */

static size_t usable_of(void *p)
{
	return likely(usable_inline) ? ip_chunk_usable(p) : real.usable(p);
}

/*
 * The SDK's resource groups (libtally.so): it tells libtally_alloc a
 * thread's group through tally_alloc__set_group, a weak symbol it calls
 * when defined; its GOT entries for it are pointed here like the malloc
 * family's. A thread's group before its first record comes from
 * tally_group_current.
 */
static struct tally_group (*sdk_current)(void); /* sdk_lookup.h */

static void ip_set_group(uint32_t g)
{
	ip_tls.group = g < TALLY_MAX_GROUPS ? (int32_t)g : 0;
}

static uint16_t group_now(void)
{
	if (unlikely(ip_tls.group < 0)) {
		uint32_t g = sdk_current ? sdk_current().id : 0;
		ip_tls.group = g < TALLY_MAX_GROUPS ? (int32_t)g : 0;
	}
	return (uint16_t)ip_tls.group;
}

/* Whether p is a block of glibc's arenas (not one it mapped on its own), of
 * the layout usable_of reads: those have a shadow (interpose_shadow.c). */
static inline bool arena_block(const void *p)
{
	return likely(usable_inline) && !ip_chunk_mapped(p);
}

/* Block p's entry in: the shadow for arena blocks, the table for the rest.
 * 0 or -errno (not held: not exact). */
static int block_put(void *p, const struct ip_block *b, struct ip_block *stale)
{
	if (arena_block(p) && !ip_shadow_put((uintptr_t)p, b, stale))
		return 0;
	return ip_table_put((uintptr_t)p, b, stale);
}

static void on_alloc(void *p, size_t q)
{
	struct ip_block stale;

	if (!p)
		return;
	struct ip_block b = { (int64_t)q, usable_of(p), group_now(), ip_sample_due(q) };
	if (block_put(p, &b, &stale)) {
		atomic_fetch_add_explicit(&ip_untracked, 1, memory_order_relaxed);
		return;
	}
	if (unlikely(stale.q >= 0)) { /* its free went unseen: it is free now */
		atomic_fetch_add_explicit(&ip_unseen, 1, memory_order_relaxed);
		ip_put_word(TALLY_EV_FREE, stale.group, (uint64_t)stale.q,
			    stale.usable ? stale.usable : (uint64_t)stale.q);
		if (stale.sampled)
			ip_sample_free(p);
	}
	ip_put_word(TALLY_EV_ALLOC, b.group, q, b.usable);
	if (unlikely(b.sampled))
		ip_sample_take(p, q, b.group);
}

/* The free of block p, whose table entry b was taken out (tracked) or not,
 * usable: its usable size; `realloc_old`: a realloc's old block. */
static void record_free(void *p, bool tracked, const struct ip_block *b, uint64_t usable,
			bool realloc_old)
{
	if (tracked) {
		ip_put_word(TALLY_EV_FREE, b->group, (uint64_t)b->q, usable);
		if (unlikely(b->sampled))
			ip_sample_free(p);
	} else {
		struct tally_ev e = { .type = TALLY_EV_FREE_UNTRACKED,
				      .n = realloc_old,
				      .bytes = usable };
		ip_put_ev(&e, NULL, 0);
	}
}

/* p's entry taken out before glibc may free it (after, the address may be
 * another block's), and its usable size. */
static bool take(void *p, struct ip_block *b, uint64_t *usable)
{
	if (arena_block(p)) {
		*usable = usable_of(p);
		if (ip_shadow_take((uintptr_t)p, *usable, b))
			return true;
	}
	bool tracked = ip_table_take((uintptr_t)p, b);

	*usable = tracked && b->usable ? b->usable : usable_of(p);
	return tracked;
}

/* ---- the wrappers ---- */

#define WRAP_BEGIN()                                                                               \
	bool rec = recording();                                                                    \
	if (rec)                                                                                   \
	ip_tls.depth++
#define WRAP_END()                                                                                 \
	if (rec)                                                                                   \
	ip_tls.depth--

/* The general path of malloc and free, out of line (the inline path keeps
 * no frame for it), inside ip_tls.depth: the call recorded unless the
 * probe says otherwise. */
static __attribute__((noinline)) void *alloc_general(void *p, size_t n)
{
	if (probe_on())
		on_alloc(p, n);
	ip_tls.depth--;
	return p;
}

static __attribute__((noinline)) void free_general(void *p)
{
	struct ip_block b;
	uint64_t usable;

	if (probe_on()) {
		bool tracked = take(p, &b, &usable);
		record_free(p, tracked, &b, usable, false);
	}
	real.free(p);
	ip_tls.depth--;
}

/*
 * ip_tls.depth is raised from before glibc's call to after the record: a
 * call glibc makes back (a hook before glibc 2.34), or a signal handler's
 * that interrupts a record half written, is passed on. But free's inline
 * path, its record written, calls glibc's free as a tail call when glibc
 * calls no hook back (ip_fast_ok: 2.34 or later): with the general paths
 * out of line, 9 instructions a malloc+free pair fewer (callgrind).
 */
static void *ip_malloc(size_t n)
{
	if (!tracing())
		return real.malloc(n);
	ip_tls.depth++;
	void *p = real.malloc(n);
	if (unlikely(!alloc_fast(p, n)))
		return alloc_general(p, n);
	ip_tls.depth--;
	return p;
}

static void ip_free(void *p)
{
	if (!p)
		return;
	if (!tracing()) {
		real.free(p);
		return;
	}
	ip_tls.depth++;
	if (unlikely(!free_fast(p))) { /* (false without ip_fast_ok) */
		free_general(p);
		return;
	}
	ip_tls.depth--;
	real.free(p);
}

static void *ip_calloc(size_t n, size_t size)
{
	WRAP_BEGIN();
	void *p = real.calloc(n, size);
	if (rec)
		on_alloc(p, n * size); /* not NULL: no overflow */
	WRAP_END();
	return p;
}

/* The old block's entry comes out before glibc may free it; a failed
 * realloc leaves the block, and puts the entry back. */
static void *realloc_as(void *p, size_t n)
{
	if (!p)
		return ip_malloc(n);
	WRAP_BEGIN();
	if (!rec)
		return real.realloc(p, n);
	struct ip_block old;
	uint64_t old_usable;
	bool tracked = take(p, &old, &old_usable);
	void *np = real.realloc(p, n);
	if (!np && n) {
		/* failed: the block stays, and its entry */
		struct ip_block stale;
		if (tracked && block_put(p, &old, &stale))
			atomic_fetch_add_explicit(&ip_untracked, 1, memory_order_relaxed);
	} else {
		record_free(p, tracked, &old, old_usable, true);
		on_alloc(np, n);
	}
	WRAP_END();
	return np;
}

static void *ip_realloc(void *p, size_t n)
{
	return realloc_as(p, n);
}

static void *ip_reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	return realloc_as(p, total);
}

static void *ip_memalign(size_t align, size_t n)
{
	WRAP_BEGIN();
	void *p = real.memalign(align, n);
	if (rec)
		on_alloc(p, n);
	WRAP_END();
	return p;
}

static void *ip_aligned_alloc(size_t align, size_t n)
{
	WRAP_BEGIN();
	void *p = real.aligned_alloc(align, n);
	if (rec)
		on_alloc(p, n);
	WRAP_END();
	return p;
}

static int ip_posix_memalign(void **out, size_t align, size_t n)
{
	WRAP_BEGIN();
	int err = real.posix_memalign(out, align, n);
	if (rec && !err)
		on_alloc(*out, n);
	WRAP_END();
	return err;
}

static void *ip_valloc(size_t n)
{
	WRAP_BEGIN();
	void *p = real.valloc(n);
	if (rec)
		on_alloc(p, n);
	WRAP_END();
	return p;
}

static void *ip_pvalloc(size_t n)
{
	WRAP_BEGIN();
	void *p = real.pvalloc(n);
	if (rec)
		on_alloc(p, n);
	WRAP_END();
	return p;
}

static const struct ip_func funcs[];
static const size_t nfuncs;

/* A library the program loads is patched before dlopen returns (its
 * constructors' blocks are not seen allocated); the library's thread
 * catches those loaded another way (by glibc itself) within a tick. */
static void *ip_dlopen(const char *file, int mode)
{
	void *h = real.dlopen(file, mode);

	if (h && atomic_load(&ip_state) == IP_TRACING) {
		pthread_mutex_lock(&ip_lock);
		if (atomic_load(&ip_state) == IP_TRACING)
			ip_got_patch(funcs, nfuncs);
		pthread_mutex_unlock(&ip_lock);
	}
	return h;
}

static const struct ip_func funcs[] = {
	{ "malloc", (void *)ip_malloc },
	{ "free", (void *)ip_free },
	{ "calloc", (void *)ip_calloc },
	{ "realloc", (void *)ip_realloc },
	{ "reallocarray", (void *)ip_reallocarray },
	{ "memalign", (void *)ip_memalign },
	{ "aligned_alloc", (void *)ip_aligned_alloc },
	{ "posix_memalign", (void *)ip_posix_memalign },
	{ "valloc", (void *)ip_valloc },
	{ "pvalloc", (void *)ip_pvalloc },
	{ "dlopen", (void *)ip_dlopen },
	{ "tally_alloc__set_group", (void *)ip_set_group },
};
static const size_t nfuncs = sizeof(funcs) / sizeof(funcs[0]);

int ip_patch_all(void)
{
	return ip_got_patch(funcs, nfuncs);
}

void ip_depth_add(int d)
{
	ip_tls.depth += d;
}

/* ---- the library's thread's (interpose_thread.c) ---- */

void ip_send_info(void)
{
	struct mallinfo2 mi = real.mallinfo2();
	uint64_t table = ip_table_bytes() + ip_shadow_bytes();
	struct tally_ev e = { .type = TALLY_EV_GLIBC_INFO,
			      .n = (uint32_t)atomic_load(&ip_untracked),
			      .bytes = table };
	uint64_t w[TALLY_GLIBC_INFO_WORDS] = { mi.arena,    mi.hblkhd,	 mi.uordblks,
					       mi.fordblks, mi.keepcost, atomic_load(&ip_unseen) };
	ip_put_ev(&e, w, TALLY_GLIBC_INFO_WORDS);
}

/* ---- start, fork, exit ---- */

static int resolve(void)
{
	const struct {
		void **slot;
		const char *name;
	} syms[] = {
		{ (void **)&real.malloc, "malloc" },
		{ (void **)&real.free, "free" },
		{ (void **)&real.calloc, "calloc" },
		{ (void **)&real.realloc, "realloc" },
		{ (void **)&real.memalign, "memalign" },
		{ (void **)&real.posix_memalign, "posix_memalign" },
		{ (void **)&real.aligned_alloc, "aligned_alloc" },
		{ (void **)&real.valloc, "valloc" },
		{ (void **)&real.pvalloc, "pvalloc" },
		{ (void **)&real.usable, "malloc_usable_size" },
		{ (void **)&real.mallinfo2, "mallinfo2" },
		{ (void **)&real.dlopen, "dlopen" },
	};
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);

	if (!libc)
		return -ENOENT;
	/* in this order, up to the first missing; then none is kept, since a
	 * later start resolves again only while real.malloc is unset, and
	 * would otherwise call through the missing one (mallinfo2 before
	 * glibc 2.33) */
	for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
		if (!(*syms[i].slot = dlsym(libc, syms[i].name))) {
			real.malloc = NULL;
			return -ENOENT;
		}
	}
	/* the SDK's, when the process has it (without a dlerror message) */
	sdk_current = sdk_lookup_group_current();
	return 0;
}

/* A child: one nobody traces lets go of everything (its entries back to
 * glibc's); one that is traced keeps recording, its batches handed over when
 * full and at its exit (the library's thread is not in the child). */
static void on_child(bool traced)
{
	/* the child's only thread: a lock another thread of the parent held at
	 * the fork would never be let go */
	pthread_mutex_init(&ip_lock, NULL);
	ip_thread_child();
	ip_table_child();
	ip_batch_child(!traced);
	if (traced)
		return;
	int state = atomic_load(&ip_state);
	if (state == IP_TRACING || state == IP_PATCHING) {
		atomic_store(&ip_state, IP_GONE);
		ip_got_restore();
	}
}

/* Whether glibc's malloc and free call nothing back: from 2.34 on, no
 * __malloc_hook or __free_hook is called (a hook could call the program's
 * malloc, through a wrapper). */
static bool no_hooks(void)
{
	char *end;
	unsigned long major = strtoul(gnu_get_libc_version(), &end, 10);
	unsigned long minor = *end == '.' ? strtoul(end + 1, NULL, 10) : 0;

	return major > 2 || (major == 2 && minor >= 34);
}

/* Patch and start recording (under ip_lock): 0 or -errno. */
static int start_locked(uint64_t sample_rate)
{
	static bool once;
	int err;

	if (!real.malloc && (err = resolve()))
		return err;
	if (!once) {
		if ((err = ip_batch_init()))
			return err;
		probe_guard_init(on_child);
		once = true;
	}
	ip_table_reset();
	ip_shadow_reset();
	ip_batch_restart();
	atomic_store(&ip_unseen, 0);
	ip_sample_start(sample_rate);
	usable_inline = ip_chunk_check(real.malloc, real.free, real.usable);
	ip_fast_ok = usable_inline && !ip_locking && no_hooks();
	__atomic_add_fetch(&ip_ring_key, 1, __ATOMIC_RELAXED);
	/* recording begins once every object is patched: a block allocated
	 * through an entry patched already and freed through one not patched
	 * yet (another thread runs meanwhile) would stay live */
	atomic_store(&ip_state, IP_PATCHING);
	err = ip_got_patch(funcs, nfuncs);
	if (err >= 0) {
		atomic_store(&ip_state, IP_TRACING);
		err = ip_thread_start();
	}
	if (err < 0) {
		atomic_store(&ip_state, IP_GONE);
		ip_got_restore();
	}
	return err < 0 ? err : 0;
}

IP_API _Atomic uint64_t tally_interpose_outcome; /* interpose_abi.h */

/*
 * Called by the injector in the process's hijacked thread (interpose_abi.h):
 * patch, start the library's thread; the outcome, 0 or -errno, in
 * tally_interpose_outcome beside the injector's token: -ENOTCONN when
 * tally's probe is not there (the semaphore is down: the tally that
 * injected died before this ran), -EALREADY when another tally records
 * already (unless TALLY_INTERPOSE_TAKEOVER), -ENOENT without glibc's
 * functions.
 */
IP_API void tally_interpose_begin(uint64_t sample_rate, uint64_t flags, uint32_t token)
{
	int err = 0;

	pthread_mutex_lock(&ip_lock);
	if (!tally_batch_semaphore)
		err = -ENOTCONN;
	else if (atomic_load(&ip_state) == IP_TRACING && !(flags & TALLY_INTERPOSE_TAKEOVER))
		err = -EALREADY;
	else if (atomic_load(&ip_state) == IP_TRACING)
		ip_take_over();
	if (!err)
		err = start_locked(sample_rate);
	pthread_mutex_unlock(&ip_lock);
	atomic_store(&tally_interpose_outcome, (uint64_t)token << 32 | (uint32_t)err);
}

__attribute__((destructor)) static void ip_fini(void)
{
	if (atomic_load(&ip_state) == IP_TRACING && tally_batch_semaphore) {
		ip_tls.depth++;
		ip_send_info();
		ip_tls.depth--;
		ip_flush_all(true);
	}
}
