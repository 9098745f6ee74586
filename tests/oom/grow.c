// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tests/oom's workload: joins the memory cgroup CGDIR (writes its pid to
 * CGDIR/cgroup.procs), then allocates BLOCK bytes at a time with malloc,
 * touching every page, until the cgroup's OOM killer ends it. Its truth:
 * after each block, the bytes it holds, written to TRUTH with one pwrite of
 * a fixed width at offset 0 (the file's one page, already charged: writing
 * it again allocates nothing, so the write itself cannot be the charge that
 * kills, and a reader finds one whole number).
 *
 *   grow CGDIR BLOCK TRUTH
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int put_total(int fd, unsigned long long total)
{
	char line[32];
	int n = snprintf(line, sizeof(line), "%20llu\n", total);

	return pwrite(fd, line, (size_t)n, 0) == n ? 0 : -1;
}

int main(int argc, char **argv)
{
	char procs[4096], pid[32];
	unsigned long long total = 0;
	size_t block;
	int fd, cg;

	if (argc != 4) {
		fprintf(stderr, "usage: grow CGDIR BLOCK TRUTH\n");
		return 2;
	}
	block = strtoull(argv[2], NULL, 0);
	fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (!block || fd < 0 || put_total(fd, 0)) {
		fprintf(stderr, "grow: cannot write %s: %s\n", argv[3], strerror(errno));
		return 1;
	}
	snprintf(procs, sizeof(procs), "%s/cgroup.procs", argv[1]);
	snprintf(pid, sizeof(pid), "%d\n", (int)getpid());
	cg = open(procs, O_WRONLY | O_CLOEXEC);
	if (cg < 0 || write(cg, pid, strlen(pid)) < 0) {
		fprintf(stderr, "grow: cannot join %s: %s\n", argv[1], strerror(errno));
		return 1;
	}
	close(cg);
	long page = sysconf(_SC_PAGESIZE);
	for (;;) {
		char *p = malloc(block);
		if (!p) {
			fprintf(stderr, "grow: malloc failed at %llu bytes\n", total);
			return 1;
		}
		/* every page charged to the cgroup, the last byte too */
		for (size_t i = 0; i < block; i += (size_t)page)
			p[i] = (char)i;
		p[block - 1] = 1;
		total += block;
		if (put_total(fd, total))
			return 1;
	}
}
