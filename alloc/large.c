// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Large objects: requests above 32 KiB, and alignments the classes cannot
 * serve, are mapped directly (page-rounded). A small pool keeps a few freed
 * mappings for reuse until the purge delay passes (hysteresis). A table maps
 * each live mapping to its length, requested size and group; it is what tells
 * a large pointer from one the allocator never gave out.
 *
 * All under one lock: a large operation costs system calls anyway.
 */
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "ptr_table.h"
#include "purge.h"

/* A mapping costs system calls and a page fault per page touched, so a
 * workload that churns large blocks must find freed ones here. A freed
 * block is kept (hysteresis) until the purge delay passes, and serves any
 * later request that it holds: the smallest such, whole. Growing a smaller
 * one with mremap, or shrinking a larger one, measured slower than either a
 * fresh mapping or the slack (more faults: the pages they move or drop are
 * the ones the next block would have used). A cap on what is kept. */
#define POOL_SLOTS 64
#define POOL_ENTRY_MAX (32UL << 20) /* larger mappings are unmapped at free */
#define POOL_TOTAL_MAX (128UL << 20)
#define POOL_SLACK_MIN (4UL << 20) /* pool_slack */
#define POPULATE_MAX (1UL << 20)
struct large_ent {
	uintptr_t ptr; /* 0: empty table slot */
	size_t len;    /* mapping length */
	size_t q;      /* requested bytes */
	uint32_t group;
};
_Static_assert(OS_PAGE % sizeof(struct large_ent) == 0 &&
		       (sizeof(struct large_ent) & (sizeof(struct large_ent) - 1)) == 0,
	       "a page of entries is a power of two");

/* The group of a block of the allocator's own (large_alloc_internal). */
#define LARGE_INTERNAL UINT32_MAX

struct pool_ent {
	void *ptr;
	size_t len;
	uint64_t stamp_ms;
};

static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ptr_table tab = { .esize = sizeof(struct large_ent), .key_shift = 12 };
static struct pool_ent pool[POOL_SLOTS];
static size_t pool_bytes;

static struct large_ent *tab_find(uintptr_t p)
{
	return ptr_table_find(&tab, p);
}

static void tab_put(const struct large_ent *e)
{
	*(struct large_ent *)ptr_table_put(&tab, e->ptr) = *e;
}

/* The most a pooled range may exceed a block of len bytes by: 4 MiB, or the
 * block's size where larger. The slack is the block's rounding (resident);
 * a larger range would sooner serve a larger block. (Held to twice the
 * size, blocks up to a megabyte mapped afresh three times as often in
 * bench-alloc's mixed, at 0.6 against 1.4 M ops/s.) */
static size_t pool_slack(size_t len)
{
	return len > POOL_SLACK_MIN ? len : POOL_SLACK_MIN;
}

/* The pooled range that serves len bytes: the smallest that holds them
 * within pool_slack; NULL when none does. */
static struct pool_ent *pool_take(size_t len)
{
	struct pool_ent *fit = NULL;
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		if (e->ptr && e->len >= len && e->len - len <= pool_slack(len) &&
		    (!fit || e->len < fit->len))
			fit = e;
	}
	return fit;
}

static void pool_evict(struct heap *h, struct pool_ent *e)
{
	os_unmap(e->ptr, e->len);
	pool_bytes -= e->len;
	h->stats.hysteresis -= e->len;
	h->stats.mapped -= e->len;
	ev(h, TALLY_EV_POOL_UNMAP, 0, 0, 0, e->len);
	e->ptr = NULL;
}

/* Block e takes pooled range pe, whole: the rest is its rounding (the pages
 * stay resident, and the next block the range serves may need them; handing
 * them back would cost a fault each then). */
static void pool_serve(struct heap *h, struct pool_ent *pe, struct large_ent *e)
{
	e->ptr = (uintptr_t)pe->ptr;
	e->len = pe->len;
	pe->ptr = NULL;
	pool_bytes -= e->len;
	h->stats.hysteresis -= e->len;
}

static void account_alloc(struct heap *h, const struct large_ent *e, uint8_t how)
{
	h->stats.large_live += e->q;
	h->stats.large_round += e->len - e->q;
	h->stats.large_count++;
	h->group_counters[e->group].alloc_bytes += e->q;
	h->group_counters[e->group].alloc_objs++;
	ev(h, TALLY_EV_LARGE_ALLOC, how, (uint16_t)e->group, (uint32_t)(e->len - e->q), e->q);
}

static void account_free(struct heap *h, const struct large_ent *e, uint8_t how)
{
	h->stats.large_live -= e->q;
	h->stats.large_round -= e->len - e->q;
	h->stats.large_count--;
	h->group_counters[e->group].dealloc_bytes += e->q;
	h->group_counters[e->group].dealloc_objs++;
	ev(h, TALLY_EV_LARGE_FREE, how, (uint16_t)e->group, (uint32_t)(e->len - e->q), e->q);
}

