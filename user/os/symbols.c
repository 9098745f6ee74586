// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Code addresses of a traced process to function, file and line (symbols.h):
 * an address goes to its mapping, to an offset in the mapped file, to the
 * file's own address (through the PT_LOAD holding that offset), looked up in
 * one libdwfl session per file, reported at bias 0. Files, lookups and
 * demangled names are cached: a profile asks for the same addresses again.
 */
#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../alloc/common/hash.h"
#include "symbols.h"

/* libstdc++'s demangler (extern "C" in the C++ ABI); the binary links -lstdc++. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* A chained hash table of nodes that are the first member of their entries:
 * the files, the looked-up addresses and the demangled names. */
struct sym_node {
	struct sym_node *next; /* in the same bucket */
	uint64_t hash;
};

struct sym_table {
	struct sym_node **b;
	size_t cap; /* buckets, a power of two (0 before the first add) */
	size_t n;   /* nodes */
};

static struct sym_node *table_chain(const struct sym_table *t, uint64_t hash)
{
	return t->cap ? t->b[hash & (t->cap - 1)] : NULL;
}

static int table_add(struct sym_table *t, struct sym_node *node)
{
	if (t->n >= t->cap) {
		size_t ncap = t->cap ? t->cap * 2 : 64;
		struct sym_node **b = calloc(ncap, sizeof(*b));

		if (!b)
			return -ENOMEM;
		for (size_t i = 0; i < t->cap; i++) {
			struct sym_node *p = t->b[i], *next;

			for (; p; p = next) {
				next = p->next;
				p->next = b[p->hash & (ncap - 1)];
				b[p->hash & (ncap - 1)] = p;
			}
		}
		free(t->b);
		t->b = b;
		t->cap = ncap;
	}
	node->next = t->b[node->hash & (t->cap - 1)];
	t->b[node->hash & (t->cap - 1)] = node;
	t->n++;
	return 0;
}

static void table_free(struct sym_table *t, void (*node_free)(void *))
{
	for (size_t i = 0; i < t->cap; i++) {
		struct sym_node *p = t->b[i], *next;

		for (; p; p = next) {
			next = p->next;
			node_free(p);
		}
	}
	free(t->b);
	*t = (struct sym_table){ 0 };
}

/* A PT_LOAD program header: file offsets [offset, offset + size) are loaded at vaddr. */
struct sym_load {
	uint64_t offset, size, vaddr;
};

/* A function of the symbol table. One whose size is not known (assembly
 * without .size) holds what is up to the next one, in its section. */
struct sym_func {
	uint64_t start, end; /* end: of the section when the size is not known */
	const char *name;    /* libdw's, not demangled */
	int rank;	     /* lower: the name to show among aliases */
	bool sized;
};

/* One ELF file, opened once; a file that could not be opened is kept too
 * (dwfl NULL), so that it is not tried again for every address. */
struct sym_file {
	struct sym_node node; /* hash: of path */
	char *path;
	uint64_t dev, ino; /* of the mapping it was opened for; both 0: for the path alone */
	Dwfl *dwfl;	   /* NULL: not ELF, gone, unreadable */
	Dwfl_Module *mod;  /* its only module, reported at bias 0 */
	struct sym_load *loads;
	size_t nloads;
	char *build_id;		/* lower-case hex; NULL: none */
	struct sym_func *funcs; /* sorted by start, one per start; read at the first need */
	size_t nfuncs;
	bool funcs_read;
	int lines; /* has a line table: 1, 0; -1 before the first ask */
};

/* One address of one file, looked up. */
struct sym_entry {
	struct sym_node node; /* hash: of file and addr */
	const struct sym_file *file;
	uint64_t addr; /* the file's own address (its ELF headers') */
	unsigned n;
	struct sym_line lines[];
};

/* A C++ name demangled, keyed by the address of the mangled string, which
 * lives in libdw's mapping of the file as long as the symbolizer does. */
