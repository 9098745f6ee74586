// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GOT entries of the malloc family, in every object the process has
 * loaded: pointed at the interposer's wrappers, and back at detach.
 *
 * A call from an object to malloc goes through its GOT: a JUMP_SLOT entry
 * (the PLT's) or a GLOB_DAT one (-fno-plt code, and the address taken).
 * Each entry is found from the object's dynamic section (its relocations,
 * symbols and strings) and written with one aligned 8-byte store, which a
 * thread calling through it at that moment sees whole, old or new. Entries
 * under RELRO (read-only once relocated) are made writable for the store
 * and read-only again. glibc's libc.so.6 is patched too: its own calls to
 * malloc (strdup, fopen's buffer) go through its PLT for the sake of
 * interposition, and a block it hands the program is then seen. An entry
 * the lazy resolver has not filled yet is patched all the same: the PLT
 * then jumps to the wrapper and the resolver is never asked.
 *
 * Runs under the caller's lock (interpose.c): at the injection, after a
 * dlopen, and at detach; no malloc (the table grows by mmap).
 */
#include <elf.h>
#include <errno.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "internal.h"

struct got_slot {
	uintptr_t *at;
	uintptr_t old;	  /* what it held before */
	uintptr_t wanted; /* the wrapper written */
	uint32_t obj;	  /* its object's index in objs */
	bool relro;
};

/* The objects done, by load address and dynamic section (a library
 * unloaded and another loaded at the same address has another). */
struct got_obj {
	uintptr_t base;
	const void *dyn;
};

static struct got_slot *slots;
static size_t nslots, slots_cap;
static struct got_obj *objs;
static size_t nobjs, objs_cap;

/* Grow an mmapped array of `size`-byte elements to hold one more. */
static int grow(void **v, size_t *cap, size_t used, size_t size)
{
	if (used < *cap)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 4096 / size;
	void *n = ip_map(ncap * size);

	if (!n)
		return -ENOMEM;
	if (*v) {
		memcpy(n, *v, used * size);
		munmap(*v, *cap * size);
	}
	*v = n;
	*cap = ncap;
	return 0;
}

static int set_entry(uintptr_t *at, uintptr_t v, bool relro)
{
	long page = sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)at & ~(uintptr_t)(page - 1);

	if (relro && mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE))
		return -errno;
	__atomic_store_n(at, v, __ATOMIC_RELEASE);
	if (relro)
		mprotect((void *)start, (size_t)page, PROT_READ);
	return 0;
}

/* ld.so adjusts the dynamic section's addresses by the load bias in place
 * on x86-64, but not for every object (the vDSO): an address below the
 * bias is still a file address. */
static uintptr_t dyn_addr(uintptr_t base, uintptr_t v)
{
	return v < base ? v + base : v;
}

/* What an object's dynamic section says of its relocations. */
struct dyn {
	const Elf64_Sym *symtab;
	const char *strtab;
	const Elf64_Rela *jmprel, *rela;
	size_t pltrelsz, relasz, relaent;
};

static void dyn_scan(struct dyn *out, const Elf64_Dyn *dyn, uintptr_t base)
{
	*out = (struct dyn){ .relaent = sizeof(Elf64_Rela) };
	for (const Elf64_Dyn *d = dyn; d->d_tag != DT_NULL; d++) {
		uintptr_t a = dyn_addr(base, d->d_un.d_ptr);
		switch (d->d_tag) {
		case DT_SYMTAB:
			out->symtab = (const Elf64_Sym *)a;
			break;
		case DT_STRTAB:
			out->strtab = (const char *)a;
			break;
		case DT_JMPREL:
			out->jmprel = (const Elf64_Rela *)a;
			break;
		case DT_PLTRELSZ:
			out->pltrelsz = d->d_un.d_val;
			break;
		case DT_RELA:
			out->rela = (const Elf64_Rela *)a;
			break;
		case DT_RELASZ:
			out->relasz = d->d_un.d_val;
			break;
		case DT_RELAENT:
			out->relaent = d->d_un.d_val;
			break;
		}
	}
}

struct walk {
	const struct ip_func *funcs;
	size_t n;
	uintptr_t self; /* this library's load address */
	int err;
};

