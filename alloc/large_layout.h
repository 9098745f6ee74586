/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where a large range's kernel mappings (VMAs) meet (large_layout.c): a
 * range is one mapping when mapped, and more once pooled pages moved into it
 * (large_pool.c). A layout is 0 for a range of one mapping, else a handle to
 * the page offsets of its inner bounds, ascending. At most LARGE_PIECES_MAX
 * mappings a range, so that the process's mappings stay few
 * (vm.max_map_count). Under large.c's lock.
 */
#ifndef TALLY_ALLOC_LARGE_LAYOUT_H
#define TALLY_ALLOC_LARGE_LAYOUT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LARGE_PIECES_MAX 16
#define LAY_BOUNDS_MAX (LARGE_PIECES_MAX - 1)
#define LAY_NONE UINT32_MAX /* lay_put: no record free */

struct lay_bounds {
	uint32_t n;
	uint32_t off[LAY_BOUNDS_MAX]; /* pages from the range's start */
};

void lay_load(uint32_t lay, struct lay_bounds *b);
uint32_t lay_put(uint32_t lay, const struct lay_bounds *b);
void lay_drop(uint32_t lay);
bool lay_room(void);
uint32_t lay_below(uint32_t lay, size_t at);
void lay_cut(const struct lay_bounds *b, size_t at, struct lay_bounds *head,
	     struct lay_bounds *tail);
bool lay_append(struct lay_bounds *b, size_t at, const struct lay_bounds *part);

#endif /* TALLY_ALLOC_LARGE_LAYOUT_H */