struct sym_name {
	struct sym_node node; /* hash: of raw's address */
	const char *raw;
	char *name; /* malloc'd by __cxa_demangle; NULL: not a C++ name */
};

struct symbolizer {
	struct sym_table files;	  /* struct sym_file */
	struct sym_table entries; /* struct sym_entry */
	struct sym_table names;	  /* struct sym_name */
};

/* NULL: libdw's default, /usr/lib/debug (its .build-id tree) and beside the file. */
static char *debuginfo_path;

/* Separate debug files by build ID, then .gnu_debuglink, on this machine
 * only (symbolizer_new turns libdwfl's debuginfod client off). */
static const Dwfl_Callbacks offline_callbacks = {
	.find_elf = dwfl_build_id_find_elf,
	.find_debuginfo = dwfl_standard_find_debuginfo,
	.section_address = dwfl_offline_section_address,
	.debuginfo_path = &debuginfo_path,
};

static int file_loads(struct sym_file *f)
{
	GElf_Addr bias;
	Elf *elf = dwfl_module_getelf(f->mod, &bias);
	size_t n;

	if (!elf || elf_getphdrnum(elf, &n))
		return -ENOEXEC;
	f->loads = calloc(n ? n : 1, sizeof(*f->loads));
	if (!f->loads)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;

		if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
			continue;
		f->loads[f->nloads++] =
			(struct sym_load){ ph.p_offset, ph.p_memsz, ph.p_vaddr + bias };
	}
	return 0;
}

static char *hex(const unsigned char *bits, int n)
{
	char *s = malloc((size_t)n * 2 + 1);

	for (int i = 0; s && i < n; i++)
		sprintf(s + 2 * i, "%02x", bits[i]);
	return s;
}

/* Opens f->path. A failure leaves f->dwfl NULL: the file gives no lines. */
static void file_open(struct sym_file *f)
{
	const unsigned char *bits;
	GElf_Addr vaddr;
	int n;

	f->dwfl = dwfl_begin(&offline_callbacks);
	if (!f->dwfl)
		return;
	dwfl_report_begin(f->dwfl);
	/* add_p_vaddr: the module's bias is base (0) whatever the first
	 * PT_LOAD's address, so libdwfl's addresses are the file's */
	f->mod = dwfl_report_elf(f->dwfl, f->path, f->path, -1, 0, true);
	if (dwfl_report_end(f->dwfl, NULL, NULL) || !f->mod || file_loads(f))
		goto fail;
	n = dwfl_module_build_id(f->mod, &bits, &vaddr);
	if (n > 0)
		f->build_id = hex(bits, n); /* NULL when out of memory: not known */
	return;
fail:
	dwfl_end(f->dwfl);
	f->dwfl = NULL;
	f->mod = NULL;
}

static void file_free(void *node)
{
	struct sym_file *f = node;

	dwfl_end(f->dwfl);
	free(f->loads);
	free(f->funcs);
	free(f->build_id);
	free(f->path);
	free(f);
}

/* The file at path: with dev and ino (from a mapping), the one opened for
 * that mapping's file (a file replaced at the same path is another); with
 * both 0, any opened for the path. Opened the first time. NULL: no memory. */
static struct sym_file *file_get(struct symbolizer *s, const char *path, uint64_t dev, uint64_t ino)
{
	uint64_t h = hash_fnv1a64_str(path);
	struct sym_file *f;

	for (struct sym_node *p = table_chain(&s->files, h); p; p = p->next) {
		f = (struct sym_file *)p;
		if (p->hash == h && !strcmp(f->path, path) &&
		    ((!dev && !ino) || (f->dev == dev && f->ino == ino)))
			return f;
	}
	f = malloc(sizeof(*f));
	if (!f)
		return NULL;
	*f = (struct sym_file){
		.node.hash = h, .dev = dev, .ino = ino, .path = strdup(path), .lines = -1
	};
	if (!f->path || table_add(&s->files, &f->node)) {
		free(f->path);
		free(f);
		return NULL;
	}
	file_open(f);
	return f;
}

