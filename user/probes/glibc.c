// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The loader of bpf/glibc.bpf.c (glibc mode): open with the target's tgid,
 * share the main object's `threads` map, size the block map, load; attach a
 * uprobe (and, but for free, a uretprobe) to each public malloc entry of the
 * target's libc, once per address, and a program on the target's exec;
 * then arm the probes; read the figures from the object's mmapped .bss.
 *
 * Each entry's probes go where its first bytes in the file say a probe
 * costs one trap and sees what the entry had (glibc_site.h): on free's
 * `je` after its `test %rdi,%rdi`, on memalign's after a `cmpb`, past a CET
 * build's `endbr64`; on the entry itself when it is emulated already or
 * the decoder is unsure. A uretprobe goes on the same instruction: the
 * stack pointer there is the entry's, so the return address is at its top
 * as the kernel expects, and the two share one trap.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/libbpf.h>
#include <linux/types.h>

#include "glibc.h"
#include "glibc_site.h"
#include "links.h"
#include "uprobe_multi.h"
#include "../os/target.h"
#include "../../bpf/contract/tally_events.h"

#include "../../bpf/glibc.h" /* struct glibc_totals, before the skeleton that names it */
#include "glibc.skel.h"

_Static_assert(GLIBC_GROUPS == TALLY_MAX_GROUPS, "one group table size");

/* The probed entries. aligned_alloc and memalign take the same arguments;
 * glibc before 2.38 makes them one function, attached once. reallocarray
 * and aligned_alloc are newer than the others; valloc and pvalloc are
 * obsolete: all four are probed where the libc has them. */
enum glibc_prog {
	GLIBC_P_MALLOC,
	GLIBC_P_MEMALIGN,
	GLIBC_P_CALLOC,
	GLIBC_P_REALLOC,
	GLIBC_P_REALLOCARRAY,
	GLIBC_P_POSIX_MEMALIGN,
	GLIBC_P_FREE,
};

static const struct glibc_entry {
	const char *name;
	enum glibc_prog prog;
	bool required;
	bool ret; /* with a uretprobe */
} glibc_entries[] = {
	{ "free", GLIBC_P_FREE, true, false },
	{ "realloc", GLIBC_P_REALLOC, true, true },
	{ "malloc", GLIBC_P_MALLOC, true, true },
	{ "calloc", GLIBC_P_CALLOC, true, true },
	{ "posix_memalign", GLIBC_P_POSIX_MEMALIGN, true, true },
	{ "memalign", GLIBC_P_MEMALIGN, true, true },
	{ "aligned_alloc", GLIBC_P_MEMALIGN, false, true },
	{ "valloc", GLIBC_P_MALLOC, false, true },
	{ "pvalloc", GLIBC_P_MALLOC, false, true },
	{ "reallocarray", GLIBC_P_REALLOCARRAY, false, true },
};

#define GLIBC_NENTRIES (sizeof(glibc_entries) / sizeof(glibc_entries[0]))
#define GLIBC_MAX_LINKS (2 * GLIBC_NENTRIES + 1)

struct glibc_trace {
	struct glibc_bpf *skel;
	struct bpf_link *links[GLIBC_MAX_LINKS];
	unsigned nlinks;
	/* the probes on uprobe_multi links where the kernel has them: a
	 * perf-event uprobe's release waits ~70 ms for a grace period, one
	 * after another (1.25 s for glibc mode's 18, measured at the end of
	 * `tally snapshot --no-preload -- /bin/true`) */
	bool multi;
	int ufds[GLIBC_MAX_LINKS];
	unsigned nufds;
	int64_t site[GLIBC_NENTRIES]; /* bytes from each entry to its probe; -1: none */
};

struct glibc_trace *glibc_trace_open(pid_t tgid, int threads_fd, uint32_t max_blocks, int *err)
{
	struct glibc_trace *g;
	int e;

	g = calloc(1, sizeof(*g));
	if (!g) {
		*err = -ENOMEM;
		return NULL;
	}
	for (size_t k = 0; k < GLIBC_NENTRIES; k++)
		g->site[k] = -1;
	g->skel = glibc_bpf__open();
	if (!g->skel) {
		e = -errno;
		goto free_g;
	}
	g->skel->rodata->target_tgid = (__u32)tgid;
	e = bpf_map__set_max_entries(g->skel->maps.blocks,
				     max_blocks ? max_blocks : GLIBC_DEFAULT_BLOCKS);
	if (e)
		goto destroy_skel;
	if (threads_fd >= 0) {
		/* libbpf refuses a map of another type, key, value or size */
		e = bpf_map__reuse_fd(g->skel->maps.threads, threads_fd);
		if (e)
			goto destroy_skel;
	}
	/* (its sched_process_exec program stays as it is) */
	static const char *const uprobes[] = { "uprobe", "uretprobe", NULL };
	g->multi = uprobe_multi_supported();
	if (g->multi)
		e = uprobe_multi_prepare(g->skel->obj, uprobes);
	if (!e)
		e = glibc_bpf__load(g->skel);
	if (e)
		goto destroy_skel;
	return g;

destroy_skel:
	glibc_bpf__destroy(g->skel);
free_g:
	free(g);
	*err = e < 0 ? e : -EINVAL;
	return NULL;
}

