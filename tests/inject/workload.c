// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * --inject's workload (tests/inject/run.sh): a process on glibc's malloc
 * that counts for itself what it allocates after a signal, so that tally's
 * figures from an injection made before the signal can be compared.
 *
 *   1. allocates BEFORE blocks, prints "ready", waits for SIGUSR1 (the
 *      test sends it once libtally_interpose.so is in);
 *   2. then runs the malloc family at random (malloc, calloc, realloc,
 *      reallocarray, posix_memalign, aligned_alloc, strdup through glibc,
 *      and free), dlopens the library given as its argument (if any) and
 *      allocates through it, frees half the BEFORE blocks, and prints what
 *      is live of its own count: "live=B objects=N allocs=A before_freed=F
 *      big_mapped=M" (M: whether glibc still maps a 200 KB block on its own);
 *      With INJECT_UNSEEN set, it also frees a block through a pointer to
 *      glibc's free taken before the injection (which the interposer cannot
 *      see) and allocates a block of the same size again: "unseen=1" when
 *      glibc gave the same address back; with INJECT_FORKS set, it starts
 *      a child by fork() and one by the raw clone syscall (no atfork
 *      handler runs), each churning blocks of its own, and prints their
 *      exit statuses: "forks=S,S" (0,0: both unharmed);
 *   3. then waits: SIGUSR2 prints "got=libc" when its GOT entry for malloc
 *      is glibc's again (after the detach), "got=other" while it is not;
 *      SIGTERM frees everything and exits 0.
 *
 * Built as C, and as C++ (-DCXX: operator new and delete, which land in
 * libstdc++'s malloc and free).
 */
#include <dlfcn.h>
#include <malloc.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define BEFORE 1000
#define SLOTS 4096
#define OPS 200000

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint32_t rnd(uint32_t n)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return (uint32_t)(rng % n);
}

struct slot {
	char *p;
	size_t q;
	int how; /* 0: free(), 1: delete[] */
};
static struct slot slots[SLOTS];
static void *before[BEFORE];
static char *unseen_block;

static void drop(struct slot *s)
{
#ifdef CXX
	if (s->how == 1) {
		delete[] s->p;
		s->p = NULL;
		return;
	}
#endif
	free(s->p);
	s->p = NULL;
}

/* A new block of about q bytes in s; the bytes it holds (requested) or 0. */
static size_t fill(struct slot *s)
{
	size_t q = 1 + rnd(rnd(8) == 0 ? 200000 : 2000);
	void *p = NULL;

	s->how = 0;
	switch (rnd(7)) {
	case 0:
		p = calloc(1, q);
		break;
	case 1:
		if (posix_memalign(&p, 64, q))
			p = NULL;
		break;
	case 2:
		q = (q + 31) & ~(size_t)31;
		p = aligned_alloc(32, q);
		break;
	case 3: {
		char buf[64];
		q = 1 + rnd(sizeof(buf) - 1);
		memset(buf, 'x', q - 1);
		buf[q - 1] = 0;
		p = strdup(buf); /* glibc's own malloc call */
		break;
	}
#ifdef CXX
	case 4:
		p = new char[q];
		s->how = 1;
		break;
#endif
	default:
		p = malloc(q);
	}
	if (!p)
		exit(3);
	memset(p, 1, q);
	s->p = (char *)p;
	s->q = q;
	return q;
}

/* A child's work: 20000 blocks of 16..256 B through malloc and free in a
 * ring of 64 (each batch of the interposer's, 4096 records, filled several
 * times over), checked when freed, and a calloc and a realloc; 0 when all
 * was as written, else 5. */
static int child_churn(void)
{
	char *ring[64] = { 0 };

	for (int i = 0; i < 20000; i++) {
		char **s = &ring[i % 64];
		if (*s) {
			size_t q = (unsigned char)(*s)[0] + 16u;
			if ((unsigned char)(*s)[q - 1] != (unsigned char)q)
				return 5;
			free(*s);
		}
		size_t q = 16 + rnd(241);
		if (!(*s = (char *)malloc(q)))
			return 5;
		(*s)[0] = (char)(q - 16);
		(*s)[q - 1] = (char)q;
	}
	char *z = (char *)calloc(100, 10), *r = (char *)realloc(ring[0], 5000);
	if (!z || !r || z[999])
		return 5;
	ring[0] = r;
	free(z);
	for (int i = 0; i < 64; i++)
		free(ring[i]);
	return 0;
}

/* INJECT_FORKS: a child by glibc's fork (its atfork handlers run) and one
 * by the raw syscall (none does), one after the other; each one's status. */