/* A fresh mapping of len bytes. Blocks up to POPULATE_MAX are populated in
 * one go: a fault per page costs microseconds here, the kernel fills a page
 * in a fraction of that, and a block this size is nearly always written
 * whole. Pooled reuse then never faults, and resident is what the identity
 * says. */
static void *large_map(size_t len, size_t align)
{
	if (align > OS_PAGE)
		return os_map_aligned(len, align);
	return os_map_flags(len, len <= POPULATE_MAX ? MAP_POPULATE : 0);
}

void *large_alloc(struct heap *h, size_t q, size_t align, bool zero)
{
	size_t len = (q + OS_PAGE - 1) & ~(OS_PAGE - 1);
	struct large_ent e = { .q = q, .group = h->group };
	uint8_t how = TALLY_LARGE_FRESH;

	if (len < q || len == 0)
		len = OS_PAGE;
	if (q > PTRDIFF_MAX)
		return NULL;
	pthread_mutex_lock(&large_lock);
	if (ptr_table_reserve(&tab, h))
		goto fail;
	struct pool_ent *pe = align <= OS_PAGE ? pool_take(len) : NULL;
	if (pe) {
		pool_serve(h, pe, &e);
		how = TALLY_LARGE_POOL;
		if (zero) /* fresh pages are zero already; these held a block */
			memset((void *)e.ptr, 0, q);
	} else {
		void *p = large_map(len, align);
		if (!p)
			goto fail;
		e.ptr = (uintptr_t)p;
		e.len = len;
		h->stats.mapped += len;
	}
	tab_put(&e);
	account_alloc(h, &e, how);
	pthread_mutex_unlock(&large_lock);
	if (ev_tracing())
		sample_count(h, (void *)e.ptr, q, (uint16_t)e.group, true);
	return (void *)e.ptr;
fail:
	pthread_mutex_unlock(&large_lock);
	return NULL;
}

/* A mapping of the allocator's own blocks made or unmapped: metadata. */
static void internal_account(struct heap *h, size_t len, bool map)
{
	h->stats.mapped += map ? len : -len;
	h->stats.segment_overhead += map ? len : -len;
	ev(h, TALLY_EV_META_MAP, !map, 0, 0, len);
}

/*
 * A block the allocator's own code asked for through malloc (glibc's
 * pthread_create callocs the purger's DTV, 288 bytes here): a mapping of its
 * own, metadata as the heaps' are (mapped and segment_overhead, one
 * TALLY_EV_META_MAP), never live, so that a program's live bytes are the
 * ones it asked for. Never pooled; its free unmaps it (large_free).
 */
void *large_alloc_internal(struct heap *h, size_t q, size_t align)
{
	size_t len = (q + OS_PAGE - 1) & ~(OS_PAGE - 1);

	if (len < q || len == 0)
		len = OS_PAGE;
	if (q > PTRDIFF_MAX)
		return NULL;
	pthread_mutex_lock(&large_lock);
	void *p = ptr_table_reserve(&tab, h) ? NULL : large_map(len, align);
	if (p) {
		tab_put(&(struct large_ent){
			.ptr = (uintptr_t)p, .len = len, .q = q, .group = LARGE_INTERNAL });
		internal_account(h, len, true);
	}
	pthread_mutex_unlock(&large_lock);
	return p;
}

static void internal_unmap(struct heap *h, const struct large_ent *e)
{
	os_unmap((void *)e->ptr, e->len);
	internal_account(h, e->len, false);
}

bool large_is_internal(const void *p)
{
	pthread_mutex_lock(&large_lock);
	struct large_ent *e = tab_find((uintptr_t)p);
	bool internal = e && e->group == LARGE_INTERNAL;
	pthread_mutex_unlock(&large_lock);
	return internal;
}

/* false: p is no large block of ours (the caller reports it). expect_q, when
 * not SIZE_MAX, must be the requested size (free_sized). */
bool large_free(struct heap *h, void *p, size_t expect_q)
{
	pthread_mutex_lock(&large_lock);
	struct large_ent *pe = tab_find((uintptr_t)p);
	if (!pe || (expect_q != SIZE_MAX && expect_q != pe->q)) {
		pthread_mutex_unlock(&large_lock);
		return false;
	}
	struct large_ent e = *pe;
	ptr_table_del(&tab, pe);
	if (e.group == LARGE_INTERNAL) {
		internal_unmap(h, &e);
		pthread_mutex_unlock(&large_lock);
		return true;
	}
	int slot = -1;
	if (e.len <= POOL_ENTRY_MAX) {
		/* the newest free is the likeliest to be asked for again: make room
		 * for it by unmapping the oldest entries */
		for (;;) {
			int oldest = -1;
			slot = -1;
			for (int i = 0; i < POOL_SLOTS; i++) {
				if (!pool[i].ptr)
					slot = i;
				else if (oldest < 0 || pool[i].stamp_ms < pool[oldest].stamp_ms)
					oldest = i;
			}
			if (slot >= 0 && pool_bytes + e.len <= POOL_TOTAL_MAX)
				break;
			pool_evict(h, &pool[oldest]);
		}
	}
	if (slot >= 0) {
		/* the delay counts from the free: the heap's clock is read at its
		 * ticks, and an owner that last ticked before a slow stretch of
		 * its own would stamp the entry old enough to go at once */
		h->now_ms = os_now_ms();
		pool[slot] = (struct pool_ent){ (void *)e.ptr, e.len, h->now_ms };
		pool_bytes += e.len;
		h->stats.hysteresis += e.len;
		account_free(h, &e, TALLY_LARGE_POOL);
		purge_kick(h);
	} else {
		os_unmap((void *)e.ptr, e.len);
		h->stats.mapped -= e.len;
		account_free(h, &e, TALLY_LARGE_FRESH);
	}
	pthread_mutex_unlock(&large_lock);
	if (ev_tracing())
		sample_forget(h, p);
	return true;
}

