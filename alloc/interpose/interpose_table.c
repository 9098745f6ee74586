// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_interpose.so's table of the blocks allocated since the start
 * that the shadow does not hold (interpose_shadow.c: blocks glibc maps on
 * their own, odd roundings): what tells a free whether its block is one,
 * and its requested size. No malloc: it grows by mmap.
 */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"
#include "../common/hash.h"

/*
 * Open addressing (linear probing) in 64 stripes, each under a spin lock of
 * its own (an operation holds one for a few probes), doubled by mmap at 3/4
 * full. A deletion shifts the entries after it back (no deleted marks, so a
 * table whose blocks come and go never needs rebuilding). A block's entry
 * holds its requested size.
 */
#define STRIPES 64
#define STRIPE_MIN 64 /* few blocks come here: 1 KiB a stripe to start */
struct tent {
	uintptr_t p; /* 0: empty */
	/* requested | (usable - requested, or ROUND_UNKNOWN) << 40 |
	 * sampled << 55 | group << 56 */
	uint64_t v;
};
#define Q_BITS 40
#define Q_MASK ((1ULL << Q_BITS) - 1)
#define ROUND_UNKNOWN 0x7fffULL

static uint64_t pack(const struct ip_block *b)
{
	uint64_t round = b->usable - (uint64_t)b->q;
	return ((uint64_t)b->q & Q_MASK) |
	       (round < ROUND_UNKNOWN ? round : ROUND_UNKNOWN) << Q_BITS |
	       (uint64_t)b->sampled << 55 | (uint64_t)(b->group & 0xff) << 56;
}

static void unpack(uint64_t v, struct ip_block *b)
{
	uint64_t round = (v >> Q_BITS) & ROUND_UNKNOWN;
	b->q = (int64_t)(v & Q_MASK);
	b->usable = round == ROUND_UNKNOWN ? 0 : (uint64_t)b->q + round;
	b->sampled = (v >> 55) & 1;
	b->group = (uint16_t)(v >> 56);
}

struct stripe {
	_Atomic uint8_t lock;
	unsigned bits; /* cap == 1 << bits */
	uint64_t cap, used;
	struct tent *v;
} __attribute__((aligned(64)));
static struct stripe stripes[STRIPES];

static uint64_t hash_ptr(uintptr_t p)
{
	return hash_fib64(p >> 4);
}

/* p's home slot: the hash's top bits pick the stripe, the bits below them
 * the slot (a multiplicative hash's low bits are its worst) */
static uint64_t home(const struct stripe *s, uintptr_t p)
{
	return (hash_ptr(p) << 6) >> (64 - s->bits);
}

/* The stripe of p, locked. */
static struct stripe *enter(uintptr_t p)
{
	struct stripe *s = &stripes[hash_ptr(p) >> 58];

	while (atomic_exchange_explicit(&s->lock, 1, memory_order_acquire))
		;
	return s;
}

static void leave(struct stripe *s)
{
	atomic_store_explicit(&s->lock, 0, memory_order_release);
}

static int stripe_grow(struct stripe *s)
{
	uint64_t ncap = s->cap ? s->cap * 2 : STRIPE_MIN;
	struct stripe grown = { .bits = (unsigned)__builtin_ctzll(ncap) };
	struct tent *n = ip_map(ncap * sizeof(*n));

	if (!n)
		return -ENOMEM;
	for (uint64_t i = 0; i < s->cap; i++) {
		if (!s->v[i].p)
			continue;
		uint64_t j = home(&grown, s->v[i].p);
		while (n[j].p)
			j = (j + 1) & (ncap - 1);
		n[j] = s->v[i];
	}
	if (s->v)
		munmap(s->v, s->cap * sizeof(*s->v));
	s->v = n;
	s->cap = ncap;
	s->bits = grown.bits;
	return 0;
}

/* Empty slot j, and shift back the entries after it that probed past it. */
static void stripe_delete(struct stripe *s, uint64_t j)
{
	uint64_t mask = s->cap - 1;

	for (uint64_t k = (j + 1) & mask; s->v[k].p; k = (k + 1) & mask) {
		uint64_t h = home(s, s->v[k].p);
		/* k's entry may move to j when its home is not in (j, k] */
		if (((k - h) & mask) >= ((k - j) & mask)) {
			s->v[j] = s->v[k];
			j = k;
		}
	}
	s->v[j].p = 0;
	s->used--;
}

bool ip_table_take(uintptr_t p, struct ip_block *out)
{
	struct stripe *s = enter(p);
	bool found = false;

	for (uint64_t j = s->cap ? home(s, p) : 0; s->cap && s->v[j].p;
	     j = (j + 1) & (s->cap - 1)) {
		if (s->v[j].p == p) {
			unpack(s->v[j].v, out);
			stripe_delete(s, j);
			found = true;
			break;
		}
	}
	leave(s);
	return found;
}

int ip_table_put(uintptr_t p, const struct ip_block *b, struct ip_block *stale)
{
	struct stripe *s = enter(p);
	int err = 0;

	stale->q = -1;
	if ((uint64_t)b->q > Q_MASK) {
		err = -E2BIG;
		goto out;
	}
	if ((s->used + 1) * 4 >= s->cap * 3 && (err = stripe_grow(s)))
		goto out;
	uint64_t j = home(s, p);
	for (; s->v[j].p; j = (j + 1) & (s->cap - 1)) {
		if (s->v[j].p == p) {
			unpack(s->v[j].v, stale);
			s->v[j].v = pack(b);
			goto out;
		}
	}
	s->used++;
	s->v[j] = (struct tent){ p, pack(b) };
out:
	leave(s);
	return err;
}

void ip_table_reset(void)
{
	for (int i = 0; i < STRIPES; i++) {
		struct stripe *s = &stripes[i];
		if (s->v)
			memset(s->v, 0, s->cap * sizeof(*s->v));
		s->used = 0;
	}
}

void ip_table_child(void)
{
	for (int i = 0; i < STRIPES; i++)
		atomic_store(&stripes[i].lock, 0);
	ip_sample_child(); /* the samples' ids and objects: their locks too */
}

uint64_t ip_table_bytes(void)
{
	uint64_t bytes = 0;

	for (int i = 0; i < STRIPES; i++)
		bytes += stripes[i].cap * sizeof(struct tent);
	return bytes;
}
