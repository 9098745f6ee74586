/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The tracer's one way to grow an array: its capacity doubled until it holds
 * what is asked, checked for overflow. Header-only, for every layer of user/
 * (the guest libraries in alloc/ have their own, without malloc). */
#ifndef TALLY_GROW_H
#define TALLY_GROW_H

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>

/*
 * *arr, an array of *cap elements of elem bytes, made to hold at least need:
 * when it does not, its capacity is doubled from *cap, or from first when
 * *cap is 0, until it does, and the array reallocated (the new elements are
 * not cleared). 0, or -ENOMEM when there is no memory or the size passes
 * SIZE_MAX, *arr and *cap then as they were.
 */
static inline int grow(void **arr, size_t *cap, size_t need, size_t elem, size_t first)
{
	size_t ncap = *cap ? *cap : first ? first : 1;
	void *p;

	if (need <= *cap)
		return 0;
	while (ncap < need) {
		if (ncap > SIZE_MAX / 2)
			return -ENOMEM;
		ncap *= 2;
	}
	if (elem && ncap > SIZE_MAX / elem)
		return -ENOMEM;
	p = realloc(*arr, ncap * elem);
	if (!p)
		return -ENOMEM;
	*arr = p;
	*cap = ncap;
	return 0;
}

#endif