bool large_size(const void *p, size_t *q, size_t *len)
{
	pthread_mutex_lock(&large_lock);
	struct large_ent *e = tab_find((uintptr_t)p);
	if (e) {
		*q = e->q;
		*len = e->len;
	}
	pthread_mutex_unlock(&large_lock);
	return e != NULL;
}

/*
 * Resize a large block that stays large, in place when the page count does
 * not change and with mremap otherwise (no copy). The block moves to the
 * current group. NULL: p is not ours, or no memory (errno set by the caller).
 */
void *large_realloc(struct heap *h, void *p, size_t q)
{
	size_t len = (q + OS_PAGE - 1) & ~(OS_PAGE - 1);
	void *np = p;

	if (len < q || q > PTRDIFF_MAX)
		return NULL;
	pthread_mutex_lock(&large_lock);
	struct large_ent *pe = tab_find((uintptr_t)p);
	if (!pe)
		goto fail;
	if (len != pe->len) {
		np = mremap(p, pe->len, len, MREMAP_MAYMOVE);
		if (np == MAP_FAILED)
			goto fail;
	}
	/* as a free and an allocation, which is exactly how the figures move */
	struct large_ent e = *pe;
	ptr_table_del(&tab, pe);
	if (e.group == LARGE_INTERNAL) { /* the allocator's own stays its own */
		internal_account(h, e.len, false);
		e = (struct large_ent){ (uintptr_t)np, len, q, LARGE_INTERNAL };
		tab_put(&e);
		internal_account(h, len, true);
		pthread_mutex_unlock(&large_lock);
		return np;
	}
	account_free(h, &e, TALLY_LARGE_FRESH);
	h->stats.mapped -= e.len;
	e = (struct large_ent){ .ptr = (uintptr_t)np, .len = len, .q = q, .group = h->group };
	tab_put(&e);
	h->stats.mapped += len;
	account_alloc(h, &e, TALLY_LARGE_FRESH);
	pthread_mutex_unlock(&large_lock);
	if (ev_tracing())
		sample_resized(h, p, np, q, (uint16_t)e.group, true);
	return np;
fail:
	pthread_mutex_unlock(&large_lock);
	return NULL;
}

void large_sweep(struct heap *h, bool force)
{
	pthread_mutex_lock(&large_lock);
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		/* another heap's clock may be older than the stamp: that entry is
		 * young, not 2^64 ms old */
		if (e->ptr && (force || (h->now_ms >= e->stamp_ms &&
					 h->now_ms - e->stamp_ms >= tally_purge_ms)))
			pool_evict(h, e);
	}
	pthread_mutex_unlock(&large_lock);
}

/* When large_sweep will next have something to evict (UINT64_MAX: never). */
uint64_t large_due(void)
{
	uint64_t due = UINT64_MAX;

	pthread_mutex_lock(&large_lock);
	for (int i = 0; i < POOL_SLOTS; i++)
		if (pool[i].ptr && pool[i].stamp_ms + tally_purge_ms < due)
			due = pool[i].stamp_ms + tally_purge_ms;
	pthread_mutex_unlock(&large_lock);
	return due;
}

void large_lock_prepare(void)
{
	pthread_mutex_lock(&large_lock);
}

void large_lock_release(void)
{
	pthread_mutex_unlock(&large_lock);
}

/* Resident bytes of every large mapping, pooled ones and the table's. */
uint64_t large_resident(void)
{
	uint64_t bytes = 0;

	pthread_mutex_lock(&large_lock);
	const struct large_ent *e = tab.v;
	for (size_t i = 0; i < tab.cap; i++)
		if (e[i].ptr)
			bytes += os_resident((void *)e[i].ptr, e[i].len);
	for (size_t i = 0; i < POOL_SLOTS; i++)
		if (pool[i].ptr)
			bytes += os_resident(pool[i].ptr, pool[i].len);
	if (tab.v)
		bytes += os_resident(tab.v, ptr_table_mapped(&tab));
	pthread_mutex_unlock(&large_lock);
	return bytes;
}
