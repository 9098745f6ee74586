// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * scripts/bench-record-calls.sh's helper, preloaded after libtally_alloc.so:
 * raises the allocator's tally:batch semaphore as a tracer's uprobe does
 * (the kernel adds one to the u16), so that the allocator records every
 * operation with no tracer attached, and the instructions that recording
 * costs can be counted under valgrind, which runs no BPF. Its batches go to
 * the probe, a nop with nothing attached: the shared ring's copy of a
 * batch is not in the count.
 *
 * BENCH_SEMAPHORE_OFFSET: the semaphore's offset in the library (its symbol
 * is local: the script reads it with nm).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__attribute__((constructor)) static void raise_semaphore(void)
{
	const char *off = getenv("BENCH_SEMAPHORE_OFFSET");
	void *m = dlsym(RTLD_DEFAULT, "malloc");
	Dl_info info;
	char *end;

	if (!off || !*off || !m || !dladdr(m, &info) || !info.dli_fname ||
	    !strstr(info.dli_fname, "libtally_alloc")) {
		fprintf(stderr, "raise_semaphore: needs libtally_alloc.so preloaded first and "
				"BENCH_SEMAPHORE_OFFSET\n");
		exit(2);
	}
	unsigned long o = strtoul(off, &end, 0);
	if (*end) {
		fprintf(stderr, "raise_semaphore: bad BENCH_SEMAPHORE_OFFSET '%s'\n", off);
		exit(2);
	}
	__atomic_fetch_add((uint16_t *)((char *)info.dli_fbase + o), 1, __ATOMIC_RELAXED);
}