/* Addresses of the entries' definitions in the ELF file at path (0: not
 * defined there, e.g. only imported); -ENOENT when a required one is not. */
static int glibc_find_entries(const char *path, uint64_t addr[GLIBC_NENTRIES])
{
	const char *names[GLIBC_NENTRIES];
	int err;

	for (size_t k = 0; k < GLIBC_NENTRIES; k++)
		names[k] = glibc_entries[k].name;
	err = target_elf_symbols(path, names, GLIBC_NENTRIES, addr);
	for (size_t k = 0; k < GLIBC_NENTRIES && !err; k++)
		if (glibc_entries[k].required && !addr[k])
			err = -ENOENT;
	return err;
}

/* Move each probe site (a file offset, 0: none) from the entry to where
 * glibc_site_offset() finds one in its first bytes. Where they cannot be
 * read, the entry stays: its probe costs more and sees the same. */
static int glibc_skip_to_sites(const char *path, uint64_t site[GLIBC_NENTRIES])
{
	uint8_t code[GLIBC_SITE_MAX_BYTES];
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return -errno;
	for (size_t k = 0; k < GLIBC_NENTRIES; k++) {
		ssize_t r = site[k] ? pread(fd, code, sizeof(code), (off_t)site[k]) : 0;

		if (r > 0)
			site[k] += glibc_site_offset(code, (size_t)r);
	}
	close(fd);
	return 0;
}

/* Where each entry's probes go, as offsets in the file at path (0: not
 * defined there): entry[] the entries' own, site[] the probes' (the
 * decoder is x86-64's; elsewhere they are the entries). */
static int glibc_find_sites(const char *path, const uint64_t addr[GLIBC_NENTRIES],
			    uint64_t entry[GLIBC_NENTRIES], uint64_t site[GLIBC_NENTRIES])
{
	int err;

	memcpy(entry, addr, GLIBC_NENTRIES * sizeof(entry[0]));
	err = target_elf_file_offsets(path, entry, GLIBC_NENTRIES);
	if (err)
		return err;
	memcpy(site, entry, GLIBC_NENTRIES * sizeof(site[0]));
#if defined(__x86_64__)
	err = glibc_skip_to_sites(path, site);
#endif
	return err;
}

static struct bpf_program *glibc_prog(struct glibc_bpf *skel, enum glibc_prog p)
{
	switch (p) {
	case GLIBC_P_MALLOC:
		return skel->progs.glibc_malloc;
	case GLIBC_P_MEMALIGN:
		return skel->progs.glibc_memalign;
	case GLIBC_P_CALLOC:
		return skel->progs.glibc_calloc;
	case GLIBC_P_REALLOC:
		return skel->progs.glibc_realloc;
	case GLIBC_P_REALLOCARRAY:
		return skel->progs.glibc_reallocarray;
	case GLIBC_P_POSIX_MEMALIGN:
		return skel->progs.glibc_posix_memalign;
	case GLIBC_P_FREE:
		return skel->progs.glibc_free;
	}
	return NULL;
}

static int glibc_keep_link(struct glibc_trace *g, struct bpf_link *link)
{
	return links_keep(g->links, &g->nlinks, GLIBC_MAX_LINKS, link);
}

/* A probe at file offset `off` of path (no symbol: the offset is the
 * site glibc_find_sites chose, not necessarily the entry). */
static int glibc_attach_one(struct glibc_trace *g, struct bpf_program *prog, pid_t pid,
			    const char *path, uint64_t off, bool retprobe)
{
	LIBBPF_OPTS(bpf_uprobe_opts, opts, .retprobe = retprobe);

	if (g->multi) {
		if (g->nufds == GLIBC_MAX_LINKS)
			return -E2BIG;
		int fd = uprobe_multi_link(bpf_program__fd(prog), path, &off, NULL, NULL, 1, pid,
					   retprobe);
		if (fd < 0)
			return fd;
		g->ufds[g->nufds++] = fd;
		return 0;
	}
	return glibc_keep_link(
		g, bpf_program__attach_uprobe_opts(prog, pid, path, (size_t)off, &opts));
}

/* Undo a partial attach: the links made since there were `first` (and
 * `ufirst` uprobe_multi links), side by side. */
