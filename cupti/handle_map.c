// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What a free, an unpin or an unload gives back, and to which group: the
 * driver's release calls name only a handle, so each allocation, pin and
 * image is remembered by (kind, handle) -> {bytes, group} from its
 * successful return until its successful release (docs/DESIGN.md §3: a free is
 * charged to the group of its allocation, whichever thread frees it).
 *
 * An open-addressing table, linear probing, deletion by backward shift (no
 * tombstones, so lookups stay short however long the process churns).
 */
#include <errno.h>
#include <stdlib.h>

#include "internal.h"
#include "../alloc/common/hash.h"

#define MAP_MIN_CAP 64

static size_t map_hash(uint32_t kind, uint64_t handle)
{
	/* splitmix64's finalizer: device pointers share their low and high bits */
	return (size_t)hash_mix64(handle ^ ((uint64_t)kind << 56));
}

static struct tally_cupti_slot *map_find(const struct tally_cupti_map *m, uint32_t kind,
					 uint64_t handle)
{
	if (!m->cap)
		return NULL;
	for (size_t i = map_hash(kind, handle) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		struct tally_cupti_slot *s = &m->slots[i];
		if (!s->kind)
			return NULL;
		if (s->kind == kind && s->handle == handle)
			return s;
	}
}

/* Place an entry known to be absent; the table has room. */
static void map_place(struct tally_cupti_map *m, const struct tally_cupti_slot *e)
{
	size_t i = map_hash(e->kind, e->handle) & (m->cap - 1);

	while (m->slots[i].kind)
		i = (i + 1) & (m->cap - 1);
	m->slots[i] = *e;
	m->used++;
}

static int map_grow(struct tally_cupti_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : MAP_MIN_CAP;
	struct tally_cupti_map bigger = { calloc(cap, sizeof(*bigger.slots)), cap, 0 };

	if (!bigger.slots)
		return -ENOMEM;
	for (size_t i = 0; i < m->cap; i++)
		if (m->slots[i].kind)
			map_place(&bigger, &m->slots[i]);
	free(m->slots);
	*m = bigger;
	return 0;
}

int tally_cupti_map_put(struct tally_cupti_map *m, uint32_t kind, uint64_t handle, uint64_t value,
			uint32_t group)
{
	struct tally_cupti_slot e = { handle, kind, group, value };
	struct tally_cupti_slot *s = map_find(m, kind, handle);
	int err;

	if (s) {
		*s = e;
		return 0;
	}
	if ((m->used + 1) * 2 > m->cap) {
		err = map_grow(m);
		if (err)
			return err;
	}
	map_place(m, &e);
	return 0;
}

const struct tally_cupti_slot *tally_cupti_map_get(const struct tally_cupti_map *m, uint32_t kind,
						   uint64_t handle)
{
	return map_find(m, kind, handle);
}

int tally_cupti_map_take(struct tally_cupti_map *m, uint32_t kind, uint64_t handle,
			 struct tally_cupti_slot *out)
{
	struct tally_cupti_slot *s = map_find(m, kind, handle);
	size_t mask = m->cap - 1, hole, i;

	if (!s)
		return -ENOENT;
	*out = *s;
	/* Backward shift: pull each later entry of the run into the hole unless
	 * its home lies cyclically in (hole, i], where it already is reachable. */
	hole = (size_t)(s - m->slots);
	for (i = (hole + 1) & mask; m->slots[i].kind; i = (i + 1) & mask) {
		size_t home = map_hash(m->slots[i].kind, m->slots[i].handle) & mask;
		if (((i - home) & mask) >= ((i - hole) & mask)) {
			m->slots[hole] = m->slots[i];
			hole = i;
		}
	}
	m->slots[hole].kind = 0;
	m->used--;
	return 0;
}

void tally_cupti_map_clear(struct tally_cupti_map *m)
{
	free(m->slots);
	m->slots = NULL;
	m->cap = 0;
	m->used = 0;
}

/* The process's table of blocks. */
static pthread_mutex_t blocks_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_cupti_map blocks;

int tally_cupti_blocks_put(uint32_t kind, uint64_t handle, uint64_t bytes, uint32_t group)
{
	int err;

	pthread_mutex_lock(&blocks_lock);
	err = tally_cupti_map_put(&blocks, kind, handle, bytes, group);
	pthread_mutex_unlock(&blocks_lock);
	return err;
}

int tally_cupti_blocks_take(uint32_t kind, uint64_t handle, uint64_t *bytes, uint32_t *group)
{
	struct tally_cupti_slot s;
	int err;

	pthread_mutex_lock(&blocks_lock);
	err = tally_cupti_map_take(&blocks, kind, handle, &s);
	pthread_mutex_unlock(&blocks_lock);
	if (err)
		return err;
	*bytes = s.value;
	*group = s.group;
	return 0;
}

size_t tally_cupti_blocks_count(void)
{
	size_t n;

	pthread_mutex_lock(&blocks_lock);
	n = blocks.used;
	pthread_mutex_unlock(&blocks_lock);
	return n;
}

void tally_cupti_blocks_reset(void)
{
	pthread_mutex_lock(&blocks_lock);
	tally_cupti_map_clear(&blocks);
	pthread_mutex_unlock(&blocks_lock);
}
