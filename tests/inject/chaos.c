// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The chaos test's target (tests/inject/chaos.sh): a process on glibc's
 * malloc that checks its own integrity while tallies inject it and die
 * (kill -9) at random points of the injection.
 *
 * Three threads churn the malloc family, each block filled with a pattern of
 * its own address and serial and checked before its free; the main thread,
 * the one --inject hijacks, also holds values in general and vector
 * registers across a spin (an injection that put a register back wrong, or
 * left the upper half of a vector register clobbered, shows there), and
 * sleeps in nanosleep and poll (a system call the injection interrupts must
 * go on as the program asked: no early return, no error). Any breach
 * prints one line and exits 3; a signal the program does not expect
 * (SIGTRAP, SIGSEGV left by a tracer) kills it as it would any program.
 * Prints "ready", runs until SIGTERM, then prints "ok OPS" and exits 0.
 *
 * `inject_chaos --dlopen PATH`: the main thread first prints "loading" and
 * dlopens PATH, a FIFO, so that it waits inside the loader's own system
 * call (openat, then read) under the loader's lock for as long as the test
 * holds the FIFO; the dlopen must fail (no ELF comes), and the run goes on.
 */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define SLOTS 512
#define WORKERS 2

static atomic_int stop;
static atomic_ulong ops;

static void breach(const char *what, uint64_t a, uint64_t b)
{
	printf("BREACH %s: %#llx != %#llx\n", what, (unsigned long long)a, (unsigned long long)b);
	fflush(stdout);
	_exit(3);
}

static uint64_t next(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

struct block {
	uint64_t *p;
	size_t n; /* words */
	uint64_t serial;
};

static uint64_t word_of(const struct block *b, size_t i)
{
	return (b->serial * 0x9e3779b97f4a7c15ULL) ^ ((uintptr_t)b->p + i);
}

static void check_block(const struct block *b)
{
	for (size_t i = 0; i < b->n; i++)
		if (b->p[i] != word_of(b, i))
			breach("block contents", b->p[i], word_of(b, i));
}

/* One step of churn: a slot's block checked and freed, or a new one. */
static void churn(struct block *slots, uint64_t *rng, uint64_t *serial)
{
	struct block *b = &slots[next(rng) % SLOTS];

	if (b->p) {
		check_block(b);
		if (next(rng) % 4 == 0) { /* grown in place or moved: kept */
			size_t n = 1 + next(rng) % 300;
			uint64_t *np = realloc(b->p, n * 8);
			if (!np)
				breach("realloc", 0, n);
			for (size_t i = 0; i < b->n && i < n; i++)
				if (np[i] != word_of(b, i))
					breach("realloc kept", np[i], word_of(b, i));
			b->p = np;
			b->n = n;
		} else {
			free(b->p);
			b->p = NULL;
			return;
		}
	} else {
		b->n = 1 + next(rng) % (next(rng) % 16 ? 64 : 4096);
		b->p = next(rng) % 3 ? malloc(b->n * 8) : calloc(b->n, 8);
		if (!b->p)
			breach("malloc", 0, b->n);
	}
	b->serial = ++*serial;
	for (size_t i = 0; i < b->n; i++)
		b->p[i] = word_of(b, i);
	atomic_fetch_add_explicit(&ops, 1, memory_order_relaxed);
}

static void *worker(void *arg)
{
	struct block *slots = calloc(SLOTS, sizeof(*slots));
	uint64_t rng = 0x1234567ULL + (uintptr_t)arg, serial = 0;

	if (!slots)
		breach("calloc", 0, 0);
	while (!atomic_load_explicit(&stop, memory_order_relaxed))
		churn(slots, &rng, &serial);
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].p) {
			check_block(&slots[i]);
			free(slots[i].p);
		}
	free(slots);
	return NULL;
}

/* v in r12-r15 and in both halves of ymm8 and ymm15 across a spin; what
 * comes back out must be v. */