/* The file's address of a file offset, through the PT_LOAD holding it. */
static bool file_vaddr(const struct sym_file *f, uint64_t off, uint64_t *vaddr)
{
	for (size_t i = 0; i < f->nloads; i++) {
		const struct sym_load *l = &f->loads[i];

		if (off >= l->offset && off - l->offset < l->size) {
			*vaddr = off - l->offset + l->vaddr;
			return true;
		}
	}
	return false;
}

static void name_free(void *node)
{
	struct sym_name *e = node;

	free(e->name);
	free(e);
}

/* raw demangled when it is a C++ name (demangled once), else raw itself. */
static const char *demangle(struct symbolizer *s, const char *raw)
{
	struct sym_name *e;
	uint64_t h;
	int status;

	if (!raw || strncmp(raw, "_Z", 2))
		return raw;
	h = hash_mix64((uintptr_t)raw); /* addresses differ in their low bits */
	for (struct sym_node *p = table_chain(&s->names, h); p; p = p->next) {
		e = (struct sym_name *)p;
		if (e->raw == raw)
			return e->name ? e->name : raw;
	}
	e = malloc(sizeof(*e));
	if (!e)
		return raw;
	*e = (struct sym_name){ .node.hash = h, .raw = raw };
	e->name = __cxa_demangle(raw, NULL, NULL, &status);
	if (table_add(&s->names, &e->node)) {
		name_free(&e->node);
		return raw;
	}
	return e->name ? e->name : raw;
}

/* Among aliases (malloc, __libc_malloc, __GI___libc_malloc), the global
 * name, then the one with fewer leading underscores. */
static int func_rank(const GElf_Sym *sym, const char *name)
{
	int bind = GELF_ST_BIND(sym->st_info);
	int rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;

	return rank * 64 + (int)strspn(name, "_");
}

static int func_cmp(const void *a, const void *b)
{
	const struct sym_func *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->rank - y->rank;
}

static bool func_read(Dwfl_Module *mod, int i, struct sym_func *fn)
{
	GElf_Addr addr, bias;
	GElf_Word shndx;
	GElf_Shdr shdr;
	GElf_Sym sym;
	Elf *elf;
	const char *name = dwfl_module_getsym_info(mod, i, &sym, &addr, &shndx, &elf, &bias);
	int type = GELF_ST_TYPE(sym.st_info);

	if (!name || !*name || sym.st_shndx == SHN_UNDEF ||
	    (type != STT_FUNC && type != STT_GNU_IFUNC))
		return false;
	*fn = (struct sym_func){ addr, addr + sym.st_size, name, func_rank(&sym, name), true };
	/* _init: not the PLT after it */
	if (!sym.st_size) {
		fn->sized = false;
		if (gelf_getshdr(elf_getscn(elf, shndx), &shdr))
			fn->end = shdr.sh_addr + shdr.sh_size + bias;
	}
	return true;
}

/* The functions of the symbol table libdwfl chose (.symtab, of the file or
 * its debug file, else .dynsym), sorted: dwfl_module_addrinfo scans every
 * symbol per lookup, 80 us for libc's .dynsym, milliseconds for the largest
 * libraries. Left empty when out of memory. */
static void file_funcs(struct sym_file *f)
{
	int n = dwfl_module_getsymtab(f->mod);
	size_t k = 0;

	f->funcs_read = true;
	f->funcs = n > 1 ? calloc((size_t)n, sizeof(*f->funcs)) : NULL;
	for (int i = 1; f->funcs && i < n; i++)
		f->nfuncs += func_read(f->mod, i, &f->funcs[f->nfuncs]);
	if (!f->nfuncs)
		return;
	qsort(f->funcs, f->nfuncs, sizeof(*f->funcs), func_cmp);
	for (size_t i = 1; i < f->nfuncs; i++)
		if (f->funcs[i].start != f->funcs[k].start)
			f->funcs[++k] = f->funcs[i];
	f->nfuncs = k + 1;
}