static void forks(void)
{
	int st[2] = { -1, -1 };

	for (int i = 0; i < 2; i++) {
		pid_t c = i ? (pid_t)syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0) : fork();
		if (c == 0)
			_exit(child_churn());
		if (c < 0 || waitpid(c, &st[i], 0) != c)
			st[i] = -1;
	}
	printf("forks=%d,%d\n", st[0], st[1]);
}

static int got_is_libc(void)
{
	void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
	/* through the GOT: a PIE takes a function's address from there */
	void *(*volatile mine)(size_t) = malloc;
	return libc && (void *)mine == dlsym(libc, "malloc");
}

int main(int argc, char **argv)
{
	sigset_t set;
	int sig;
	size_t live = 0, objects = 0, allocs = 0, before_freed = 0;

	setvbuf(stdout, NULL, _IOLBF, 0);
	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	sigaddset(&set, SIGUSR2);
	sigaddset(&set, SIGTERM);
	sigprocmask(SIG_BLOCK, &set, NULL);
	for (int i = 0; i < BEFORE; i++)
		if (!(before[i] = malloc(100 + rnd(2000))))
			return 3;
	/* taken through the GOT now, before the injection: glibc's own */
	void (*volatile glibc_free)(void *) = getenv("INJECT_UNSEEN") ? free : NULL;
	printf("ready got=%s\n", got_is_libc() ? "libc" : "other");
	do
		sigwait(&set, &sig);
	while (sig != SIGUSR1 && sig != SIGTERM);
	if (sig == SIGTERM)
		return 0;
	/* glibc maps a block past its threshold (128 KiB, as nothing has freed
	 * a larger mapped one yet) on its own: the injection must not have
	 * moved the threshold */
	struct mallinfo2 m0 = mallinfo2();
	char *big = (char *)malloc(200000);
	int big_mapped = big && mallinfo2().hblkhd >= m0.hblkhd + 200000;
	free(big);
	allocs++;

	for (int op = 0; op < OPS; op++) {
		struct slot *s = &slots[rnd(SLOTS)];
		if (s->p && rnd(4) == 0 && s->how == 0) {
			size_t q = 1 + rnd(4000);
			char *np = (char *)(rnd(2) ? realloc(s->p, q) : reallocarray(s->p, q, 1));
			if (!np)
				return 3;
			live += q - s->q;
			allocs++;
			s->p = np;
			s->q = q;
			continue;
		}
		if (s->p) {
			live -= s->q;
			objects--;
			drop(s);
		} else {
			live += fill(s);
			objects++;
			allocs++;
		}
	}
	if (argc > 1) {
		/* a library loaded now: its GOT is patched as dlopen loads it */
		void *lib = dlopen(argv[1], RTLD_NOW);
		void *(*lib_alloc)(size_t) =
			lib ? (void *(*)(size_t))dlsym(lib, "inject_lib_alloc") : NULL;
		void (*lib_free)(void *) =
			lib ? (void (*)(void *))dlsym(lib, "inject_lib_free") : NULL;
		if (!lib_alloc || !lib_free)
			return 4;
		for (int i = 0; i < 100; i++) {
			struct slot *s = &slots[i];
			if (s->p) {
				live -= s->q;
				objects--;
				drop(s);
			}
			s->q = 1000 + (size_t)i;
			if (!(s->p = (char *)lib_alloc(s->q)))
				return 3;
			s->how = 0;
			live += s->q;
			objects++;
			allocs++;
		}
		/* and its free of a block of the program's */
		lib_free(slots[0].p);
		live -= slots[0].q;
		objects--;
		slots[0].p = NULL;
	}
	if (glibc_free) {
		/* freed where the interposer does not look, then given again */
		char *a = (char *)malloc(200), *b;
		glibc_free(a);
		if (!(b = (char *)malloc(200)))
			return 3;
		printf("unseen=%d\n", a == b);
		unseen_block = b;
		live += 200;
		objects++;
		allocs += 2;
	}
	if (getenv("INJECT_FORKS"))
		forks();
	for (int i = 0; i < BEFORE; i += 2) {
		free(before[i]);
		before[i] = NULL;
		before_freed++;
	}
	printf("live=%zu objects=%zu allocs=%zu before_freed=%zu big_mapped=%d\n", live, objects,
	       allocs, before_freed, big_mapped);
	for (;;) {
		sigwait(&set, &sig);
		if (sig == SIGUSR2)
			printf("got=%s\n", got_is_libc() ? "libc" : "other");
		if (sig == SIGTERM)
			break;
	}
	for (int i = 0; i < SLOTS; i++)
		if (slots[i].p)
			drop(&slots[i]);
	for (int i = 0; i < BEFORE; i++)
		free(before[i]);
	free(unseen_block);
	return 0;
}
