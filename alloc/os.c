// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The OS layer: every mapping, discard and clock read of the allocator. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/*
 * Every mapping is marked MADV_NOHUGEPAGE: a transparent huge page would make
 * a one-byte touch resident 2 MiB and defeat page-granular reclaim, so the
 * identity's idea of resident would be wrong. It is also marked MADV_RANDOM,
 * which for anonymous memory only turns off swap-in readahead: the pair of
 * flags ("nh" and "rr" in smaps VmFlags) is how the allocator's mappings are
 * told apart in /proc/PID/smaps (thread stacks carry "nh" alone since Linux
 * 6.7; this kernel has no anonymous mapping names).
 */
void *os_map(size_t len)
{
	return os_map_flags(len, 0);
}

void *os_map_flags(size_t len, int flags)
{
	void *p =
		mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | flags, -1, 0);
	if (p == MAP_FAILED)
		return NULL;
	madvise(p, len, MADV_NOHUGEPAGE);
	madvise(p, len, MADV_RANDOM);
	return p;
}

/* p maps len + align bytes (page multiples): keep the len bytes from its first
 * align-aligned address, give back the rest. */
static void *trim_to_aligned(char *p, size_t len, size_t align)
{
	uintptr_t a = ((uintptr_t)p + align - 1) & ~(align - 1);
	size_t head = a - (uintptr_t)p, tail = align - head;
	if (head)
		munmap(p, head);
	if (tail)
		munmap((char *)a + len, tail);
	return (void *)a;
}

/* Address space only: no access, no memory, no commit charge, until os_commit. */
void *os_reserve(size_t len, size_t align)
{
	if (len + align < len)
		return NULL;
	char *p = mmap(NULL, len + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
		       -1, 0);
	return p == MAP_FAILED ? NULL : trim_to_aligned(p, len, align);
}

/* Part of a reservation made usable, with the flags every mapping carries. */
int os_commit(void *p, size_t len)
{
	if (mprotect(p, len, PROT_READ | PROT_WRITE))
		return -errno;
	madvise(p, len, MADV_NOHUGEPAGE);
	madvise(p, len, MADV_RANDOM);
	return 0;
}

/* len and align are multiples of the page size; trims the excess of an over-sized mapping. */
void *os_map_aligned(size_t len, size_t align)
{
	if (align <= OS_PAGE)
		return os_map(len);
	if (len + align < len)
		return NULL;
	char *p = os_map(len + align);
	return p ? trim_to_aligned(p, len, align) : NULL;
}

int os_unmap(void *p, size_t len)
{
	return munmap(p, len) ? -errno : 0;
}

/*
 * The pages of [src, src + len) moved to dst, replacing what was mapped there,
 * by mremap: page tables move, no page is copied or faulted. A range of
 * several mappings moves whole since Linux 6.17; before, that fails with
 * EFAULT. On failure dst is mapped afresh (mremap may have unmapped it
 * first, or moved part of the range), and what is left of src is the
 * caller's to unmap: -errno, or -EIO when dst could not be mapped again.
 */
int os_move(void *dst, void *src, size_t len)
{
	if (mremap(src, len, len, MREMAP_MAYMOVE | MREMAP_FIXED, dst) != MAP_FAILED)
		return 0;
	int err = -errno;
	void *p = mmap(dst, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED,
		       -1, 0);
	if (p == MAP_FAILED)
		return -EIO;
	madvise(p, len, MADV_NOHUGEPAGE);
	madvise(p, len, MADV_RANDOM);
	return err;
}

#ifndef SYS_process_madvise
#define SYS_process_madvise 440
#endif
#define PIDFD_SELF_PROCESS (-10001) /* PIDFD_SELF_THREAD_GROUP: no descriptor (Linux 6.14) */

/*
 * Several discards in one system call: process_madvise on the calling process
 * takes any advice since Linux 6.13, and since 6.16 flushes the TLB once for
 * the whole vector; one madvise per range costs about 100 us on these VMs,
 * which made a sweep of a few hundred MiB take seconds. Where the kernel
 * refuses it (older, or a seccomp filter), one madvise per range, as before;
 * the answer is kept. Advising a range twice is harmless, so a short count
 * redoes the whole vector. errno is the caller's again on return.
 */
void os_discard_many(const struct iovec *iov, unsigned n)
{
	static _Atomic int vec_ok = 1;
	int saved = errno;

	if (!n)
		return;
	if (n > 1 && atomic_load_explicit(&vec_ok, memory_order_relaxed)) {
		size_t total = 0;
		for (unsigned i = 0; i < n; i++)
			total += iov[i].iov_len;
		long r = syscall(SYS_process_madvise, PIDFD_SELF_PROCESS, iov, (size_t)n,
				 MADV_DONTNEED, 0U);
		if (r == (long)total)
			goto out;
		if (r < 0 && errno != EINTR && errno != EAGAIN && errno != ENOMEM)
			atomic_store_explicit(&vec_ok, 0, memory_order_relaxed);
	}
	for (unsigned i = 0; i < n; i++)
		madvise(iov[i].iov_base, iov[i].iov_len, MADV_DONTNEED);
out:
	errno = saved;
}

/* Make pages resident, so that what the identity counts as resident is. */
void os_touch(void *p, size_t len)
{
	for (size_t o = 0; o < len; o += OS_PAGE)
		((volatile char *)p)[o] = ((volatile char *)p)[o];
}

uint64_t os_now_ms(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint32_t os_gettid(void)
{
	return (uint32_t)syscall(SYS_gettid);
}

/*
 * A pointer the allocator never gave out, or a double free: continuing would
 * corrupt the heap, so stop here with the reason (without allocating).
 */
#define FATAL_LINE_MAX 160

void tally_fatal(const char *what, const void *ptr)
{
	char buf[FATAL_LINE_MAX];
	int n = snprintf(buf, sizeof(buf), "tally_alloc: %s (pointer %p); aborting\n", what, ptr);
	if (n > 0)
		(void)!write(2, buf, (size_t)n < sizeof(buf) ? (size_t)n : sizeof(buf) - 1);
	abort();
}

/* Resident bytes of [p, p + len) (page-aligned), by mincore(2): the figure
 * /proc/PID/smaps would give as Rss for these anonymous private pages. */
#define RESIDENT_CHUNK_PAGES 256 /* pages asked about per mincore call */

uint64_t os_resident(const void *p, size_t len)
{
	unsigned char vec[RESIDENT_CHUNK_PAGES];
	uint64_t bytes = 0;
	const char *a = p;

	while (len) {
		size_t chunk = len < sizeof(vec) * OS_PAGE ? len : sizeof(vec) * OS_PAGE;
		if (mincore((void *)a, chunk, vec))
			return bytes;
		for (size_t i = 0; i < chunk / OS_PAGE; i++)
			bytes += (vec[i] & 1) * OS_PAGE;
		a += chunk;
		len -= chunk;
	}
	return bytes;
}
