/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Code addresses of a traced process to functions, files and lines: the
 * process's executable mappings (read from /proc/PID/maps while it runs,
 * kept after it is gone), and per file its ELF symbols (.symtab, else
 * .dynsym), DWARF line information when it has some (elfutils' libdw, which
 * also finds separate debug files through .gnu_debuglink and build IDs), C++
 * names demangled, and its GNU build ID. A file without symbols, one that is
 * gone or unreadable, an address in no mapping: the lookup still answers,
 * with what it knows (never a crash).
 */
#ifndef TALLY_SYMBOLS_H
#define TALLY_SYMBOLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One file-backed executable mapping (or [vdso]). */
struct sym_map {
	uint64_t start, end, offset;
	uint64_t dev, ino;
	char *path;   /* without the kernel's " (deleted)" */
	bool deleted; /* the file was deleted or replaced since it was mapped: what is at
		       * path now (if anything) is not what the process runs, and is
		       * not read */
	/* the object's load bias, when the process said it (TALLY_EV_MODULE):
	 * file address = process address - bias, whatever its segments */
	uint64_t bias;
	bool has_bias;
};

/* A process's executable mappings, sorted by start. */
struct sym_maps {
	struct sym_map *v;
	size_t n;
};

/* Read /proc/PID/maps: 0, or -errno (-ESRCH: no such process). Replaces
 * what m held (initialized: zeroed, or from an earlier call); left as it was
 * on error. */
int sym_maps_read(int pid, struct sym_maps *m);
/* The mapping holding addr, or NULL. */
const struct sym_map *sym_maps_find(const struct sym_maps *m, uint64_t addr);
/* Replaces what dst held, as sym_maps_read. */
int sym_maps_copy(struct sym_maps *dst, const struct sym_maps *src);
void sym_maps_free(struct sym_maps *m); /* NULL-safe; leaves m empty */

#define SYM_INLINE_MAX 8

/* One source line; strings are the symbolizer's, valid until it is freed. */
struct sym_line {
	const char *function; /* demangled; NULL: not known */
	const char *file;     /* NULL: not known */
	int line;	      /* 0: not known */
};

/* What an address is: innermost (inlined) line first. */
struct sym_loc {
	struct sym_line lines[SYM_INLINE_MAX];
	unsigned nlines; /* 0: nothing known beyond the mapping */
};

/* Files opened once and kept open (their symbols, DWARF and lookups cached)
 * until symbolizer_free. Not thread-safe. */
struct symbolizer;

struct symbolizer *symbolizer_new(void);
void symbolizer_free(struct symbolizer *s); /* NULL-safe */
/* pc in a process whose mappings are m; `call`: pc is a return address, so
 * the line looked up is that of the call before it (pc - 1). 0, or -ENOENT
 * when pc is in no mapping of m (out->nlines 0). */
int symbolizer_lookup(struct symbolizer *s, const struct sym_maps *m, uint64_t pc, bool call,
		      struct sym_loc *out);
/* The GNU build ID of a file as lower-case hex, or NULL; cached. */
const char *symbolizer_build_id(struct symbolizer *s, const char *path);
/* Whether the file has a symbol table, and line information. */
void symbolizer_file_info(struct symbolizer *s, const char *path, bool *functions, bool *lines);

#endif /* TALLY_SYMBOLS_H */
