/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The malloc family under tally_p_ names, for the sanitizer build of the unit
 * tests (TALLY_ALLOC_PREFIX), where ASan keeps the real names. */
#ifndef TALLY_ALLOC_PREFIXED_H
#define TALLY_ALLOC_PREFIXED_H

#include <malloc.h>
#include <stddef.h>
#include <stdio.h>

void *tally_p_malloc(size_t n);
void tally_p_free(void *p);
void *tally_p_calloc(size_t n, size_t size);
void *tally_p_realloc(void *p, size_t n);
void *tally_p_reallocarray(void *p, size_t n, size_t size);
int tally_p_posix_memalign(void **out, size_t align, size_t n);
void *tally_p_aligned_alloc(size_t align, size_t n);
void *tally_p_memalign(size_t align, size_t n);
void *tally_p_valloc(size_t n);
void *tally_p_pvalloc(size_t n);
size_t tally_p_malloc_usable_size(void *p);
void tally_p_free_sized(void *p, size_t n);
void tally_p_free_aligned_sized(void *p, size_t align, size_t n);
struct mallinfo2 tally_p_mallinfo2(void);
struct mallinfo tally_p_mallinfo(void);
void tally_p_malloc_stats(void);
int tally_p_malloc_info(int options, FILE *fp);
int tally_p_malloc_trim(size_t pad);
int tally_p_mallopt(int param, int value);

#endif
