/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * An address-keyed table of the allocator's own (ptr_table.c): large.c's
 * live mappings, sample.c's sampled blocks. Open addressing with linear
 * probing, a power-of-two capacity grown at three quarters full, and
 * backward-shift deletion, so that probe chains stay whole without
 * tombstones. Entries are esize bytes whose first field is the address
 * (0: an empty slot); the table's pages are metadata of the heap that grows
 * it. The caller holds the table's lock.
 */
#ifndef TALLY_ALLOC_PTR_TABLE_H
#define TALLY_ALLOC_PTR_TABLE_H

#include <stddef.h>
#include <stdint.h>

struct heap;

struct ptr_table {
	void *v;
	size_t cap, len;    /* slots, and entries in use */
	size_t esize;	    /* bytes per entry, a power of two dividing a page */
	unsigned key_shift; /* the address's low bits that say nothing (its alignment) */
};

/* The entry of address p, or NULL. */
void *ptr_table_find(const struct ptr_table *t, uintptr_t p);
/* A new entry for p (not in the table; ptr_table_reserve made room), its
 * address set, the rest zero. */
void *ptr_table_put(struct ptr_table *t, uintptr_t p);
void ptr_table_del(struct ptr_table *t, void *e);
/* Room for one more: 0, or -ENOMEM when the table cannot grow. */
int ptr_table_reserve(struct ptr_table *t, struct heap *h);
/* The bytes its slots are mapped in. */
size_t ptr_table_mapped(const struct ptr_table *t);

#endif /* TALLY_ALLOC_PTR_TABLE_H */
