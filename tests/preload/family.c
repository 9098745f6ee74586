// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The malloc family on edge and invalid arguments (issue 12, item 17): one
 * line per call, what a program can rely on (NULL or not, errno, the
 * alignment, the usable size covering the request), no addresses. Run plain
 * and with an allocator preloaded, the two outputs must be the same.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *errname(int e)
{
	const char *n = e ? strerrorname_np(e) : "0";
	return n ? n : "?";
}

/* The alignment glibc gives memalign and aligned_alloc for `align`. */
static size_t want_align(size_t align)
{
	size_t a = 16;
	while (a < align && a <= SIZE_MAX / 2)
		a <<= 1;
	return a;
}

static void show(const char *call, void *p, int err, size_t align, size_t n)
{
	if (!p) {
		printf("%s -> NULL errno=%s\n", call, errname(err));
		return;
	}
	printf("%s -> block, aligned %s, usable covers %s\n", call,
	       (uintptr_t)p % align ? "NO" : "yes", malloc_usable_size(p) >= n ? "yes" : "NO");
	free(p);
}

#define CALL(expr, align, n)                                                                       \
	do {                                                                                       \
		errno = 0;                                                                         \
		void *p_ = (expr);                                                                 \
		show(#expr, p_, errno, (align), (n));                                              \
	} while (0)

int main(void)
{
	static const size_t aligns[] = { 0,
					 1,
					 2,
					 3,
					 5,
					 7,
					 8,
					 12,
					 16,
					 24,
					 32,
					 48,
					 64,
					 96,
					 100,
					 3000,
					 4096,
					 5000,
					 65536,
					 1 << 20,
					 (size_t)1 << 40,
					 SIZE_MAX / 2 + 1,
					 SIZE_MAX / 2 + 2,
					 SIZE_MAX };
	char call[96];

	for (unsigned i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		size_t a = aligns[i];
		void *p = NULL;
		snprintf(call, sizeof(call), "memalign(%zu, 64)", a);
		errno = 0;
		p = memalign(a, 64);
		show(call, p, errno, want_align(a), 64);
		snprintf(call, sizeof(call), "aligned_alloc(%zu, 100)", a);
		errno = 0;
		p = aligned_alloc(a, 100);
		show(call, p, errno, want_align(a), 100);
		p = NULL;
		int rc = posix_memalign(&p, a, 40);
		printf("posix_memalign(%zu, 40) -> %s%s\n", a, errname(rc),
		       rc ? (p ? " (p set!)" : "") : ((uintptr_t)p % a ? " misaligned" : ""));
		free(p);
	}
	CALL(malloc(0), 16, 0);
	CALL(malloc(SIZE_MAX), 16, 0);
	CALL(malloc(SIZE_MAX / 2 + 1), 16, 0);
	CALL(calloc(0, 0), 16, 0);
	CALL(calloc(SIZE_MAX / 2, 4), 16, 0);
	CALL(calloc((size_t)1 << 32, (size_t)1 << 32), 16, 0);
	CALL(realloc(NULL, 0), 16, 0);
	CALL(realloc(malloc(10), 0), 16, 0);
	CALL(reallocarray(NULL, SIZE_MAX / 2, 3), 16, 0);
	CALL(valloc(10), 4096, 10);
	CALL(valloc(SIZE_MAX), 4096, 0);
	CALL(pvalloc(0), 4096, 0);
	CALL(pvalloc(10), 4096, 4096);
	CALL(pvalloc(SIZE_MAX - 10), 4096, 0);
	void *q = malloc(10);
	errno = 0;
	void *r = realloc(q, SIZE_MAX);
	printf("realloc(p, SIZE_MAX) -> %s errno=%s, old block kept: %s\n", r ? "block" : "NULL",
	       errname(errno), r ? "-" : "yes");
	free(r ? r : q);
	printf("malloc_usable_size(NULL) -> %zu\n", malloc_usable_size(NULL));
	return 0;
}
