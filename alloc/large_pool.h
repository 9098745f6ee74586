/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The pool of freed large mappings (large_pool.c), under large.c's lock. */
#ifndef TALLY_ALLOC_LARGE_POOL_H
#define TALLY_ALLOC_LARGE_POOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct heap;

/* Pages move between mappings in whole chunks of this size, aligned: a page
 * table's reach, which mremap moves whole (moved a page at a time, they cost
 * more at their next touch than fresh pages on these VMs). Blocks of a chunk
 * or more are mapped aligned to it. */
#define LARGE_CHUNK (2UL << 20)
/* Blocks from this size up are whole chunks (large.c): pooled, they split at
 * chunks and serve larger blocks (pool_compose), none of their pages left. */
#define LARGE_ROUND_MIN (4UL << 20)

void *pool_take(struct heap *h, size_t *len, uint32_t *lay);
size_t pool_compose(struct heap *h, char *dst, size_t len, uint32_t *lay);
bool pool_put(struct heap *h, void *p, size_t len, uint32_t lay);
void pool_sweep(struct heap *h, bool force);
uint64_t pool_due(void);
uint64_t pool_resident(void);

#endif /* TALLY_ALLOC_LARGE_POOL_H */
