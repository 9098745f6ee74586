// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's shadow of glibc's arenas (internal.h): two bytes
 * for each 16-byte granule a block may start at, saying whether the block
 * there was allocated since the start, and its group, sampled mark and
 * rounding (its requested size is its usable size, read from glibc's chunk
 * header at the free, less that rounding).
 *
 * Why not only the table (interpose_table.c): a hash table's entry for a
 * block lies anywhere in it, a cache miss at each free, and one table
 * serves every thread, so threads took its stripes' locks. A block's shadow
 * lies beside its neighbours' (the shadow of a 600 KiB heap is 75 KiB), and
 * needs no lock: a block's entry is written by the thread glibc gave it to
 * and cleared before glibc has it back, and glibc orders the two.
 *
 * Memory: 1/8 of the span of the arenas' 2 MiB regions that hold a block
 * allocated since the start, mapped when the first one does (an 8-byte
 * pointer per region, in a 128 KiB directory for each 32 GiB of addresses
 * used). Blocks glibc maps on their own (past mmap's threshold), blocks
 * whose rounding does not fit, and addresses past 47 bits go to the table.
 * And the check that glibc's chunk header is read right (internal.h).
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "internal.h"

#define L1_SHIFT IP_SHADOW_L1_SHIFT
#define L1_SIZE IP_SHADOW_L1_SIZE
#define REGION_SHIFT IP_SHADOW_REGION_SHIFT
#define L2_SIZE IP_SHADOW_L2_SIZE
#define GRANULES IP_SHADOW_GRANULES
#define E_VALID IP_SHADOW_VALID
#define E_SAMPLED IP_SHADOW_SAMPLED
#define ROUND_MAX IP_SHADOW_ROUND_MAX

ip_sh_t *_Atomic *_Atomic ip_shadow_l1[L1_SIZE];
static _Atomic uint64_t mapped_bytes;

static void *map(size_t bytes)
{
	void *p = ip_map(bytes);

	if (!p)
		return NULL;
	atomic_fetch_add_explicit(&mapped_bytes, bytes, memory_order_relaxed);
	return p;
}

/* Install a fresh mapping in *slot unless another thread did first. */
static void *install(void *_Atomic *slot, size_t bytes)
{
	void *fresh = map(bytes), *none = NULL;

	if (!fresh)
		return atomic_load_explicit(slot, memory_order_acquire);
	if (atomic_compare_exchange_strong_explicit(slot, &none, fresh, memory_order_acq_rel,
						    memory_order_acquire))
		return fresh;
	munmap(fresh, bytes);
	atomic_fetch_sub_explicit(&mapped_bytes, bytes, memory_order_relaxed);
	return none;
}

/* p's entry; NULL when its region has none (`make`: mapped for it, NULL
 * only when that fails). */
static inline ip_sh_t *entry(uintptr_t p, bool make)
{
	ip_sh_t *e = ip_shadow_find(p);

	if (likely(e) || !make)
		return e;
	ip_sh_t *_Atomic *dir =
		atomic_load_explicit(&ip_shadow_l1[p >> L1_SHIFT], memory_order_acquire);
	if (!dir) {
		dir = install((void *_Atomic *)&ip_shadow_l1[p >> L1_SHIFT],
			      L2_SIZE * sizeof(*dir));
		if (!dir)
			return NULL;
	}
	ip_sh_t *_Atomic *rslot = &dir[(p >> REGION_SHIFT) & (L2_SIZE - 1)];
	ip_sh_t *region = atomic_load_explicit(rslot, memory_order_acquire);
	if (!region) {
		region = install((void *_Atomic *)rslot, GRANULES * sizeof(*region));
		if (!region)
			return NULL;
	}
	return &region[(p >> 4) & (GRANULES - 1)];
}

static void unpack(uint16_t e, uint64_t usable, struct ip_block *b)
{
	b->q = (int64_t)(usable - ((e >> 8) & ROUND_MAX));
	b->usable = usable;
	b->group = e & 0xff;
	b->sampled = e & E_SAMPLED;
}

int ip_shadow_put(uintptr_t p, const struct ip_block *b, struct ip_block *stale)
{
	uint64_t round = b->usable - (uint64_t)b->q;

	stale->q = -1;
	if ((p & 15) || p >> 47 || round > ROUND_MAX || b->group > 0xff)
		return -EXDEV;
	ip_sh_t *e = entry(p, true);
	if (!e)
		return -ENOMEM;
	uint16_t old = atomic_load_explicit(e, memory_order_relaxed);
	/* a block here whose free went unseen: its usable size is not kept,
	 * and taken as this one's (right when glibc gives back a chunk of the
	 * same size, as its caches do); the caller counts it free */
	if (old & E_VALID)
		unpack(old, b->usable, stale);
	atomic_store_explicit(
		e, (uint16_t)(E_VALID | (b->sampled ? E_SAMPLED : 0) | round << 8 | b->group),
		memory_order_relaxed);
	return 0;
}

bool ip_shadow_take(uintptr_t p, uint64_t usable, struct ip_block *out)
{
	if ((p & 15) || p >> 47)
		return false;
	ip_sh_t *e = entry(p, false);
	if (!e)
		return false;
	uint16_t v = atomic_load_explicit(e, memory_order_relaxed);
	if (!(v & E_VALID))
		return false;
	atomic_store_explicit(e, 0, memory_order_relaxed);
	unpack(v, usable, out);
	return true;
}

void ip_shadow_reset(void)
{
	for (uint32_t i = 0; i < L1_SIZE; i++) {
		ip_sh_t *_Atomic *dir = atomic_load(&ip_shadow_l1[i]);
		for (uint32_t j = 0; dir && j < L2_SIZE; j++) {
			ip_sh_t *region = atomic_load(&dir[j]);
			/* zero pages again, and out of the process's resident set */
			if (region)
				madvise(region, GRANULES * sizeof(*region), MADV_DONTNEED);
		}
	}
}

uint64_t ip_shadow_bytes(void)
{
	return atomic_load_explicit(&mapped_bytes, memory_order_relaxed);
}

bool ip_chunk_check(void *(*m)(size_t), void (*f)(void *), size_t (*usable)(void *))
{
	/* below mmap's threshold: the free of a chunk glibc mapped raises the
	 * threshold to its size for good, which would change how the program's
	 * later blocks are placed (and how much memory glibc keeps) */
	static const size_t sizes[] = { 1, 24, 100, 1000, 40000 };
	bool same = true;

	for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *p = m(sizes[i]);
		if (!p)
			continue;
		same &= ip_chunk_usable(p) == usable(p);
		f(p);
	}
	return same;
}
