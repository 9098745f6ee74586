// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Which malloc a running process allocates with (target_alloc.h), from the
 * objects it maps and the symbols its program defines. Redis as Debian
 * ships it maps libjemalloc.so.2: glibc's malloc is never called, and glibc
 * mode's probes showed it as "glibc" with 0 live bytes, with advice to use
 * --inject, which then refused it.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "target.h"
#include "target_alloc.h"

/* a malloc of its own library, by the file's name (whole names: "libtcmalloc"
 * is not "libtcmalloc_minimal") */
static const struct {
	const char *lib, *name;
} libs[] = {
	{ "libtally_alloc", "tally" },
	{ "libjemalloc", "jemalloc" },
	{ "libtcmalloc_minimal", "tcmalloc" },
	{ "libtcmalloc", "tcmalloc" },
	{ "libtcmalloc_and_profiler", "tcmalloc" },
	{ "libtcmalloc_debug", "tcmalloc" },
	{ "libtcmalloc_minimal_debug", "tcmalloc" },
	{ "libmimalloc", "mimalloc" },
	{ "libhoard", "hoard" },
	{ "libsnmalloc", "snmalloc" },
};

/* A malloc linked into the program: named by a function only it defines. */
static const char *program_malloc(const char *exe, bool has_libc)
{
	static const char *const syms[] = { "malloc", "mallctl", "je_mallctl", "mi_malloc",
					    "tc_malloc" };
	static const char *const names[] = { NULL, "jemalloc", "jemalloc", "mimalloc", "tcmalloc" };
	uint64_t addr[sizeof(syms) / sizeof(syms[0])] = { 0 };

	if (target_elf_symbols(exe, syms, sizeof(syms) / sizeof(syms[0]), addr))
		return has_libc ? NULL : "static";
	for (size_t k = 1; k < sizeof(syms) / sizeof(syms[0]); k++)
		if (addr[k])
			return names[k];
	if (!has_libc)
		return "static";
	/* a program that defines malloc takes every call of the process */
	return addr[0] ? "own" : NULL;
}

/* Whether the program asks for a dynamic loader (PT_INTERP): such a process
 * maps its C library in a moment, and one caught in between (its exec done,
 * ld.so not yet through) is no static program. */
static bool exe_dynamic(const char *exe)
{
	bool interp = false;
	size_t n = 0;
	GElf_Phdr ph;
	int fd;
	Elf *elf;

	if (elf_version(EV_CURRENT) == EV_NONE || (fd = open(exe, O_RDONLY | O_CLOEXEC)) < 0)
		return true; /* not known: not said static */
	elf = elf_begin(fd, ELF_C_READ, NULL);
	if (!elf || elf_getphdrnum(elf, &n))
		interp = true;
	for (size_t i = 0; !interp && i < n; i++)
		interp = gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_INTERP;
	elf_end(elf);
	close(fd);
	return interp;
}

int target_allocator(pid_t pid, const char **name, char *path, size_t len)
{
	char exe[64];
	uint64_t bias;
	int err;

	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		err = target_find_lib(pid, libs[i].lib, path, len, &bias);
		if (err >= 0) {
			*name = libs[i].name;
			return 0;
		}
		if (err != -ENOENT)
			return err;
	}
	snprintf(exe, sizeof(exe), "/proc/%d/exe", pid);
	bool has_libc = target_find_lib(pid, "libc.so.6", path, len, &bias) >= 0;
	if (!has_libc && target_find_lib(pid, "ld-musl-x86_64", path, len, &bias) >= 0) {
		*name = "musl";
		return 0;
	}
	/* a dynamic program whose libc is not mapped yet: just exec'd (seen
	 * as "static" when tally came a moment after the target started) */
	if (!has_libc && exe_dynamic(exe)) {
		*name = "glibc";
		return 0;
	}
	const char *own = program_malloc(exe, has_libc);
	if (own) {
		*name = own;
		snprintf(path, len, "%s", exe);
		return 0;
	}
	*name = "glibc";
	return 0;
}