static void glibc_detach_to(struct glibc_trace *g, unsigned first, unsigned ufirst)
{
	uprobe_multi_close(g->ufds + ufirst, g->nufds - ufirst);
	g->nufds = ufirst;
	links_drop_to(g->links, &g->nlinks, first);
}

int glibc_trace_attach(struct glibc_trace *g, pid_t pid, const char *libc_path)
{
	uint64_t addr[GLIBC_NENTRIES], entry[GLIBC_NENTRIES], site[GLIBC_NENTRIES];
	unsigned first = g->nlinks, ufirst = g->nufds;
	int err;

	if (g->nlinks || g->nufds)
		return -EALREADY;
	err = glibc_find_entries(libc_path, addr);
	if (!err)
		err = glibc_find_sites(libc_path, addr, entry, site);
	if (err)
		goto detach;

	/* an exec of the target empties the figures (see exec_epoch in
	 * bpf/glibc.bpf.c): a started command is attached before its exec */
	err = glibc_keep_link(g, bpf_program__attach(g->skel->progs.glibc_exec));
	if (err)
		goto detach;

	/* free first and the allocating entries last, in the table's order,
	 * though nothing is recorded before `armed` anyway */
	for (size_t k = 0; k < GLIBC_NENTRIES; k++) {
		const struct glibc_entry *e = &glibc_entries[k];
		struct bpf_program *prog = glibc_prog(g->skel, e->prog);
		bool alias = false;

		if (!addr[k])
			continue;
		/* two probes on one address both fire: one call seen twice */
		for (size_t j = 0; j < k; j++)
			alias |= addr[j] == addr[k];
		if (alias)
			continue;
		err = glibc_attach_one(g, prog, pid, libc_path, site[k], false);
		if (!err && e->ret)
			err = glibc_attach_one(g, g->skel->progs.glibc_return, pid, libc_path,
					       site[k], true);
		if (err)
			goto detach;
		g->site[k] = (int64_t)(site[k] - entry[k]);
	}
	/* from here every entry and return of the family is seen */
	__atomic_store_n(&g->skel->bss->armed, 1, __ATOMIC_RELEASE);
	return 0;

detach:
	/* a partial attach would see allocations without their frees: none
	 * of the probes stays */
	glibc_detach_to(g, first, ufirst);
	for (size_t k = 0; k < GLIBC_NENTRIES; k++)
		g->site[k] = -1;
	return err;
}

int glibc_trace_site(const struct glibc_trace *g, const char *name, uint64_t *offset)
{
	for (size_t k = 0; k < GLIBC_NENTRIES; k++) {
		if (strcmp(glibc_entries[k].name, name) || g->site[k] < 0)
			continue;
		*offset = (uint64_t)g->site[k];
		return 0;
	}
	return -ENOENT;
}

int glibc_trace_read(struct glibc_trace *g, struct glibc_figures *out)
{
	/* the .bss is mmapped: the probes' atomic adds land here; each field
	 * is read once, aligned, so a concurrent add is seen whole or not */
	const struct glibc_totals *t = &g->skel->bss->totals;

	memset(out, 0, sizeof(*out));
	out->live = __atomic_load_n(&t->live, __ATOMIC_RELAXED);
	out->rounding = __atomic_load_n(&t->rounding, __ATOMIC_RELAXED);
	out->large_count = __atomic_load_n(&t->large_count, __ATOMIC_RELAXED);
	out->calls = __atomic_load_n(&t->calls, __ATOMIC_RELAXED);
	out->nested = __atomic_load_n(&t->nested, __ATOMIC_RELAXED);
	out->untracked = __atomic_load_n(&t->untracked, __ATOMIC_RELAXED);
	out->unknown_frees = __atomic_load_n(&t->unknown_frees, __ATOMIC_RELAXED);
	out->lost = __atomic_load_n(&t->lost, __ATOMIC_RELAXED);
	for (unsigned i = 0; i < GLIBC_GROUPS; i++) {
		out->alloc_bytes[i] = __atomic_load_n(&t->alloc_bytes[i], __ATOMIC_RELAXED);
		out->alloc_objs[i] = __atomic_load_n(&t->alloc_objs[i], __ATOMIC_RELAXED);
		out->dealloc_bytes[i] = __atomic_load_n(&t->dealloc_bytes[i], __ATOMIC_RELAXED);
		out->dealloc_objs[i] = __atomic_load_n(&t->dealloc_objs[i], __ATOMIC_RELAXED);
	}
	return 0;
}

void glibc_trace_close(struct glibc_trace *g)
{
	if (!g)
		return;
	glibc_detach_to(g, 0, 0);
	glibc_bpf__destroy(g->skel);
	free(g);
}
