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
 * So a child starts with its semaphores 0 and the pages of its sites mapped
 * afresh from the library's file: the kernel puts in the probes that are
 * registered on the file then, and raises their semaphores, as for any
 * process that maps it (a tracer following the tree registers them for
 * every process and keeps the tree's; one that traces the parent alone
 * filters the child out and nothing is put in). The records its copy of the
 * heaps holds stay: they are numbered, and a tracer that follows the child
 * counts them once in each (docs/DESIGN.md §9). Where the file cannot be mapped
 * again (gone, replaced) every site goes back to its 5-byte nop: a child
 * nobody traces. glibc's fork does this in an atfork child handler, before
 * the child runs anything else. A child of a raw fork or clone system call
 * runs no handler: it is caught at its first probe, because the guard word
 * lives in a MADV_WIPEONFORK page, which reads 0 in any child however made.
 * vfork and posix_spawn children share the parent's memory, trampoline
 * included, and need nothing.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

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
static void (*guard_on_child)(bool traced);
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;

/* The library's file and its loaded segments, for re-arming a child
 * (guard_setup reads them, while the loader's lock may be taken). */
#define GUARD_MAX_LOADS 6
static struct {
	char path[PATH_MAX];
	dev_t dev;
	ino_t ino;
	uintptr_t bias;
	unsigned nloads;
	struct {
		uintptr_t vaddr, memsz, offset;
	} loads[GUARD_MAX_LOADS];
} lib;

static int find_loads(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	if (info->dlpi_addr != lib.bias)
		return 0;
	for (unsigned i = 0; i < info->dlpi_phnum && lib.nloads < GUARD_MAX_LOADS; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		lib.loads[lib.nloads].vaddr = ph->p_vaddr;
		lib.loads[lib.nloads].memsz = ph->p_memsz;
		lib.loads[lib.nloads].offset = ph->p_offset;
		lib.nloads++;
	}
	return 1;
}

static void lib_setup(void)
{
	Dl_info dl;
	struct stat st;

	if (!dladdr((void *)lib_setup, &dl) || !dl.dli_fname || dl.dli_fname[0] != '/' ||
	    strlen(dl.dli_fname) >= sizeof(lib.path) || stat(dl.dli_fname, &st))
		return;
	strcpy(lib.path, dl.dli_fname);
	lib.dev = st.st_dev;
	lib.ino = st.st_ino;
	lib.bias = (uintptr_t)dl.dli_fbase;
	dl_iterate_phdr(find_loads, NULL);
}

/* Where the page at addr lies in the library's file, or -1. */
static off_t page_offset(uintptr_t page)
{
	for (unsigned i = 0; i < lib.nloads; i++) {
		uintptr_t lo = lib.bias + lib.loads[i].vaddr;
		if (page + GUARD_PAGE <= (lo & ~(GUARD_PAGE - 1)) ||
		    page >= lo + lib.loads[i].memsz)
			continue;
		if (page < lo &&
		    (lo & (GUARD_PAGE - 1)) != (lib.loads[i].offset & (GUARD_PAGE - 1)))
			return -1;
		return (off_t)(lib.loads[i].offset - (lo - page));
	}
	return -1;
}

/*
 * Map the page of a site afresh from the library's file, as it was loaded:
 * its text is the file's, with the probes that are registered now put in by
 * the kernel itself (uprobe_mmap), their semaphores raised with them, so a
 * child is traced by whoever traces the file, from here on, and by nobody
 * once they detach. The kernel orders this against a tracer that attaches or
 * detaches meanwhile, which writing an int3 by hand would not be.
 */
static bool page_remap(int fd, uintptr_t page)
{
	off_t off = page_offset(page);

	if (off < 0)
		return false;
	void *p = mmap((void *)page, GUARD_PAGE, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_FIXED, fd,
		       off);
	return p == (void *)page;
}

/* Put one site back to its 5-byte nop, if the kernel rewrote it: an int3 over
 * the first byte (a uprobe installed) or a call (an optimized one). Anything
 * else was not written by the kernel's uprobes and is left alone. */
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

static bool site_touched(const uint8_t *site)
{
	static const uint8_t nop5[] = TALLY_PROBE_NOP5;

	return memcmp(site, nop5, sizeof(nop5)) != 0;
}

/* Every page with a site the kernel touched, mapped afresh; false when one
 * could not be (the file is gone or replaced): then the sites go back to
 * their nops and the child is one that nobody traces. */
static bool sites_rearm(void)
{
	const uintptr_t *p;
	struct stat st;
	bool ok = true;
	int fd = -1;

	for (p = __start_tally_probe_sites; p < __stop_tally_probe_sites; p++)
		if (site_touched((const uint8_t *)*p))
			break;
	if (p == __stop_tally_probe_sites)
		return true; /* nobody has touched them: nothing to undo */
	if (!lib.path[0])
		return false;
	fd = open(lib.path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	if (fstat(fd, &st) || st.st_dev != lib.dev || st.st_ino != lib.ino)
		ok = false;
	for (p = __start_tally_probe_sites; ok && p < __stop_tally_probe_sites; p++) {
		uintptr_t site = *p, page = site & ~(GUARD_PAGE - 1);
		/* a site across two pages: both */
		uintptr_t last = (site + 4) & ~(GUARD_PAGE - 1);
		if (!site_touched((const uint8_t *)site))
			continue;
		ok = page_remap(fd, page) && (last == page || page_remap(fd, last));
	}
	close(fd);
	return ok;
}

/*
 * A child: its semaphores 0 (the kernel raised its parent's, not its own),
 * its sites as the file has them, and the kernel's probes put back by the
 * kernel where a tracer follows it (the header comment says why). Where the
 * pages cannot be mapped afresh, the child is made one nobody traces.
 */
static bool guard_child(void)
{
	for (unsigned short *const *s = __start_tally_probe_sems; s < __stop_tally_probe_sems; s++)
		if (__atomic_load_n(*s, __ATOMIC_RELAXED))
			__atomic_store_n(*s, 0, __ATOMIC_RELAXED);
	bool traced = sites_rearm();
	if (!traced) {
		for (unsigned short *const *s = __start_tally_probe_sems;
		     s < __stop_tally_probe_sems; s++)
			__atomic_store_n(*s, 0, __ATOMIC_RELAXED);
		for (const uintptr_t *p = __start_tally_probe_sites; p < __stop_tally_probe_sites;
		     p++)
			site_restore((uint8_t *)*p);
	}
	if (guard_on_child)
		guard_on_child(traced);
	return traced;
}

static void guard_atfork_child(void)
{
	int *g = tally_probe_guard;

	(void)guard_child();
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
	lib_setup();
	pthread_atfork(NULL, NULL, guard_atfork_child);
	__atomic_store_n(&tally_probe_guard, g, __ATOMIC_RELEASE);
}

bool probe_guard_wipes(void)
{
	int *g = __atomic_load_n(&tally_probe_guard, __ATOMIC_ACQUIRE);
	return g && g != &guard_static;
}

void probe_guard_init(void (*on_child)(bool traced))
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
		/* a child traced from here on fires this probe too */
		bool traced = guard_child();
		__atomic_store_n(g, PROBE_GUARD_LIVE, __ATOMIC_RELEASE);
		return traced;
	}
	return false;
}
