// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The malloc family against glibc's documented contract, one check a line
 * ("ok - NAME" or "FAIL - NAME: DETAIL", then "N passed, M failed"; exit 1
 * on a failure). tests/conformance/run.sh runs it plain (glibc) and with
 * libtally_alloc preloaded: the same binary must pass under both.
 *
 * What real programs rely on: every byte malloc_usable_size gives is usable
 * and realloc keeps it (Redis' sds writes the tail), realloc's shrink, 0 and
 * NULL cases, the overflow checks of calloc and reallocarray, the aligned
 * forms and their EINVAL, and glibc's extensions (malloc_trim, mallinfo2,
 * malloc_info, mallopt) answering about the memory the program holds. C23's
 * free_sized and free_aligned_sized, which glibc 2.36 lacks, are called
 * through dlsym where the allocator exports them.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int passed, failed;
/* sizes the compiler must not see (it rejects the calls it can prove fail) */
static volatile size_t huge = SIZE_MAX, half = SIZE_MAX / 2;

static void check(const char *name, int ok, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void check(const char *name, int ok, const char *fmt, ...)
{
	if (ok) {
		printf("ok - %s\n", name);
		passed++;
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	printf("FAIL - %s: ", name);
	vprintf(fmt, ap);
	printf("\n");
	va_end(ap);
	failed++;
}

static void fill(unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		p[i] = (unsigned char)(i * 131 + seed);
}

/* the first byte of p[0, n) that fill(seed) did not write; n when none */
static size_t first_bad(const unsigned char *p, size_t n, unsigned seed)
{
	for (size_t i = 0; i < n; i++)
		if (p[i] != (unsigned char)(i * 131 + seed))
			return i;
	return n;
}

/* 80 sizes over the small classes, the large blocks and their borders */
static size_t size_at(int i)
{
	static const size_t big[] = { 32767, 32768, 32769, 65536, 100000, 1 << 20 };
	if (i < 74)
		return (size_t)1 + (size_t)i * (size_t)i * 5;
	return big[i - 74];
}

/* Fill every usable byte, grow by `grow` (a factor of 2 or + 1 byte): all
 * the usable bytes are still there. */
static void usable_kept(const char *name, int doubling)
{
	int lost = 0;
	size_t bad_size = 0;
	for (int i = 0; i < 80; i++) {
		size_t n = size_at(i);
		unsigned char *p = malloc(n);
		size_t u = p ? malloc_usable_size(p) : 0;
		if (!p || u < n) {
			check(name, 0, "malloc(%zu) -> %p, usable %zu", n, (void *)p, u);
			free(p);
			return;
		}
		fill(p, u, (unsigned)i);
		unsigned char *q = realloc(p, doubling ? u * 2 : u + 1);
		if (!q) {
			check(name, 0, "realloc of %zu bytes failed", n);
			free(p);
			return;
		}
		if (first_bad(q, u, (unsigned)i) != u) {
			lost++;
			bad_size = n;
		}
		free(q);
	}
	check(name, lost == 0, "%d of 80 sizes lost usable bytes (one: malloc(%zu))", lost,
	      bad_size);
}

static void realloc_shrink(void)
{
	static const size_t pairs[][2] = { { 100, 10 },	       { 5000, 100 },
					   { 40000, 1000 },    { 1 << 20, 50000 },
					   { 1 << 20, 40000 }, { 300000, 200000 } };
	int bad = 0;
	for (unsigned i = 0; i < sizeof(pairs) / sizeof(pairs[0]); i++) {
		unsigned char *p = malloc(pairs[i][0]);
		if (!p)
			break;
		fill(p, pairs[i][0], i);
		unsigned char *q = realloc(p, pairs[i][1]);
		if (!q) {
			bad++;
			free(p);
			continue;
		}
		bad += first_bad(q, pairs[i][1], i) != pairs[i][1] ||
		       malloc_usable_size(q) < pairs[i][1];
		free(q);
	}
	check("realloc-shrink-keeps-prefix", bad == 0, "%d of 6 shrinks lost their prefix", bad);
}

static void realloc_edges(void)
{
	void *p = realloc(NULL, 100);
	check("realloc-null-is-malloc", p && malloc_usable_size(p) >= 100,
	      "realloc(NULL, 100) -> %p", p);
	/* glibc (REALLOC_ZERO_BYTES_FREES): realloc(p, 0) frees p, returns NULL */
	void *z = realloc(p, 0);
	check("realloc-zero-frees", z == NULL, "realloc(p, 0) -> %p, glibc gives NULL", z);
	free(z);
	unsigned char *volatile a = malloc(64);
	fill(a, 64, 7);
	errno = 0;
	void *r = reallocarray(a, half, 3);
	int e = errno;
	check("reallocarray-overflow", r == NULL && e == ENOMEM && first_bad(a, 64, 7) == 64,
	      "-> %p errno %d, block %s", r, e, first_bad(a, 64, 7) == 64 ? "kept" : "changed");
	r = reallocarray(a, 16, 8);
	check("reallocarray-grows", r && first_bad(r, 64, 7) == 64, "reallocarray(p, 16, 8) -> %p",
	      r);
	free(r ? r : a);
	errno = 0;
	p = realloc(NULL, huge - 4096);
	e = errno;
	check("realloc-huge-enomem", p == NULL && e == ENOMEM, "-> %p errno %d", p, e);
}

static void calloc_checks(void)
{
	errno = 0;
	void *p = calloc(half / 4, 16);
	int e = errno;
	check("calloc-overflow", p == NULL && e == ENOMEM, "-> %p errno %d", p, e);
	/* dirty blocks of the same sizes first: calloc must clear a reused one */
	static const size_t sizes[] = { 8, 100, 1000, 20000, 40000, 300000 };
	int dirty = 0;
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		void *d[8];
		for (int k = 0; k < 8; k++) {
			d[k] = malloc(sizes[i]);
			if (d[k])
				memset(d[k], 0xa5, sizes[i]);
		}
		for (int k = 0; k < 8; k++)
			free(d[k]);
		unsigned char *c = calloc(1, sizes[i]);
		for (size_t j = 0; c && j < sizes[i]; j++)
			if (c[j]) {
				dirty++;
				break;
			}
		free(c);
	}
	check("calloc-zeroes-reused", dirty == 0, "%d of 6 sizes had a nonzero byte", dirty);
	errno = 0;
	p = malloc(huge);
	e = errno;
	check("malloc-huge-enomem", p == NULL && e == ENOMEM, "malloc(SIZE_MAX) -> %p errno %d", p,
	      e);
	p = malloc(0);
	void *p2 = malloc(0);
	check("malloc-zero-unique", p && p2 && p != p2, "malloc(0) -> %p, %p", p, p2);
	free(p);
	free(p2);
	check("usable-size-null", malloc_usable_size(NULL) == 0, "malloc_usable_size(NULL) != 0");
}

/* the block is aligned, covers n, and every usable byte can be written */
static int aligned_ok(void *p, size_t align, size_t n)
{
	if (!p || (uintptr_t)p % align)
		return 0;
	size_t u = malloc_usable_size(p);
	if (u < n)
		return 0;
	memset(p, 0x5a, u);
	return 1;
}

static void aligned_forms(void)
{
	static const size_t aligns[] = { 8, 16, 32, 64, 256, 4096, 8192, 65536, 1 << 21 };
	static const size_t sizes[] = { 1, 100, 5000, 40000 };
	int bad = 0;
	for (unsigned i = 0; i < sizeof(aligns) / sizeof(aligns[0]); i++) {
		for (unsigned j = 0; j < sizeof(sizes) / sizeof(sizes[0]); j++) {
			size_t a = aligns[i], n = sizes[j];
			void *p = NULL;
			bad += posix_memalign(&p, a, n) != 0 || !aligned_ok(p, a, n);
			free(p);
			p = aligned_alloc(a, n);
			bad += !aligned_ok(p, a, n);
			free(p);
			p = memalign(a, n);
			bad += !aligned_ok(p, a, n);
			free(p);
		}
	}
	check("aligned-forms", bad == 0, "%d of 108 aligned blocks wrong", bad);
	void *p = (void *)1;
	int e3 = posix_memalign(&p, 3, 64), e0 = posix_memalign(&p, 0, 64);
	int e4 = posix_memalign(&p, 4, 64);
	check("posix-memalign-einval",
	      e3 == EINVAL && e0 == EINVAL && e4 == EINVAL && p == (void *)1,
	      "align 3 -> %d, 0 -> %d, 4 -> %d", e3, e0, e4);
	int en = posix_memalign(&p, 64, huge - 8192);
	check("posix-memalign-enomem", en == ENOMEM, "huge size -> %d", en);
	p = valloc(100);
	check("valloc-page", aligned_ok(p, 4096, 100), "valloc(100) -> %p", p);
	free(p);
	p = pvalloc(100);
	check("pvalloc-page", aligned_ok(p, 4096, 4096), "pvalloc(100) -> %p usable %zu", p,
	      p ? malloc_usable_size(p) : 0);
	free(p);
	/* the aligned block's usable tail survives a realloc as a plain one */
	unsigned char *m = memalign(64, 100);
	size_t u = m ? malloc_usable_size(m) : 0;
	if (m)
		fill(m, u, 3);
	unsigned char *g = m ? realloc(m, u * 3) : NULL;
	check("aligned-realloc-keeps-usable", g && first_bad(g, u, 3) == u, "memalign(64, 100)");
	free(g);
}

/* mallinfo2 answers about the program's blocks: 64 KiB held more is 64
 * KiB more in use. */
static void info_checks(void)
{
	struct mallinfo2 a = mallinfo2();
	void *held[64];
	for (int i = 0; i < 64; i++)
		held[i] = malloc(1024);
	void *big = malloc(1 << 20);
	struct mallinfo2 b = mallinfo2();
	size_t grew = (b.uordblks + b.hblkhd) - (a.uordblks + a.hblkhd);
	check("mallinfo2-counts-blocks", grew >= 64 * 1024 + (1 << 20),
	      "in use grew by %zu for %d bytes held", grew, 64 * 1024 + (1 << 20));
	for (int i = 0; i < 64; i++)
		free(held[i]);
	free(big);
	int t = malloc_trim(0);
	check("malloc-trim", t == 0 || t == 1, "malloc_trim(0) -> %d", t);
	check("mallopt", mallopt(M_ARENA_MAX, 2) == 1 && mallopt(M_MMAP_THRESHOLD, 1 << 20) == 1,
	      "mallopt refused a parameter glibc accepts");
	char *doc = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&doc, &len);
	int r = f ? malloc_info(0, f) : -1;
	if (f)
		fclose(f);
	int xml = doc && strncmp(doc, "<malloc version=", 16) == 0 && len > 10 &&
		  strstr(doc, "</malloc>\n") == doc + len - 10;
	check("malloc-info-xml", r == 0 && xml, "malloc_info -> %d, document '%.40s'", r,
	      doc ? doc : "");
	free(doc);
	r = malloc_info(1, stdout); /* glibc returns EINVAL itself */
	check("malloc-info-options", r == EINVAL, "malloc_info(1) -> %d", r);
}