static int patch_relocs(struct walk *w, const struct dl_phdr_info *info, const Elf64_Rela *rel,
			size_t count, const Elf64_Sym *symtab, const char *strtab,
			uintptr_t relro_lo, uintptr_t relro_hi)
{
	for (size_t i = 0; i < count; i++) {
		uint32_t type = ELF64_R_TYPE(rel[i].r_info);
		if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
			continue;
		const char *name = strtab + symtab[ELF64_R_SYM(rel[i].r_info)].st_name;
		for (size_t f = 0; f < w->n; f++) {
			if (strcmp(name, w->funcs[f].name))
				continue;
			uintptr_t *at = (uintptr_t *)(info->dlpi_addr + rel[i].r_offset);
			bool relro = (uintptr_t)at >= relro_lo && (uintptr_t)at < relro_hi;
			int err = grow((void **)&slots, &slots_cap, nslots, sizeof(*slots));
			if (err)
				return err;
			uintptr_t old = __atomic_load_n(at, __ATOMIC_ACQUIRE);
			err = set_entry(at, (uintptr_t)w->funcs[f].wrapper, relro);
			if (err)
				return err;
			slots[nslots++] =
				(struct got_slot){ at, old, (uintptr_t)w->funcs[f].wrapper,
						   (uint32_t)nobjs, relro };
			break;
		}
	}
	return 0;
}

static int patch_object(struct dl_phdr_info *info, size_t size, void *data)
{
	struct walk *w = data;
	const Elf64_Dyn *dyn = NULL;
	uintptr_t relro_lo = 0, relro_hi = 0, base = info->dlpi_addr;
	(void)size;

	if (base == w->self || !strncmp(info->dlpi_name, "linux-vdso", 10))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_DYNAMIC)
			dyn = (const Elf64_Dyn *)(base + ph->p_vaddr);
		if (ph->p_type == PT_GNU_RELRO) {
			relro_lo = base + ph->p_vaddr;
			relro_hi = relro_lo + ph->p_memsz;
		}
	}
	if (!dyn)
		return 0;
	for (size_t i = 0; i < nobjs; i++)
		if (objs[i].base == base && objs[i].dyn == dyn)
			return 0;

	struct dyn d;
	dyn_scan(&d, dyn, base);
	int err = grow((void **)&objs, &objs_cap, nobjs, sizeof(*objs));
	if (!err && d.symtab && d.strtab && d.relaent == sizeof(Elf64_Rela)) {
		if (d.jmprel)
			err = patch_relocs(w, info, d.jmprel, d.pltrelsz / d.relaent, d.symtab,
					   d.strtab, relro_lo, relro_hi);
		if (!err && d.rela)
			err = patch_relocs(w, info, d.rela, d.relasz / d.relaent, d.symtab,
					   d.strtab, relro_lo, relro_hi);
	}
	if (err) {
		w->err = err;
		return 1; /* stop the walk */
	}
	objs[nobjs++] = (struct got_obj){ base, dyn };
	return 0;
}

int ip_got_patch(const struct ip_func *funcs, size_t n)
{
	Dl_info self;
	struct walk w = { funcs, n, 0, 0 };

	if (!dladdr((void *)ip_got_patch, &self))
		return -ENOENT;
	w.self = (uintptr_t)self.dli_fbase;
	dl_iterate_phdr(patch_object, &w);
	return w.err ? w.err : (int)nslots;
}

/* The entries of one object still loaded (the walk holds the loader's
 * lock: none is unloaded meanwhile); those of objects unloaded since are
 * gone with them. */
static int restore_object(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	for (uint32_t o = 0; o < nobjs; o++) {
		if (objs[o].base != info->dlpi_addr)
			continue;
		bool same = false;
		for (int i = 0; i < info->dlpi_phnum; i++)
			same |= info->dlpi_phdr[i].p_type == PT_DYNAMIC &&
				(const void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr) ==
					objs[o].dyn;
		/* newest first: an entry patched twice ends with what it held
		 * first */
		for (size_t i = nslots; same && i-- > 0;) {
			struct got_slot *s = &slots[i];
			/* a lazy resolver that raced the patch may have written
			 * the real address since: leave that as it is */
			if (s->obj == o && __atomic_load_n(s->at, __ATOMIC_ACQUIRE) == s->wanted)
				set_entry(s->at, s->old, s->relro);
		}
	}
	return 0;
}

void ip_got_restore(void)
{
	dl_iterate_phdr(restore_object, NULL);
	nslots = 0;
	nobjs = 0;
}