/* The symbol table's name for a, if a is in a function; a few functions
 * back from the nearest, for one that holds a smaller one. */
static const char *symbol_name(struct symbolizer *s, struct sym_file *f, uint64_t a)
{
	size_t lo = 0, hi;

	if (!f->funcs_read)
		file_funcs(f);
	hi = f->nfuncs;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (f->funcs[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t i = lo; i > 0 && lo - i < 4; i--) {
		const struct sym_func *fn = &f->funcs[i - 1];

		if (a < fn->end && (fn->sized || i == lo))
			return demangle(s, fn->name);
	}
	return NULL;
}

/* A function's DWARF name: a C++ linkage name demangled ("ns::fn(int)", with
 * the arguments that tell overloads apart), else its name. A C function's
 * linkage name is its asm label, glibc's "__GI___libc_malloc" for
 * __libc_malloc: not the name a reader knows it by. */
static const char *die_name(struct symbolizer *s, Dwarf_Die *die)
{
	Dwarf_Attribute attr;
	const char *name;

	name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &attr));
	if (!name)
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &attr));
	if (!name || strncmp(name, "_Z", 2))
		name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &attr)) ?: name;
	return demangle(s, name);
}

/* Where an inlined call was made, as the frame out of it sees it. */
static void call_site(Dwarf_Die *die, Dwarf_Files *files, struct sym_line *out)
{
	Dwarf_Attribute attr;
	Dwarf_Word v;

	if (files && !dwarf_formudata(dwarf_attr(die, DW_AT_call_file, &attr), &v))
		out->file = dwarf_filesrc(files, v, NULL, NULL);
	if (!dwarf_formudata(dwarf_attr(die, DW_AT_call_line, &attr), &v) && v <= INT32_MAX)
		out->line = (int)v;
}

/*
 * The frames at a from DWARF, innermost first: the functions inlined there,
 * each one's name and, for the frame out of it, the place of its call; then
 * the function they were inlined into. As eu-addr2line -i does: the scopes
 * holding a give the innermost DIE, and the scopes holding that DIE give the
 * concrete nesting (dwarf_getscopes alone follows an inlined function's
 * abstract origin, not its caller). lines[0]'s file and line are left to the
 * line table. Returns the number of frames, 0 without DWARF for a.
 */
static unsigned dwarf_frames(struct symbolizer *s, struct sym_file *f, uint64_t a,
			     struct sym_line *lines)
{
	Dwarf_Die *scopes = NULL, innermost, *cu;
	Dwarf_Files *files = NULL;
	unsigned k = 0;
	Dwarf_Addr bias;
	int n;

	cu = dwfl_module_addrdie(f->mod, a, &bias);
	if (!cu)
		return 0;
	n = dwarf_getscopes(cu, a - bias, &scopes);
	if (n <= 0)
		goto out;
	innermost = scopes[0];
	free(scopes);
	scopes = NULL;
	n = dwarf_getscopes_die(&innermost, &scopes);
	if (dwarf_getsrcfiles(cu, &files, NULL))
		files = NULL;
	for (int i = 0; i < n && k < SYM_INLINE_MAX; i++) {
		int tag = dwarf_tag(&scopes[i]);

		if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram &&
		    tag != DW_TAG_entry_point)
			continue;
		lines[k++].function = die_name(s, &scopes[i]);
		if (tag != DW_TAG_inlined_subroutine)
			break;
		if (k < SYM_INLINE_MAX)
			call_site(&scopes[i], files, &lines[k]);
	}
out:
	free(scopes);
	return k;
}

/* What a (an address of f) is, into lines; how many lines. */
static unsigned resolve(struct symbolizer *s, struct sym_file *f, uint64_t a,
			struct sym_line *lines)
{
	Dwfl_Line *l = dwfl_module_getsrc(f->mod, a);
	unsigned n = dwarf_frames(s, f, a, lines);

