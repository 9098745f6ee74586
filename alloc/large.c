// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Large objects: requests above 32 KiB, and alignments the classes cannot
 * serve, are mapped directly (page-rounded; from LARGE_ROUND_MIN up, whole
 * 2 MiB chunks, aligned). A pool keeps freed mappings for reuse until the
 * purge delay passes (hysteresis, large_pool.c); a block that no pooled range
 * holds takes the pool's chunks, moved into its fresh mapping. A table maps
 * each live mapping to its length, requested size and group; it is what tells
 * a large pointer from one the allocator never gave out.
 *
 * Measured on mimalloc-bench's malloc-large shape (bench-alloc, 5..25 MiB
 * blocks, each zero-filled whole, 400 pairs), against the pool that served a
 * block only whole: 109 k page faults instead of 238 k (glibc 218 k), peak
 * RSS 428 MiB instead of 546 (glibc 485, mimalloc 418), 1.7 to 2.2 times
 * glibc's speed instead of 0.87. Transparent huge pages (MADV_HUGEPAGE on
 * mappings of 4 MiB up, with the pool as it was) also got there, 29 k page
 * faults and 1.8 times glibc's speed, but a block written at its head only
 * would hold 2 MiB resident (bench-alloc's large shape writes its blocks so),
 * and the mappings would lose the "nh" mark by which the tracer tells the
 * allocator's (os.c): not taken.
 *
 * All under one lock: a large operation costs system calls anyway.
 */
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "large_layout.h"
#include "large_pool.h"
#include "ptr_table.h"
#include "purge.h"

/* Blocks up to POPULATE_MAX are mapped populated (large_map). */
#define POPULATE_MAX (1UL << 20)
struct large_ent {
	uintptr_t ptr; /* 0: empty table slot */
	size_t len;    /* mapping length */
	size_t q;      /* requested bytes */
	uint32_t group;
	uint32_t lay; /* where its kernel mappings meet (large_layout.h) */
};
_Static_assert(OS_PAGE % sizeof(struct large_ent) == 0 &&
		       (sizeof(struct large_ent) & (sizeof(struct large_ent) - 1)) == 0,
	       "a page of entries is a power of two");

/* The group of a block of the allocator's own (large_alloc_internal). */
#define LARGE_INTERNAL UINT32_MAX

static pthread_mutex_t large_lock = PTHREAD_MUTEX_INITIALIZER;
static struct ptr_table tab = { .esize = sizeof(struct large_ent), .key_shift = 12 };

static struct large_ent *tab_find(uintptr_t p)
{
	return ptr_table_find(&tab, p);
}

static void tab_put(const struct large_ent *e)
{
	*(struct large_ent *)ptr_table_put(&tab, e->ptr) = *e;
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
	if (len >= LARGE_CHUNK && align < LARGE_CHUNK)
		align = LARGE_CHUNK; /* its chunks may move (large_pool.h) */
	if (align > OS_PAGE)
		return os_map_aligned(len, align);
	return os_map_flags(len, len <= POPULATE_MAX ? MAP_POPULATE : 0);
}

/* A fresh mapping for e, with the pool's pages where it is large enough to
 * take them (fresh pages are zero already, moved ones held a block). */
static bool large_fresh(struct heap *h, struct large_ent *e, size_t align, bool zero)
{
	void *p = large_map(e->len, align);
	size_t moved = 0;

	e->lay = 0;
	if (p && align <= OS_PAGE && e->len >= LARGE_ROUND_MIN)
		moved = pool_compose(h, p, e->len, &e->lay);
	if (moved == SIZE_MAX)
		os_unmap(p, e->len); /* and no layout was stored */
	if (!p || moved == SIZE_MAX)
		return false;
	if (zero)
		memset(p, 0, moved < e->q ? moved : e->q);
	e->ptr = (uintptr_t)p;
	h->stats.mapped += e->len;
	return true;
}

/* The mapping for q bytes: pages, and whole chunks from LARGE_ROUND_MIN up
 * (the rounding is address space until a pooled chunk moves in). */
static size_t large_len(size_t q, size_t align)
{
	size_t len = (q + OS_PAGE - 1) & ~(OS_PAGE - 1);

	if (len == 0)
		return OS_PAGE;
	if (align <= OS_PAGE && len >= LARGE_ROUND_MIN)
		len = (len + LARGE_CHUNK - 1) & ~(LARGE_CHUNK - 1);
	return len;
}

void *large_alloc(struct heap *h, size_t q, size_t align, bool zero)
{
	if (q > PTRDIFF_MAX)
		return NULL;
	size_t len = large_len(q, align);
	struct large_ent e = { .q = q, .len = len, .group = h->group };
	uint8_t how = TALLY_LARGE_FRESH;

	pthread_mutex_lock(&large_lock);
	if (ptr_table_reserve(&tab, h))
		goto fail;
	void *pp = align <= OS_PAGE ? pool_take(h, &e.len, &e.lay) : NULL;
	if (pp) {
		e.ptr = (uintptr_t)pp;
		how = TALLY_LARGE_POOL;
		if (zero) /* fresh pages are zero already; these held a block */
			memset(pp, 0, q);
	} else if (!large_fresh(h, &e, align, zero)) {
		goto fail;
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
		tab_put(&(struct large_ent){ .ptr = (uintptr_t)p,
					     .len = len,
					     .q = q,
					     .group = LARGE_INTERNAL,
					     .lay = 0 });
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
	if (pool_put(h, (void *)e.ptr, e.len, e.lay)) {
		account_free(h, &e, TALLY_LARGE_POOL);
		purge_kick(h);
	} else {
		os_unmap((void *)e.ptr, e.len);
		lay_drop(e.lay);
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

/* realloc of a block that mremap cannot resize: one whose pages came from
 * several mappings (large_pool.c), which mremap resizes only as one. */
static void *realloc_by_copy(struct heap *h, void *p, size_t old_q, size_t q)
{
	void *np = large_alloc(h, q, 0, false);

	if (np) {
		memcpy(np, p, old_q < q ? old_q : q);
		large_free(h, p, SIZE_MAX);
	}
	return np;
}

/*
 * Resize a large block that stays large, in place when the page count does
 * not change and with mremap otherwise (no copy). The block moves to the
 * current group. NULL: p is not ours, or no memory (errno set by the caller).
 */
void *large_realloc(struct heap *h, void *p, size_t q)
{
	void *np = p;

	if (q > PTRDIFF_MAX)
		return NULL;
	size_t len = large_len(q, 0);
	pthread_mutex_lock(&large_lock);
	struct large_ent *pe = tab_find((uintptr_t)p);
	if (!pe)
		goto fail;
	struct large_ent e = *pe;
	if (len != e.len) {
		np = mremap(p, e.len, len, MREMAP_MAYMOVE);
		if (np == MAP_FAILED) {
			pthread_mutex_unlock(&large_lock);
			return e.group == LARGE_INTERNAL ? NULL : realloc_by_copy(h, p, e.q, q);
		}
		lay_drop(e.lay); /* mremap resizes within one mapping only */
		e.lay = 0;
	}
	/* as a free and an allocation, which is exactly how the figures move */
	ptr_table_del(&tab, pe);
	if (e.group == LARGE_INTERNAL) { /* the allocator's own stays its own */
		internal_account(h, e.len, false);
		e = (struct large_ent){ (uintptr_t)np, len, q, LARGE_INTERNAL, 0 };
		tab_put(&e);
		internal_account(h, len, true);
		pthread_mutex_unlock(&large_lock);
		return np;
	}
	account_free(h, &e, TALLY_LARGE_FRESH);
	h->stats.mapped -= e.len;
	e = (struct large_ent){
		.ptr = (uintptr_t)np, .len = len, .q = q, .group = h->group, .lay = e.lay
	};
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
	pool_sweep(h, force);
	pthread_mutex_unlock(&large_lock);
}

/* When large_sweep will next have something to evict (UINT64_MAX: never). */
uint64_t large_due(void)
{
	pthread_mutex_lock(&large_lock);
	uint64_t due = pool_due();
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
	bytes += pool_resident();
	if (tab.v)
		bytes += os_resident(tab.v, ptr_table_mapped(&tab));
	pthread_mutex_unlock(&large_lock);
	return bytes;
}
