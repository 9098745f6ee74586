// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A program that keeps nothing: it frees every block it allocates, enough
 * of them that the allocator starts its purger thread, then asks the
 * allocator (tally_alloc_stats, found through dlsym) for its live bytes.
 * They must be 0: what tally's own code allocates inside the process (the
 * purger thread's DTV, which glibc's pthread_create callocs: 288 bytes here)
 * is overhead, never the program's. No stdio (its buffer would be live):
 * one line through write(2). Exit status 0 when live is 0, 1 when not, 2
 * when the allocator is not libtally_alloc or the purger never started.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int threads(void)
{
	int n = 0;
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return -1;
	for (struct dirent *e; (e = readdir(d));)
		n += e->d_name[0] != '.';
	closedir(d);
	return n;
}

int main(void)
{
	int (*stats)(uint64_t *) = (int (*)(uint64_t *))dlsym(RTLD_DEFAULT, "tally_alloc_stats");
	uint64_t st[32] = { 0 };
	char line[128];

	if (!stats)
		return 2;
	/* pooled large blocks kick the purger (16 kicks start it) */
	for (int i = 0; i < 64; i++)
		free(malloc(1 << 20));
	for (int i = 0; i < 200 && threads() < 2; i++)
		usleep(10000);
	int n = threads();
	if (stats(st))
		return 2;
	int len = snprintf(line, sizeof(line), "threads %d live %llu\n", n,
			   (unsigned long long)st[1]);
	if (write(1, line, (size_t)len) < 0)
		return 2;
	return n < 2 ? 2 : st[1] != 0;
}
