// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * USDT sites (usdt.h). sys/sdt.h leaves one note per site in .note.stapsdt:
 * the site's address, the address of .stapsdt.base it was linked with (a
 * prelinked file has moved since: the difference moves the site too), its
 * semaphore's address, then "provider\0name\0args\0". Addresses become file
 * offsets through the loadable segments, and the arguments ("8@%rax
 * -4@-20(%rbp) 4@$5": size, signed when negative, then where) are read as
 * libbpf's usdt.c reads them, into the spec its BPF side takes.
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#if defined(__x86_64__)
#include <linux/ptrace.h> /* struct pt_regs as the BPF side sees a uprobe's */
#endif

#include "usdt.h"

#define NT_STAPSDT 3

#if defined(__x86_64__)
bool usdt_supported(void)
{
	return true;
}

/* A register's offset in struct pt_regs, by any of its names. */
static int reg_off(const char *reg)
{
	static const struct {
		const char *names[4];
		size_t off;
	} regs[] = {
#define REG(r64, r32, r16, r8, field) { { r64, r32, r16, r8 }, offsetof(struct pt_regs, field) }
		/* clang-format off */
		REG("rip", "eip", NULL, NULL, rip),
		REG("rax", "eax", "ax", "al", rax),
		REG("rbx", "ebx", "bx", "bl", rbx),
		REG("rcx", "ecx", "cx", "cl", rcx),
		REG("rdx", "edx", "dx", "dl", rdx),
		REG("rsi", "esi", "si", "sil", rsi),
		REG("rdi", "edi", "di", "dil", rdi),
		REG("rbp", "ebp", "bp", "bpl", rbp),
		REG("rsp", "esp", "sp", "spl", rsp),
		REG("r8", "r8d", "r8w", "r8b", r8),
		REG("r9", "r9d", "r9w", "r9b", r9),
		REG("r10", "r10d", "r10w", "r10b", r10),
		REG("r11", "r11d", "r11w", "r11b", r11),
		REG("r12", "r12d", "r12w", "r12b", r12),
		REG("r13", "r13d", "r13w", "r13b", r13),
		REG("r14", "r14d", "r14w", "r14b", r14),
		REG("r15", "r15d", "r15w", "r15b", r15),
	/* clang-format on */
#undef REG
	};

	for (size_t i = 0; i < sizeof(regs) / sizeof(regs[0]); i++)
		for (size_t j = 0; j < 4; j++)
			if (regs[i].names[j] && !strcmp(reg, regs[i].names[j]))
				return (int)regs[i].off;
	return -ENOENT;
}

/* One argument at s: the characters it took (its trailing blanks too), or
 * -EINVAL. */
static int parse_arg(const char *s, struct usdt_arg *a)
{
	char reg[16];
	long off;
	int sz, len = 0, r = -EINVAL;

	if (sscanf(s, " %d @ %ld ( %%%15[^)] ) %n", &sz, &off, reg, &len) == 3) {
		*a = (struct usdt_arg){ .type = USDT_ARG_REG_DEREF, .val_off = (uint64_t)off };
		r = reg_off(reg);
	} else if (sscanf(s, " %d @ ( %%%15[^)] ) %n", &sz, reg, &len) == 2) {
		*a = (struct usdt_arg){ .type = USDT_ARG_REG_DEREF };
		r = reg_off(reg);
	} else if (sscanf(s, " %d @ %%%15s %n", &sz, reg, &len) == 2) {
		*a = (struct usdt_arg){ .type = USDT_ARG_REG };
		r = reg_off(reg);
	} else if (sscanf(s, " %d @ $%ld %n", &sz, &off, &len) == 2) {
		*a = (struct usdt_arg){ .type = USDT_ARG_CONST, .val_off = (uint64_t)off };
		r = 0;
	}
	if (r < 0 || len <= 0)
		return -EINVAL;
	a->reg_off = (int16_t)r;
	a->is_signed = sz < 0;
	sz = abs(sz);
	if (sz != 1 && sz != 2 && sz != 4 && sz != 8)
		return -EINVAL;
	a->bitshift = (int8_t)(64 - 8 * sz);
	return len;
}

static int parse_args(const char *s, struct usdt_spec *spec)
{
	memset(spec, 0, sizeof(*spec));
	for (;;) {
		while (*s == ' ')
			s++;
		if (!*s)
			return 0;
		if (spec->nargs == USDT_MAX_ARGS)
			return -E2BIG;
		int n = parse_arg(s, &spec->args[spec->nargs]);
		if (n < 0)
			return n;
		spec->nargs++;
		s += n;
	}
}
#else
bool usdt_supported(void)
{
	return false;
}

static int parse_args(const char *s, struct usdt_spec *spec)
{
	(void)s;
	(void)spec;
	return -EOPNOTSUPP;
}
#endif

/* addr's file offset, in a loadable segment (an executable one: exec). */
static int file_off(Elf *elf, uint64_t addr, bool exec, uint64_t *off)
{
	size_t n;

	if (elf_getphdrnum(elf, &n))
		return -EINVAL;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD ||
		    (exec && !(ph.p_flags & PF_X)) || addr < ph.p_vaddr ||
		    addr >= ph.p_vaddr + ph.p_filesz)
			continue;
		*off = addr - ph.p_vaddr + ph.p_offset;
		return 0;
	}
	return -ENOEXEC;
}

