// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's table of the blocks allocated since the start
 * (interpose.h): what tells a free whether its block is one, and its
 * requested size. No malloc: it grows by mmap.
 */
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>

#include "interpose.h"

/*
 * Open addressing in 64 stripes, each under a spin lock of its own (an
 * operation holds one for a few probes), grown by mmap at 3/4 full counting
 * the deleted marks. A block's entry holds its requested size.
 */
#define STRIPES 64
#define TOMB ((uintptr_t)1)
struct tent {
	uintptr_t p;
	uint64_t q;
};
struct stripe {
	_Atomic uint8_t lock;
	uint64_t cap, used; /* used: live entries and tombs */
	struct tent *v;
} __attribute__((aligned(64)));
static struct stripe stripes[STRIPES];

static uint64_t hash_ptr(uintptr_t p)
{
	return (p >> 4) * 0x9e3779b97f4a7c15ULL;
}

static struct stripe *stripe_lock(uintptr_t p)
{
	struct stripe *s = &stripes[hash_ptr(p) >> 58];
	while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
		;
	return s;
}

static void stripe_unlock(struct stripe *s)
{
	atomic_store_explicit(&s->lock, 0, memory_order_release);
}

static int stripe_grow(struct stripe *s)
{
	uint64_t live = 0;
	for (uint64_t i = 0; i < s->cap; i++)
		live += s->v[i].p > TOMB;
	uint64_t ncap = s->cap ? s->cap : 1024;
	while (live * 2 >= ncap)
		ncap *= 2;
	struct tent *n = mmap(NULL, ncap * sizeof(*n), PROT_READ | PROT_WRITE,
			      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (n == MAP_FAILED)
		return -ENOMEM;
	for (uint64_t i = 0; i < s->cap; i++) {
		if (s->v[i].p <= TOMB)
			continue;
		uint64_t j = hash_ptr(s->v[i].p) & (ncap - 1);
		while (n[j].p)
			j = (j + 1) & (ncap - 1);
		n[j] = s->v[i];
	}
	if (s->v)
		munmap(s->v, s->cap * sizeof(*s->v));
	s->v = n;
	s->cap = ncap;
	s->used = live;
	return 0;
}

/* Take p's entry out: its requested size, or -1 when the table has none. */
int64_t ip_table_take(uintptr_t p)
{
	struct stripe *s = stripe_lock(p);
	int64_t q = -1;

	for (uint64_t j = hash_ptr(p) & (s->cap - 1); s->cap && s->v[j].p;
	     j = (j + 1) & (s->cap - 1)) {
		if (s->v[j].p == p) {
			q = (int64_t)s->v[j].q;
			s->v[j].p = TOMB;
			break;
		}
	}
	stripe_unlock(s);
	return q;
}

/* Put p in; an entry p already had (its block freed where no wrapper saw
 * it, and the address given out again) is returned in *stale (else -1). */
int ip_table_put(uintptr_t p, uint64_t q, int64_t *stale)
{
	struct stripe *s = stripe_lock(p);
	int err = 0;

	*stale = -1;
	if ((s->used + 1) * 4 >= s->cap * 3 && (err = stripe_grow(s)))
		goto out;
	uint64_t j = hash_ptr(p) & (s->cap - 1), tomb = UINT64_MAX;
	for (; s->v[j].p; j = (j + 1) & (s->cap - 1)) {
		if (s->v[j].p == p) {
			*stale = (int64_t)s->v[j].q;
			s->v[j].q = q;
			goto out;
		}
		if (s->v[j].p == TOMB && tomb == UINT64_MAX)
			tomb = j;
	}
	if (tomb != UINT64_MAX)
		j = tomb;
	else
		s->used++;
	s->v[j] = (struct tent){ p, q };
out:
	stripe_unlock(s);
	return err;
}

void ip_table_child(void)
{
	for (int i = 0; i < STRIPES; i++)
		atomic_store(&stripes[i].lock, 0);
}

uint64_t ip_table_bytes(void)
{
	uint64_t bytes = 0;

	for (int i = 0; i < STRIPES; i++)
		bytes += stripes[i].cap * sizeof(struct tent);
	return bytes;
}
