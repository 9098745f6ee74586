/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The hashes of tally's tables, written once: Fibonacci (multiplicative)
 * hashing, splitmix64's finalizer, FNV-1a.
 *
 * Here, in alloc/common/, because both sides use them: the guest libraries
 * (the allocator's address tables, the CUPTI library's) and the tracer
 * (user/: symbols, sites, top's rows, the views). Code in the traced process
 * may not include user/ (scripts/check-layout.sh), the tracer may include
 * this. So it is header-only (static inline: the allocator's hot paths keep
 * the multiply inline) and includes nothing of ours, only the C library's
 * fixed-width types.
 *
 * Each value is part of a contract: tables are sized and probed by them, and
 * some are seen (top's group keys). A change here changes them all; change
 * a constant only with every table that uses it.
 */
#ifndef TALLY_ALLOC_COMMON_HASH_H
#define TALLY_ALLOC_COMMON_HASH_H

#include <stddef.h>
#include <stdint.h>

/* 2^64 / the golden ratio, odd: Fibonacci hashing's multiplier. */
#define HASH_GOLDEN64 0x9e3779b97f4a7c15ULL
/* 2^32 / the golden ratio. */
#define HASH_GOLDEN32 0x9e3779b9u
/* Knuth's multiplier (TAOCP 6.4), the prime next to 2^32 / the golden ratio. */
#define HASH_KNUTH32 2654435761u

#define HASH_FNV64_BASIS 0xcbf29ce484222325ULL
#define HASH_FNV64_PRIME 0x100000001b3ULL
#define HASH_FNV32_BASIS 2166136261u
#define HASH_FNV32_PRIME 16777619u

/* Fibonacci hashing: every bit of x stirs the product's high bits, so a
 * table takes its index from the top (x * HASH_GOLDEN64 >> (64 - bits)). */
static inline uint64_t hash_fib64(uint64_t x)
{
	return x * HASH_GOLDEN64;
}

static inline uint32_t hash_fib32(uint32_t x)
{
	return x * HASH_GOLDEN32;
}

static inline uint32_t hash_knuth32(uint32_t x)
{
	return x * HASH_KNUTH32;
}

/* splitmix64's finalizer: every bit of x stirs every bit of the result, low
 * bits included (for keys that differ only in a few bits, addresses). */
static inline uint64_t hash_mix64(uint64_t x)
{
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

/* FNV-1a over len bytes. */
static inline uint64_t hash_fnv1a64(const void *p, size_t len)
{
	const unsigned char *s = p;
	uint64_t h = HASH_FNV64_BASIS;

	for (size_t i = 0; i < len; i++)
		h = (h ^ s[i]) * HASH_FNV64_PRIME;
	return h;
}

/* FNV-1a over a NUL-terminated string, 64 and 32 bits. */
static inline uint64_t hash_fnv1a64_str(const char *s)
{
	uint64_t h = HASH_FNV64_BASIS;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * HASH_FNV64_PRIME;
	return h;
}

static inline uint32_t hash_fnv1a32_str(const char *s)
{
	uint32_t h = HASH_FNV32_BASIS;

	for (; *s; s++)
		h = (h ^ (unsigned char)*s) * HASH_FNV32_PRIME;
	return h;
}

#endif