/* C23: glibc 2.36 has neither; where the allocator exports them, a block
 * freed with its size (or its alignment and size) is freed. */
static void sized_frees(void)
{
	void (*fs)(void *, size_t) = (void (*)(void *, size_t))dlsym(RTLD_DEFAULT, "free_sized");
	void (*fas)(void *, size_t, size_t) =
		(void (*)(void *, size_t, size_t))dlsym(RTLD_DEFAULT, "free_aligned_sized");
	if (!fs || !fas) {
		/* libtally_alloc exports both: their absence there is a failure;
		 * glibc before 2.43 has neither, and then no contract to check */
		if (dlsym(RTLD_DEFAULT, "tally_alloc_stats"))
			check("free-sized-exported", 0, "free_sized %p, free_aligned_sized %p",
			      (void *)fs, (void *)fas);
		else
			printf("# free_sized, free_aligned_sized: not in this libc\n");
		return;
	}
	static const size_t sizes[] = { 0, 1, 24, 1000, 40000, 1 << 20 };
	for (unsigned i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		fs(malloc(sizes[i]), sizes[i]);
		fs(calloc(1, sizes[i]), sizes[i]);
		fas(aligned_alloc(64, sizes[i]), 64, sizes[i]);
		fas(aligned_alloc(8192, sizes[i]), 8192, sizes[i]);
	}
	fs(NULL, 0);
	fas(NULL, 64, 0);
	check("free-sized", 1, "%s", "");
}

int main(void)
{
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("# allocator: %s\n",
	       dlsym(RTLD_DEFAULT, "tally_alloc_stats") ? "libtally_alloc" : "glibc");
	usable_kept("realloc-keeps-usable-plus1", 0);
	usable_kept("realloc-keeps-usable-double", 1);
	realloc_shrink();
	realloc_edges();
	calloc_checks();
	aligned_forms();
	info_checks();
	sized_frees();
	printf("%d passed, %d failed\n", passed, failed);
	return failed != 0;
}
