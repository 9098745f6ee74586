/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the allocator benchmarks (alloc_bench.c, alloc_shapes.c): a clock, a cheap
 * RNG, resident-memory readers and the check of which object provides malloc. None of them
 * calls malloc, so the measurement never disturbs the allocator it measures.
 *
 * Everything is static inline: each benchmark is one translation unit and uses a subset.
 */
#ifndef BENCH_UTIL_H
#define BENCH_UTIL_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define NSEC_PER_SEC 1000000000ull
#define MIB (1024.0 * 1024.0)

/* A benchmark that cannot do its work has no result to print: say why and stop. */
static inline _Noreturn void die(const char *what)
{
	fprintf(stderr, "%s: %s: %s\n", program_invocation_short_name, what, strerror(errno));
	exit(1);
}

static inline _Noreturn void oom(void)
{
	errno = ENOMEM;
	die("malloc");
}

/* malloc(size) with its first and last byte written, so that its memory is really used,
 * not just reserved. */
static inline char *block_new(size_t size)
{
	char *p = malloc(size);

	if (!p)
		oom();
	p[0] = (char)size;
	p[size - 1] = (char)size;
	return p;
}

/* Keeps the compiler from deleting a malloc/free pair whose memory is never read. */
static inline void escape(void *p)
{
	__asm__ volatile("" : : "g"(p) : "memory");
}

static inline uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

/* xorshift64: a few cycles per number, so the RNG does not dilute the allocator's cost. */
static inline uint64_t rng_next(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* Uniform in [lo, hi]; multiply-shift instead of a division in the hot loops. */
static inline uint32_t rng_range(uint64_t *s, uint32_t lo, uint32_t hi)
{
	uint64_t r = rng_next(s) >> 32;

	return lo + (uint32_t)((r * ((uint64_t)hi - lo + 1)) >> 32);
}

/*
 * Resident bytes of the whole process. Read with open/read rather than stdio so that the
 * measurement itself never calls the allocator it measures.
 */
static inline uint64_t rss_bytes(void)
{
	char buf[128];
	unsigned long long size, resident;
	ssize_t len;
	int fd;

	fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		die("open /proc/self/statm");
	len = read(fd, buf, sizeof(buf) - 1);
	close(fd);
	if (len <= 0)
		die("read /proc/self/statm");
	buf[len] = '\0';
	if (sscanf(buf, "%llu %llu", &size, &resident) != 2) {
		errno = EINVAL;
		die("parse /proc/self/statm");
	}
	return resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

/* The process's high-water mark of resident bytes so far (the kernel's VmHWM). */
static inline uint64_t peak_rss_bytes(void)
{
	struct rusage ru;

	if (getrusage(RUSAGE_SELF, &ru))
		die("getrusage");
	return (uint64_t)ru.ru_maxrss * 1024; /* ru_maxrss is in KiB on Linux */
}

/*
 * The file that defines the malloc this process really calls. RTLD_NEXT from the executable
 * finds the first definition after it in lookup order: the preloaded library if one loaded,
 * otherwise libc. Plain &malloc would name the executable's PLT stub in a non-PIE build.
 */
static inline const char *malloc_from(void)
{
	const char *slash;
	Dl_info info;
	void *sym;

	sym = dlsym(RTLD_NEXT, "malloc");
	if (!sym || !dladdr(sym, &info) || !info.dli_fname)
		return "unknown";
	slash = strrchr(info.dli_fname, '/');
	return slash ? slash + 1 : info.dli_fname;
}

/* Scratch memory straight from the kernel, so bookkeeping never disturbs the allocator. */
static inline void *scratch_map(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (p == MAP_FAILED)
		die("mmap scratch");
	return p;
}

/* Spin briefly, then give the CPU away in case the peer shares it. */
static inline void backoff(unsigned int *spins)
{
	if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
		__builtin_ia32_pause();
#endif
		return;
	}
	*spins = 0;
	sched_yield();
}

/*
 * Puts the calling thread on the nth CPU it may run on. Left to itself the scheduler sometimes
 * stacks producer and consumer on one CPU, where they take turns a queue-full at a time with no
 * cross-CPU traffic at all, and such a run can be ten times faster than one side by side.
 */
static inline bool pin_to_nth_cpu(unsigned int nth)
{
	cpu_set_t allowed, one;
	unsigned int cpu, seen = 0;

	if (sched_getaffinity(0, sizeof(allowed), &allowed))
		return false;
	for (cpu = 0; cpu < CPU_SETSIZE; cpu++) {
		if (!CPU_ISSET(cpu, &allowed) || seen++ != nth)
			continue;
		CPU_ZERO(&one);
		CPU_SET(cpu, &one);
		return !sched_setaffinity(0, sizeof(one), &one);
	}
	return false;
}

#endif /* BENCH_UTIL_H */