	if (l)
		lines[0].file = dwfl_lineinfo(l, NULL, &lines[0].line, NULL, NULL, NULL);
	if (!n)
		n = 1;
	/* no DWARF, or a function DWARF does not name: the symbol table's */
	if (!lines[n - 1].function)
		lines[n - 1].function = symbol_name(s, f, a);
	if (n == 1 && !lines[0].function && !lines[0].file)
		return 0;
	return n;
}

/* The lookup of a in f, cached. NULL: out of memory. */
static const struct sym_entry *entry_get(struct symbolizer *s, struct sym_file *f, uint64_t a)
{
	uint64_t h = hash_mix64((uintptr_t)f ^ hash_mix64(a));
	struct sym_line lines[SYM_INLINE_MAX] = { 0 };
	struct sym_entry *e;
	unsigned n;

	for (struct sym_node *p = table_chain(&s->entries, h); p; p = p->next) {
		e = (struct sym_entry *)p;
		if (e->file == f && e->addr == a)
			return e;
	}
	n = resolve(s, f, a, lines);
	e = malloc(sizeof(*e) + n * sizeof(e->lines[0]));
	if (!e)
		return NULL;
	*e = (struct sym_entry){ .node.hash = h, .file = f, .addr = a, .n = n };
	memcpy(e->lines, lines, n * sizeof(lines[0]));
	if (table_add(&s->entries, &e->node)) {
		free(e);
		return NULL;
	}
	return e;
}

struct symbolizer *symbolizer_new(void)
{
	/* no download while tracing, nor a 90 s wait a file on a dead server */
	unsetenv("DEBUGINFOD_URLS");
	return calloc(1, sizeof(struct symbolizer));
}

void symbolizer_free(struct symbolizer *s)
{
	if (!s)
		return;
	/* entries and names point into the files' libdw data: they go first */
	table_free(&s->entries, free);
	table_free(&s->names, name_free);
	table_free(&s->files, file_free);
	free(s);
}

int symbolizer_lookup(struct symbolizer *s, const struct sym_maps *m, uint64_t pc, bool call,
		      struct sym_loc *out)
{
	/* a return address follows its call: pc - 1 is in the call */
	uint64_t addr = call ? pc - 1 : pc, vaddr;
	const struct sym_map *map = sym_maps_find(m, addr);
	const struct sym_entry *e;
	struct sym_file *f;

	memset(out, 0, sizeof(*out));
	if (!map)
		return -ENOENT;
	/* the vDSO has no file; a deleted one's path names another file, or none */
	if (map->deleted || map->path[0] != '/')
		return 0;
	f = file_get(s, map->path, map->dev, map->ino);
	if (!f)
		return -ENOMEM;
	vaddr = addr - map->bias; /* what the process said, else its segments */
	if (!f->mod || (!map->has_bias && !file_vaddr(f, addr - map->start + map->offset, &vaddr)))
		return 0;
	e = entry_get(s, f, vaddr);
	if (!e)
		return -ENOMEM;
	out->nlines = e->n;
	memcpy(out->lines, e->lines, e->n * sizeof(e->lines[0]));
	return 0;
}

const char *symbolizer_build_id(struct symbolizer *s, const char *path)
{
	struct sym_file *f = file_get(s, path, 0, 0);

	return f ? f->build_id : NULL;
}

/* Whether a compilation unit of the file (or its debug file) has a line table. */
static bool module_has_lines(Dwfl_Module *mod)
{
	Dwarf_Die *cu = NULL;
	Dwarf_Addr bias;

	while ((cu = dwfl_module_nextcu(mod, cu, &bias)))
		if (dwarf_hasattr(cu, DW_AT_stmt_list))
			return true;
	return false;
}

void symbolizer_file_info(struct symbolizer *s, const char *path, bool *functions, bool *lines)
{
	struct sym_file *f = file_get(s, path, 0, 0);

	if (f && f->mod && !f->funcs_read)
		file_funcs(f);
	if (f && f->mod && f->lines < 0)
		f->lines = module_has_lines(f->mod);
	*functions = f && f->nfuncs;
	*lines = f && f->lines > 0;
}
