// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A child must not inherit its parent's probes. Linked into each guest
 * library (allocator, SDK, CUPTI), each with its own sites and semaphores.
 *
 * Kernel 6.18 optimizes a uprobe on a 5-byte nop once it has been hit twice:
 * it maps a one-page "[uprobes-trampoline]" into the process and rewrites the
 * site as a call into it (create_uprobe_trampoline, arch/x86/kernel/
 * uprobes.c). That page is installed VM_DONTCOPY, so fork leaves it out of
 * the child, while the rewritten text (an anonymous copy of the file's page,
 * made by the uprobe write) is copied like any private page: a child that
 * passes the site calls into an unmapped page and dies of SIGSEGV. Children
 * forked before the first hits get the nop or an int3, which the kernel
 * handles, which is why it took a flush to show. The child also inherits the
 * semaphore counts that the kernel raised for its parent's tracer, not for
 * it, so it does pass the sites (the allocator's exit hand-over, at least).
 *
 * So a child starts as a process nobody traces: its semaphores 0, every site
 * its 5-byte nop again, and what the library holds for a tracer (pending
 * records, which its parent hands over itself) dropped. glibc's fork does it
 * in an atfork child handler, before the child runs anything else. A child
 * of a raw fork or clone system call runs no handler: it is caught at its
 * first probe, because the guard word lives in a MADV_WIPEONFORK page, which
 * reads 0 in any child however made. vfork and posix_spawn children share the
 * parent's memory, trampoline included, and need nothing. A tracer that
 * follows a child attaches to it anew, and the kernel raises its semaphores.
 */
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>

#include "probes.h"

#define GUARD_PAGE 4096UL
#define X86_INT3 0xcc /* what a uprobe writes over a site's first byte */
#define X86_CALL 0xe8 /* call rel32: an optimized uprobe's site */

/* The library's sites and semaphores, collected by the linker (none in the
 * builds without probe sites). */
#if defined(TALLY_NO_PROBES) || defined(TALLY_ALLOC_TEST_SINK)
static const uintptr_t *const __start_tally_probe_sites = NULL, *const __stop_tally_probe_sites =
									NULL;
static unsigned short *const *const __start_tally_probe_sems = NULL,
				    *const *const __stop_tally_probe_sems = NULL;
#else
extern const uintptr_t __start_tally_probe_sites[] __attribute__((visibility("hidden")));
extern const uintptr_t __stop_tally_probe_sites[] __attribute__((visibility("hidden")));
extern unsigned short *const __start_tally_probe_sems[] __attribute__((visibility("hidden")));
extern unsigned short *const __stop_tally_probe_sems[] __attribute__((visibility("hidden")));
#endif

/* The guard word: in a MADV_WIPEONFORK page, or, where the kernel refuses
 * one, in this static (then only glibc's fork is caught). NULL before init. */
int *tally_probe_guard;
static int guard_static = PROBE_GUARD_LIVE;
static void (*guard_on_child)(void);
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/*
 * Put one site back to its 5-byte nop, if the kernel rewrote it: an int3 over
 * the first byte (a uprobe installed) or a call (an optimized one). Anything
 * else was not written by the kernel's uprobes and is left alone. No thread
 * of this process can be at the site meanwhile: it runs before the guard
 * says LIVE, and every path to a site asks the guard first.
 */
static void site_restore(uint8_t *site)
{
	static const uint8_t nop5[] = TALLY_PROBE_NOP5;
	const size_t n = sizeof(nop5);
	bool int3 = site[0] == X86_INT3 && !memcmp(site + 1, nop5 + 1, n - 1);

	if (!memcmp(site, nop5, n) || (!int3 && site[0] != X86_CALL))
		return;
	uintptr_t lo = (uintptr_t)site & ~(GUARD_PAGE - 1);
	size_t len = (((uintptr_t)site + n + GUARD_PAGE - 1) & ~(GUARD_PAGE - 1)) - lo;
	/* where text may not be made writable the semaphores, already 0, keep
	 * this process away from the site all the same */
	if (mprotect((void *)lo, len, PROT_READ | PROT_WRITE | PROT_EXEC))
		return;
	memcpy(site, nop5, n);
	mprotect((void *)lo, len, PROT_READ | PROT_EXEC);
}

/* Make this process one that nobody traces (the header comment says why). */
static void guard_untrace(void)
{
	for (unsigned short *const *s = __start_tally_probe_sems; s < __stop_tally_probe_sems; s++)
		if (__atomic_load_n(*s, __ATOMIC_RELAXED))
			__atomic_store_n(*s, 0, __ATOMIC_RELAXED);
	for (const uintptr_t *p = __start_tally_probe_sites; p < __stop_tally_probe_sites; p++)
		site_restore((uint8_t *)*p);
	if (guard_on_child)
		guard_on_child();
}

static void guard_atfork_child(void)
{
	int *g = tally_probe_guard;

	guard_untrace();
	if (g)
		__atomic_store_n(g, PROBE_GUARD_LIVE, __ATOMIC_RELEASE);
}

static void guard_setup(void)
{
	int *g = mmap(NULL, GUARD_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (g != MAP_FAILED && madvise(g, GUARD_PAGE, MADV_WIPEONFORK)) {
		munmap(g, GUARD_PAGE);
		g = MAP_FAILED;
	}
	if (g == MAP_FAILED)
		g = &guard_static;
	*g = PROBE_GUARD_LIVE;
	pthread_atfork(NULL, NULL, guard_atfork_child);
	__atomic_store_n(&tally_probe_guard, g, __ATOMIC_RELEASE);
}

void probe_guard_init(void (*on_child)(void))
{
	guard_on_child = on_child;
	pthread_once(&guard_once, guard_setup);
}

/*
 * A probe about to fire found the guard not LIVE: before the library's
 * constructor (set it up now), or in a child that no atfork handler has seen
 * (untrace it, once; the probe does not fire: nobody traces this process).
 */
bool probe_guard_slow(void)
{
	int *g = tally_probe_guard;
	int expect = PROBE_GUARD_CHILD;

	if (!g) {
		pthread_once(&guard_once, guard_setup);
		return true;
	}
	if (__atomic_compare_exchange_n(g, &expect, PROBE_GUARD_FIXING, false, __ATOMIC_ACQ_REL,
					__ATOMIC_ACQUIRE)) {
		guard_untrace();
		__atomic_store_n(g, PROBE_GUARD_LIVE, __ATOMIC_RELEASE);
	}
	return false;
}
