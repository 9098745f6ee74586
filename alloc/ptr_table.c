// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The allocator's address-keyed tables (ptr_table.h). */
#include <errno.h>
#include <string.h>

#include "internal.h"
#include "ptr_table.h"
#include "common/hash.h"

/* Fibonacci hashing of the address past its alignment (common/hash.h), bits
 * from 20 up. */
#define HASH_SHIFT 20

static uintptr_t *slot(const struct ptr_table *t, size_t i)
{
	return (uintptr_t *)((char *)t->v + i * t->esize);
}

static size_t home(const struct ptr_table *t, uintptr_t p)
{
	return (size_t)(hash_fib64(p >> t->key_shift) >> HASH_SHIFT) & (t->cap - 1);
}

void *ptr_table_find(const struct ptr_table *t, uintptr_t p)
{
	if (!t->cap)
		return NULL;
	for (size_t i = home(t, p);; i = (i + 1) & (t->cap - 1)) {
		if (*slot(t, i) == p)
			return slot(t, i);
		if (!*slot(t, i))
			return NULL;
	}
}

void *ptr_table_put(struct ptr_table *t, uintptr_t p)
{
	size_t i = home(t, p);
	while (*slot(t, i))
		i = (i + 1) & (t->cap - 1);
	memset(slot(t, i), 0, t->esize);
	*slot(t, i) = p;
	t->len++;
	return slot(t, i);
}

void ptr_table_del(struct ptr_table *t, void *e)
{
	size_t i = (size_t)((char *)e - (char *)t->v) / t->esize, j = i;
	for (;;) {
		j = (j + 1) & (t->cap - 1);
		if (!*slot(t, j))
			break;
		size_t k = home(t, *slot(t, j));
		/* move j into the hole at i unless its home k lies cyclically in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			memcpy(slot(t, i), slot(t, j), t->esize);
			i = j;
		}
	}
	*slot(t, i) = 0;
	t->len--;
}

size_t ptr_table_mapped(const struct ptr_table *t)
{
	return (t->cap * t->esize + OS_PAGE - 1) & ~(OS_PAGE - 1);
}

int ptr_table_reserve(struct ptr_table *t, struct heap *h)
{
	if ((t->len + 1) * 4 <= t->cap * 3)
		return 0;
	struct ptr_table old = *t;
	size_t ncap = t->cap ? t->cap * 2 : OS_PAGE / t->esize;
	void *n = heap_meta_alloc(h, ncap * t->esize);
	if (!n)
		return -ENOMEM;
	memset(n, 0, ncap * t->esize);
	t->v = n;
	t->cap = ncap;
	t->len = 0;
	for (size_t i = 0; i < old.cap; i++)
		if (*slot(&old, i))
			memcpy(ptr_table_put(t, *slot(&old, i)), slot(&old, i), t->esize);
	if (old.v) {
		size_t olen = ptr_table_mapped(&old);
		os_unmap(old.v, olen);
		h->stats.mapped -= olen;
		h->stats.segment_overhead -= olen;
		ev(h, TALLY_EV_META_MAP, 1, 0, 0, olen);
	}
	return 0;
}