/* The notes' section, and where .stapsdt.base is now (0: none). */
static Elf_Scn *notes_scn(Elf *elf, uint64_t *base)
{
	Elf_Scn *scn = NULL, *notes = NULL;
	size_t shstrndx;

	*base = 0;
	if (elf_getshdrstrndx(elf, &shstrndx))
		return NULL;
	while ((scn = elf_nextscn(elf, scn))) {
		GElf_Shdr sh;
		const char *nm;
		if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(elf, shstrndx, sh.sh_name)))
			continue;
		if (sh.sh_type == SHT_NOTE && !strcmp(nm, ".note.stapsdt"))
			notes = scn;
		else if (!strcmp(nm, ".stapsdt.base"))
			*base = sh.sh_addr;
	}
	return notes;
}

/* The next NUL-terminated string of a note's description, or NULL. */
static const char *next_str(const char **p, const char *end)
{
	const char *s = *p, *nul = s < end ? memchr(s, 0, (size_t)(end - s)) : NULL;

	if (nul)
		*p = nul + 1;
	return nul ? s : NULL;
}

/* A note's description: 1 and *site when it is a site of provider:name,
 * 0 when another probe's, or a negative errno. */
static int read_note(Elf *elf, const char *desc, size_t len, uint64_t base,
		     const char *const want[2], struct usdt_site *site)
{
	const char *p = desc + 3 * sizeof(uint64_t), *end = desc + len, *prov, *name, *args;
	uint64_t a[3]; /* the site, .stapsdt.base at link time, the semaphore */
	int err;

	if (len < sizeof(a))
		return -EINVAL;
	memcpy(a, desc, sizeof(a));
	prov = next_str(&p, end);
	name = prov ? next_str(&p, end) : NULL;
	args = name ? next_str(&p, end) : NULL;
	if (!args)
		return -EINVAL;
	if (strcmp(prov, want[0]) || strcmp(name, want[1]))
		return 0;
	if (base)
		a[0] += base - a[1];
	site->sema_off = 0;
	err = file_off(elf, a[0], true, &site->off);
	if (!err && a[2])
		err = file_off(elf, a[2], false, &site->sema_off);
	if (!err)
		err = parse_args(args, &site->spec);
	return err ? err : 1;
}

static int read_notes(Elf *elf, const char *const want[2], struct usdt_site *out, unsigned max)
{
	uint64_t base;
	Elf_Scn *scn = notes_scn(elf, &base);
	Elf_Data *d = scn ? elf_getdata(scn, NULL) : NULL;
	size_t off = 0, next, name_off, desc_off;
	GElf_Nhdr nh;
	int n = 0;

	if (gelf_getclass(elf) != ELFCLASS64)
		return -ENOEXEC;
	while (d && (next = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
		const char *buf = d->d_buf;
		off = next;
		if (nh.n_type != NT_STAPSDT || nh.n_namesz != sizeof("stapsdt") ||
		    memcmp(buf + name_off, "stapsdt", sizeof("stapsdt")))
			continue;
		if ((unsigned)n == max)
			return -E2BIG;
		int r = read_note(elf, buf + desc_off, nh.n_descsz, base, want, &out[n]);
		if (r < 0)
			return r;
		n += r;
	}
	return n;
}

int usdt_sites(const char *path, const char *provider, const char *name, struct usdt_site *out,
	       unsigned max)
{
	const char *const want[2] = { provider, name };
	Elf *elf;
	int fd, n;

	if (elf_version(EV_CURRENT) == EV_NONE)
		return -EINVAL;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	elf = elf_begin(fd, ELF_C_READ, NULL);
	n = elf ? read_notes(elf, want, out, max) : -ENOEXEC;
	elf_end(elf);
	close(fd);
	return n;
}
