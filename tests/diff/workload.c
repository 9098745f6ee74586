// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tally diff's workload (tests/diff/run.sh): run twice with different
 * sizes, it holds a known amount more in one group the second time, and
 * writes its own truth.
 *
 *   diff_workload GROW_KIB CHILD_KIB TRUTH
 *
 * A forked child (the same comm: the tree's second "diff_workload") keeps
 * CHILD_KIB in group "grow" and exits; then the process keeps 2 MiB in
 * group "steady" (keep_steady) and GROW_KIB in group "grow" (keep_grow),
 * in 256 KiB blocks from functions of their own, churns a little in the
 * root group, and exits holding them. TRUTH gets, as JSON, the bytes each
 * group holds at the exit, the child's and the block size. Blocks of
 * 256 KiB: under --rate 1 a sample of S bytes weighs 1 / (1 - exp(-S)),
 * exactly 1 in a double, so that each site's figure is exact too.
 * Nothing else allocates while a group is current.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"

#define BLOCK (256u << 10)
#define STEADY_BYTES (2u << 20)

static void *blocks[4096];
static unsigned nblocks;

/* inlined into each caller, so that the blocks' innermost frame is
 * keep_steady or keep_grow (a call to it would be a tail call, and the
 * caller's frame gone) */
static inline __attribute__((always_inline)) unsigned long long keep(size_t bytes)
{
	unsigned long long held = 0;

	for (; held < bytes && nblocks < sizeof(blocks) / sizeof(blocks[0]); held += BLOCK) {
		blocks[nblocks] = malloc(BLOCK);
		if (!blocks[nblocks])
			abort();
		memset(blocks[nblocks++], 7, BLOCK);
	}
	return held;
}

__attribute__((noinline)) static unsigned long long keep_steady(void)
{
	return keep(STEADY_BYTES);
}

__attribute__((noinline)) static unsigned long long keep_grow(size_t bytes)
{
	return keep(bytes);
}

static void churn(void)
{
	for (int i = 0; i < 1000; i++)
		free(malloc(64 + i));
}

/* its own frame: its site is not the parent's (a site of one stack in two
 * processes would be summed) */
__attribute__((noinline)) static int child(struct tally_group grow, size_t bytes)
{
	struct tally_group_guard g = tally_group_enter(grow);

	keep_grow(bytes);
	tally_group_exit(g);
	exit(0); /* not _exit: the allocator hands its last records over at exit */
}

int main(int argc, char **argv)
{
	struct tally_group steady, grow;
	struct tally_group_guard g;
	unsigned long long grow_kib, child_kib, held_steady, held_grow;
	pid_t pid;
	int status;
	FILE *f;

	if (argc != 4 || (grow_kib = strtoull(argv[1], NULL, 10)) % 256 ||
	    (child_kib = strtoull(argv[2], NULL, 10)) % 256 || grow_kib + child_kib > 512 << 10) {
		fprintf(stderr,
			"usage: diff_workload GROW_KIB CHILD_KIB TRUTH (multiples of 256)\n");
		return 2;
	}
	steady = tally_group_register("steady");
	grow = tally_group_register("grow");
	pid = fork();
	if (pid < 0)
		return 1;
	if (!pid)
		return child(grow, child_kib << 10);
	if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status))
		return 1;
	f = fopen(argv[3], "w");
	if (!f)
		return 1;
	g = tally_group_enter(steady);
	held_steady = keep_steady();
	tally_group_exit(g);
	g = tally_group_enter(grow);
	held_grow = keep_grow(grow_kib << 10);
	tally_group_exit(g);
	churn();
	fprintf(f, "{\"steady\": %llu, \"grow\": %llu, \"child_grow\": %llu, \"block\": %u}\n",
		held_steady, held_grow, child_kib << 10, BLOCK);
	return fclose(f) ? 1 : 0;
}
