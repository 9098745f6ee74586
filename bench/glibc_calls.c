// SPDX-License-Identifier: MIT
/*
 * glibc_calls: the cost of one call of each of glibc's malloc family, for
 * scripts/bench-glibc.sh, which runs it untraced and under `tally snapshot --`
 * (glibc mode: a uprobe, and a uretprobe where the result is read, per call)
 * and subtracts: what is left is what tally's probes cost per call.
 *
 * Each function is timed alone: blocks are made in batches of BATCH by the
 * function under test (timed), then freed (not timed); free is timed over
 * blocks that malloc made untimed. A batch bounds the memory valloc and
 * pvalloc take (a page each). One line per function on stdout,
 *
 *	NAME NS_PER_CALL
 *
 * Built with -fno-builtin, so that no call is folded away or turned into
 * another (malloc+memset into calloc), and -z now, so that no lazy binding
 * is timed.
 *
 * Usage: glibc_calls [N]   (calls per function, default 200000)
 */
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BATCH 1000
#define SIZE 64	 /* bytes asked of each call: tcache-sized, the common case */
#define ALIGN 64 /* memalign's and posix_memalign's: above 16, so no shortcut to malloc */

enum fn {
	FN_MALLOC,
	FN_FREE,
	FN_CALLOC,
	FN_REALLOC,
	FN_REALLOCARRAY,
	FN_MEMALIGN,
	FN_ALIGNED_ALLOC,
	FN_POSIX_MEMALIGN,
	FN_VALLOC,
	FN_PVALLOC,
	FN_USABLE_SIZE,
	FN_COUNT,
};

static const char *const fn_names[FN_COUNT] = {
	"malloc",	 "free",	   "calloc", "realloc", "reallocarray",	      "memalign",
	"aligned_alloc", "posix_memalign", "valloc", "pvalloc", "malloc_usable_size",
};

static void *blocks[BATCH];
/* a sink for malloc_usable_size's results, so the calls stay */
static volatile size_t usable_sink;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Before a timed batch: what the function under test needs to be there. */
static int batch_prepare(enum fn f)
{
	if (f != FN_FREE && f != FN_REALLOC && f != FN_REALLOCARRAY && f != FN_USABLE_SIZE)
		return 0;
	for (int i = 0; i < BATCH; i++) {
		blocks[i] = malloc(SIZE);
		if (!blocks[i])
			return -ENOMEM;
	}
	return 0;
}

static void *call_one(enum fn f, void *old)
{
	void *p = NULL;

	switch (f) {
	case FN_MALLOC:
		return malloc(SIZE);
	case FN_CALLOC:
		return calloc(1, SIZE);
	case FN_REALLOC:
		/* grown past its chunk: a real move, not a no-op */
		return realloc(old, 4 * SIZE);
	case FN_REALLOCARRAY:
		return reallocarray(old, 4, SIZE);
	case FN_MEMALIGN:
		return memalign(ALIGN, SIZE);
	case FN_ALIGNED_ALLOC:
		return aligned_alloc(ALIGN, SIZE);
	case FN_POSIX_MEMALIGN:
		return posix_memalign(&p, ALIGN, SIZE) ? NULL : p;
	case FN_VALLOC:
		return valloc(SIZE);
	case FN_PVALLOC:
		return pvalloc(SIZE);
	case FN_USABLE_SIZE:
		usable_sink = malloc_usable_size(old);
		return old;
	case FN_FREE:
	case FN_COUNT:
		break;
	}
	return NULL;
}

/* One timed batch of f; the blocks it leaves are freed untimed. */
static int batch_run(enum fn f, uint64_t *ns)
{
	uint64_t t0;
	int err;

	err = batch_prepare(f);
	if (err)
		return err;
	t0 = now_ns();
	for (int i = 0; i < BATCH; i++) {
		if (f == FN_FREE) {
			free(blocks[i]);
			continue;
		}
		blocks[i] = call_one(f, blocks[i]);
		if (!blocks[i])
			err = -ENOMEM;
	}
	*ns += now_ns() - t0;
	if (f != FN_FREE)
		for (int i = 0; i < BATCH; i++)
			free(blocks[i]);
	return err;
}

int main(int argc, char **argv)
{
	long n = argc > 1 ? strtol(argv[1], NULL, 10) : 200000;
	long batches = n > BATCH ? n / BATCH : 1;

	/* the heap keeps what a batch freed: without it, each valloc batch
	 * would grow the heap again, page faults and all, and the figure
	 * would be the kernel's, not the call's */
	mallopt(M_TRIM_THRESHOLD, 256 << 20);
	mallopt(M_TOP_PAD, 16 << 20);

	for (int f = 0; f < FN_COUNT; f++) {
		uint64_t ns = 0, warm = 0;

		/* one batch first, untimed: the heap grown to what f needs */
		for (long b = -1; b < batches; b++) {
			int err = batch_run((enum fn)f, b < 0 ? &warm : &ns);

			if (err) {
				fprintf(stderr, "glibc_calls: %s: %s\n", fn_names[f],
					strerror(-err));
				return 1;
			}
		}
		printf("%s %.1f\n", fn_names[f], (double)ns / (double)(batches * BATCH));
		fflush(stdout);
	}
	return 0;
}
