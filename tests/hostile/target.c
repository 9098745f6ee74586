// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target that corrupts its own allocator state the way a hostile process
 * could, then waits for `tally snapshot -p` to read it (issue 12, item 2).
 * Run with libtally_alloc.so preloaded:
 *   target MODE TALLY_HEAPS_VADDR READY_FILE
 * MODE: cycle_heaps (the heap list points to itself), cycle_segs (a segment
 * list points to itself), foreign_seg (a segment names another heap),
 * bad_count (a heap's batch count beyond the batch). TALLY_HEAPS_VADDR:
 * the address of `tally_heaps` in the library (nm), as the tracer finds it.
 * The offsets inside the structures come from this build's alloc/internal.h.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../../alloc/internal.h"

static uintptr_t lib_base(void)
{
	char line[512];
	unsigned long s, off;
	uintptr_t base = 0;
	FILE *f = fopen("/proc/self/maps", "r");

	while (f && fgets(line, sizeof(line), f))
		if (strstr(line, "libtally_alloc") &&
		    sscanf(line, "%lx-%*x %*s %lx", &s, &off) == 2 && off == 0) {
			base = s;
			break;
		}
	if (f)
		fclose(f);
	return base;
}

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: target MODE TALLY_HEAPS_VADDR READY_FILE\n");
		return 2;
	}
	char *keep = malloc(100);
	memset(keep, 1, 100);
	uintptr_t base = lib_base();
	if (!base) {
		fprintf(stderr, "target: libtally_alloc not mapped (preload it)\n");
		return 2;
	}
	struct heap *h = *(struct heap **)(base + strtoul(argv[2], NULL, 0));
	const char *mode = argv[1];
	if (!strcmp(mode, "cycle_heaps")) {
		h->all_next = h;
	} else if (!strcmp(mode, "cycle_segs")) {
		h->segs->next = h->segs;
	} else if (!strcmp(mode, "foreign_seg")) {
		h->segs->heap = (struct heap *)((uintptr_t)h + OS_PAGE);
	} else if (!strcmp(mode, "bad_count")) {
		h->batch.count = 1u << 30;
	} else {
		fprintf(stderr, "target: unknown mode %s\n", mode);
		return 2;
	}
	/* no allocator call from here on: the state stays as corrupted */
	char buf[32];
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	int n = snprintf(buf, sizeof(buf), "%d\n", getpid());
	if (fd < 0 || write(fd, buf, (size_t)n) != n)
		_exit(2);
	close(fd);
	sleep(120);
	_exit(0);
}
