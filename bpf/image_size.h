/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The size of a CUDA module image: what bytes_pinned counts (docs/DESIGN.md §4),
 * defined once for the driver probes (bpf/cuda.bpf.c, which read the traced
 * process's memory) and the CUPTI library (cupti/image_size.c, which reads
 * its own). The driver's load calls take a bare pointer, so the size comes
 * from the image itself:
 *
 *   PTX      NUL-terminated text (its first byte printable or white space):
 *            the bytes before the NUL
 *   cubin    a 64-bit ELF: the furthest byte of the ELF header, the section
 *            header table, the program header table and every section's
 *            bytes in the file (SHT_NULL and SHT_NOBITS have none) and every
 *            segment's. nvcc writes the program headers last, after the
 *            section header table; a header table whose entries are smaller
 *            than the ELF structure is not read.
 *   fatbin   header_size + fat_size of its header (image_format.h)
 *   wrapper  a fatbin wrapper (either version): the size of the fatbin its
 *            data points to
 *   else     0 (an ELF that is not 64-bit, a wrapper of something else)
 *
 * 0 too when the image is corrupt: an offset, a size or the result of
 * IMAGE_SIZE_MAX or more, more than IMAGE_ELF_TABLE_MAX section headers, a
 * fatbin header smaller than itself, or a byte it must read that cannot be
 * read. Magic numbers are compared byte by byte, so a short PTX string is
 * never read past its NUL.
 *
 * The includer defines, before including this file, how bytes are read:
 *   static long image_read(void *dst, __u32 len, __u64 addr)
 *       0, or non-zero when the len bytes at addr cannot all be read
 *   static __u64 image_strlen(__u64 addr)
 *       the bytes before the NUL of the string at addr; 0 when no NUL can be
 *       read
 * The BPF side reads with bpf_probe_read_user (a page that is not mapped
 * fails the read) and walks the header tables with bpf_loop; user space
 * walks them with a plain loop.
 */
#ifndef TALLY_IMAGE_SIZE_H
#define TALLY_IMAGE_SIZE_H

#include "image_format.h"

#ifndef __BPF__
#include <stdbool.h>
#endif
#ifndef __always_inline
#define __always_inline inline __attribute__((always_inline))
#endif

#define IMAGE_MAGIC_BYTES 4

/* One header table being walked, and what it found. */
struct image_walk {
	__u64 image;   /* address of the image */
	__u64 table;   /* offset of the table's first entry */
	__u64 entsize; /* bytes from one entry to the next */
	__u64 end;     /* the furthest byte so far, from the image's start */
	bool bad;      /* a read failed, or an offset or size is corrupt */
};

/* Bytes [off, off + size) of the image are in it. Each term is below
 * IMAGE_SIZE_MAX (2^40), so their sum cannot wrap. */
static __always_inline void image_extent(struct image_walk *w, __u64 off, __u64 size)
{
	if (off >= IMAGE_SIZE_MAX || size >= IMAGE_SIZE_MAX) {
		w->bad = true;
		return;
	}
	if (off + size > w->end)
		w->end = off + size;
}

/* loop body: return non-zero to stop (bpf_loop's contract) */
typedef long (*image_step_fn)(__u64 i, void *ctx);

static __always_inline void image_loop(__u32 n, image_step_fn fn, void *ctx)
{
#ifdef __BPF__
	bpf_loop(n, fn, ctx, 0);
#else
	for (__u64 i = 0; i < n; i++)
		if (fn(i, ctx))
			break;
#endif
}

static long image_elf_section(__u64 i, void *ctx)
{
	struct image_walk *w = ctx;
	struct image_elf64_shdr sh;

	if (image_read(&sh, sizeof(sh), w->image + w->table + i * w->entsize)) {
		w->bad = true;
		return 1;
	}
	if (sh.sh_type != IMAGE_SHT_NULL && sh.sh_type != IMAGE_SHT_NOBITS)
		image_extent(w, sh.sh_offset, sh.sh_size);
	return w->bad;
}

static long image_elf_segment(__u64 i, void *ctx)
{
	struct image_walk *w = ctx;
	struct image_elf64_phdr ph;

	if (image_read(&ph, sizeof(ph), w->image + w->table + i * w->entsize)) {
		w->bad = true;
		return 1;
	}
	image_extent(w, ph.p_offset, ph.p_filesz);
	return w->bad;
}

