// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The size of a module image, which is what bytes_pinned counts (DESIGN.md
 * §4). The driver's load calls take a bare pointer, so the size comes from
 * the image itself:
 *
 *   PTX      NUL-terminated text: strlen
 *   cubin    a 64-bit ELF: the end of whatever lies furthest in the file (the
 *            section header table, the program header table, a section's
 *            bytes); nvcc puts the program headers last, after the sections
 *   fatbin   struct fatbin_header: header_size + fat_size (nvcc's -fatbin
 *            output is exactly that long)
 *   wrapper  __fatBinC_Wrapper_t, which the CUDA runtime hands to
 *            cuModuleLoadFatBinary and cuLibraryLoadData: its data is a fatbin
 *
 * Only images the driver accepted are sized (dispatch.c sizes on a
 * successful return), so their headers can be trusted to be in bounds. The
 * format tests read byte by byte and stop at the first mismatch, so a short
 * PTX string is never read past its NUL.
 */
#include <elf.h>
#include <stdint.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"

/* The header at the start of a fatbin (fatbinary_section.h's layout). */
struct fatbin_header {
	uint32_t magic;	      /* TALLY_FATBIN_MAGIC */
	uint16_t version;     /* 1 */
	uint16_t header_size; /* bytes of this header, 16 */
	uint64_t fat_size;    /* bytes that follow the header */
};

/* __fatBinC_Wrapper_t (fatbinary_section.h) */
struct fatbin_wrapper {
	int32_t magic; /* TALLY_FATBIN_WRAPPER_MAGIC */
	int32_t version;
	const unsigned long long *data; /* the fatbin */
	void *filename_or_fatbins;
};

#define IMAGE_SANE_MAX (1ull << 40) /* larger figures come from a corrupt header */
#define ELF_TABLE_MAX 65536	    /* section headers we walk */

/* p starts with the 4 bytes of a little-endian magic; stops at a mismatch. */
static bool image_has_magic(const unsigned char *p, uint32_t magic)
{
	for (int i = 0; i < 4; i++)
		if (p[i] != (unsigned char)(magic >> (8 * i)))
			return false;
	return true;
}

static uint64_t max_u64(uint64_t a, uint64_t b)
{
	return a > b ? a : b;
}

static uint64_t elf64_size(const unsigned char *p)
{
	Elf64_Ehdr eh;
	uint64_t end, shnum;

	memcpy(&eh, p, sizeof(eh));
	end = max_u64(sizeof(eh), eh.e_ehsize);
	shnum = eh.e_shnum;
	if (eh.e_shoff && eh.e_shentsize >= sizeof(Elf64_Shdr)) {
		if (shnum == 0) { /* more than SHN_LORESERVE sections: count in sh[0] */
			Elf64_Shdr s0;
			memcpy(&s0, p + eh.e_shoff, sizeof(s0));
			shnum = s0.sh_size;
		}
		if (shnum > ELF_TABLE_MAX)
			return 0;
		end = max_u64(end, eh.e_shoff + shnum * eh.e_shentsize);
		for (uint64_t i = 0; i < shnum; i++) {
			Elf64_Shdr sh;
			memcpy(&sh, p + eh.e_shoff + i * eh.e_shentsize, sizeof(sh));
			if (sh.sh_type != SHT_NOBITS && sh.sh_type != SHT_NULL)
				end = max_u64(end, sh.sh_offset + sh.sh_size);
		}
	}
	if (eh.e_phoff && eh.e_phentsize >= sizeof(Elf64_Phdr)) { /* e_phnum < 65536 */
		end = max_u64(end, eh.e_phoff + (uint64_t)eh.e_phnum * eh.e_phentsize);
		for (unsigned i = 0; i < eh.e_phnum; i++) {
			Elf64_Phdr ph;
			memcpy(&ph, p + eh.e_phoff + (uint64_t)i * eh.e_phentsize, sizeof(ph));
			end = max_u64(end, ph.p_offset + ph.p_filesz);
		}
	}
	return end < IMAGE_SANE_MAX ? end : 0;
}

static uint64_t fatbin_size(const unsigned char *p)
{
	struct fatbin_header h;

	memcpy(&h, p, sizeof(h));
	if (h.header_size < sizeof(h) || h.fat_size >= IMAGE_SANE_MAX)
		return 0;
	return (uint64_t)h.header_size + h.fat_size;
}

/* PTX is text: it starts with a comment, a directive or white space. */
static bool image_is_text(const unsigned char *p)
{
	return (p[0] >= 0x20 && p[0] < 0x7f) || p[0] == '\t' || p[0] == '\n' || p[0] == '\r';
}

uint64_t tally_cupti_image_size(const void *image)
{
	const unsigned char *p = image;

	if (!p)
		return 0;
	if (p[0] == ELFMAG0 && p[1] == ELFMAG1 && p[2] == ELFMAG2 && p[3] == ELFMAG3)
		return p[EI_CLASS] == ELFCLASS64 ? elf64_size(p) : 0;
	if (image_has_magic(p, TALLY_FATBIN_MAGIC))
		return fatbin_size(p);
	if (image_has_magic(p, TALLY_FATBIN_WRAPPER_MAGIC)) {
		struct fatbin_wrapper w;
		memcpy(&w, p, sizeof(w));
		const unsigned char *data = (const unsigned char *)w.data;
		if (!data || !image_has_magic(data, TALLY_FATBIN_MAGIC))
			return 0;
		return fatbin_size(data);
	}
	if (image_is_text(p))
		return strlen((const char *)p);
	return 0;
}

uint64_t tally_cupti_file_size(const char *path)
{
	struct stat st;

	if (!path || stat(path, &st) || st.st_size < 0)
		return 0;
	return (uint64_t)st.st_size;
}