__attribute__((target("avx2"))) static void spin_check(uint64_t v, long spins)
{
	uint64_t r12, r15, lo, hi;

	__asm__ volatile(
		"mov %[v], %%r12\n\t"
		"mov %[v], %%r15\n\t"
		"vmovq %[v], %%xmm8\n\t"
		"vpbroadcastq %%xmm8, %%ymm8\n\t"
		"vmovdqa %%ymm8, %%ymm15\n\t"
		"1: pause\n\t"
		"dec %[n]\n\t"
		"jnz 1b\n\t"
		"vpxor %%ymm8, %%ymm15, %%ymm15\n\t"
		"vextracti128 $1, %%ymm8, %%xmm9\n\t"
		"vmovq %%xmm9, %[hi]\n\t"
		"vptest %%ymm15, %%ymm15\n\t"
		"jz 2f\n\t"
		"xor %[hi], %[hi]\n\t"
		"2: vmovq %%xmm8, %[lo]\n\t"
		"mov %%r12, %[r12]\n\t"
		"mov %%r15, %[r15]\n\t"
		"vzeroupper\n\t"
		: [n] "+r"(spins), [lo] "=r"(lo), [hi] "=r"(hi), [r12] "=r"(r12), [r15] "=r"(r15)
		: [v] "r"(v)
		: "r12", "r15", "xmm8", "xmm9", "xmm15", "cc", "memory");
	if (r12 != v || r15 != v)
		breach("general registers", r12 != v ? r12 : r15, v);
	if (lo != v || hi != v)
		breach("vector registers", lo != v ? lo : hi, v);
}

/* 200 us asleep, whatever interrupts it: nanosleep must not return early
 * with an error, and the time must have passed. */
static void sleep_check(int how)
{
	struct timespec a, b, d = { 0, 200000 };
	struct pollfd none = { .fd = -1 };

	clock_gettime(CLOCK_MONOTONIC, &a);
	if (how) {
		if (poll(&none, 1, 1) < 0 && errno != EINTR)
			breach("poll", (uint64_t)errno, 0);
		d.tv_nsec = 1000000;
	} else if (nanosleep(&d, NULL)) {
		breach("nanosleep", (uint64_t)errno, 0);
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	int64_t ns = (b.tv_sec - a.tv_sec) * 1000000000LL + (b.tv_nsec - a.tv_nsec);
	if (!how && ns < d.tv_nsec)
		breach("nanosleep returned early (ns)", (uint64_t)ns, (uint64_t)d.tv_nsec);
}

int main(int argc, char **argv)
{
	pthread_t th[WORKERS];
	sigset_t set;
	struct block *slots = calloc(SLOTS, sizeof(*slots));
	uint64_t rng = 0xfeedULL, serial = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	if (!slots || !__builtin_cpu_supports("avx2"))
		breach("setup (avx2)", 0, 0);
	for (long i = 0; i < WORKERS; i++)
		if (pthread_create(&th[i], NULL, worker, (void *)i))
			breach("pthread_create", 0, 0);
	printf("ready\n");
	if (argc == 3 && !strcmp(argv[1], "--dlopen")) {
		printf("loading\n");
		if (dlopen(argv[2], RTLD_NOW))
			breach("dlopen of a FIFO", 1, 0);
		printf("loaded: none\n");
	}
	for (uint64_t round = 1;; round++) {
		for (int i = 0; i < 50; i++)
			churn(slots, &rng, &serial);
		spin_check(round * 0x0101010101010101ULL, 2000);
		if (round % 8 == 0)
			sleep_check((int)(round / 8) % 2);
		if (round % 64 == 0 && sigpending(&set) == 0 && sigismember(&set, SIGTERM))
			break;
	}
	atomic_store(&stop, 1);
	for (int i = 0; i < WORKERS; i++)
		pthread_join(th[i], NULL);
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].p) {
			check_block(&slots[i]);
			free(slots[i].p);
		}
	free(slots);
	printf("ok %lu\n", atomic_load(&ops));
	return 0;
}