/* The section header table and the sections' bytes. */
static __always_inline void image_elf_sections(struct image_walk *w,
					       const struct image_elf64_ehdr *eh)
{
	struct image_elf64_shdr sh0;
	__u64 shnum = eh->e_shnum;

	if (!eh->e_shoff || eh->e_shentsize < sizeof(struct image_elf64_shdr))
		return;
	if (eh->e_shoff >= IMAGE_SIZE_MAX) {
		w->bad = true;
		return;
	}
	w->table = eh->e_shoff;
	w->entsize = eh->e_shentsize;
	if (!shnum) { /* SHN_LORESERVE sections or more: section 0 counts them */
		if (image_read(&sh0, sizeof(sh0), w->image + w->table)) {
			w->bad = true;
			return;
		}
		shnum = sh0.sh_size;
	}
	if (shnum > IMAGE_ELF_TABLE_MAX) {
		w->bad = true;
		return;
	}
	image_extent(w, w->table, shnum * w->entsize);
	if (!w->bad)
		image_loop((__u32)shnum, image_elf_section, w);
}

/* The program header table and the segments' bytes (e_phnum < 65536). */
static __always_inline void image_elf_segments(struct image_walk *w,
					       const struct image_elf64_ehdr *eh)
{
	if (w->bad || !eh->e_phoff || eh->e_phentsize < sizeof(struct image_elf64_phdr))
		return;
	if (eh->e_phoff >= IMAGE_SIZE_MAX) {
		w->bad = true;
		return;
	}
	w->table = eh->e_phoff;
	w->entsize = eh->e_phentsize;
	image_extent(w, w->table, (__u64)eh->e_phnum * w->entsize);
	if (!w->bad)
		image_loop(eh->e_phnum, image_elf_segment, w);
}

static __always_inline __u64 image_elf64_size(__u64 image)
{
	struct image_elf64_ehdr eh;
	struct image_walk w = { .image = image, .end = sizeof(eh) };

	if (image_read(&eh, sizeof(eh), image) || eh.e_ident[IMAGE_ELF_CLASS] != IMAGE_ELF_CLASS64)
		return 0;
	if (eh.e_ehsize > w.end)
		w.end = eh.e_ehsize;
	image_elf_sections(&w, &eh);
	image_elf_segments(&w, &eh);
	return w.bad || w.end >= IMAGE_SIZE_MAX ? 0 : w.end;
}

static __always_inline __u64 image_fatbin_size(__u64 addr)
{
	struct image_fatbin_header h;

	if (image_read(&h, sizeof(h), addr) || h.magic != IMAGE_FATBIN_MAGIC)
		return 0;
	if (h.header_size < sizeof(h) || h.fat_size >= IMAGE_SIZE_MAX)
		return 0;
	return (__u64)h.header_size + h.fat_size;
}

static __always_inline __u64 image_wrapper_size(__u64 addr)
{
	struct image_fatbin_wrapper w;

	if (image_read(&w, sizeof(w), addr) || !w.data)
		return 0;
	return image_fatbin_size(w.data);
}

/* The image starts with the 4 bytes of a little-endian magic; stops reading
 * at the first mismatch. */
static __always_inline bool image_has_magic(__u64 addr, __u32 magic)
{
	for (int i = 0; i < IMAGE_MAGIC_BYTES; i++) {
		__u8 b;

		if (image_read(&b, 1, addr + i) || b != (__u8)(magic >> (8 * i)))
			return false;
	}
	return true;
}

/* PTX is text: it starts with a comment, a directive or white space. */
static __always_inline bool image_is_text(__u8 c)
{
	return (c >= ' ' && c <= '~') || c == '\t' || c == '\n' || c == '\r';
}

/* The size of the image at addr, as defined above; 0 when unknown. */
static __always_inline __u64 image_size(__u64 addr)
{
	__u8 first;

	if (!addr || image_read(&first, 1, addr))
		return 0;
	if (image_has_magic(addr, IMAGE_ELF_MAGIC))
		return image_elf64_size(addr);
	if (image_has_magic(addr, IMAGE_FATBIN_MAGIC))
		return image_fatbin_size(addr);
	if (image_has_magic(addr, IMAGE_FATBIN_WRAPPER_MAGIC))
		return image_wrapper_size(addr);
	return image_is_text(first) ? image_strlen(addr) : 0;
}

#endif /* TALLY_IMAGE_SIZE_H */
