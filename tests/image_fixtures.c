// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The image fixtures (image_fixtures.h). The ELF ones are built with
 * <elf.h>'s own types, so that they also check bpf/image_format.h's copy of
 * the layouts; the fatbins with the magic numbers of bpf/image_format.h,
 * which fatbinary_section.h (the toolkit's) confirms in tests/cupti. Every
 * field is written with memcpy: an image may sit at any address.
 *
 * Why each `want`: the size is the furthest byte of the ELF header, the two
 * header tables and the sections' and segments' bytes (bpf/image_size.h);
 * the comment above each cubin draws its layout, offsets in bytes.
 */
#include <elf.h>
#include <string.h>

#include "../bpf/image_format.h"
#include "image_fixtures.h"

#define SHDR ((uint64_t)sizeof(Elf64_Shdr)) /* 64 */
#define PHDR ((uint64_t)sizeof(Elf64_Phdr)) /* 56 */

/* A cubin's ELF header: sm_90, its tables where the layout puts them. */
static void elf_header(unsigned char *buf, uint64_t shoff, uint16_t shnum, uint64_t phoff,
		       uint16_t phnum)
{
	Elf64_Ehdr eh = {
		.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB,
			     EV_CURRENT },
		.e_type = ET_EXEC,
		.e_machine = EM_CUDA,
		.e_version = EV_CURRENT,
		.e_phoff = phoff,
		.e_shoff = shoff,
		.e_ehsize = sizeof(Elf64_Ehdr),
		.e_phentsize = phnum ? sizeof(Elf64_Phdr) : 0,
		.e_phnum = phnum,
		.e_shentsize = sizeof(Elf64_Shdr),
		.e_shnum = shnum,
	};

	memcpy(buf, &eh, sizeof(eh));
}

static void section(unsigned char *buf, uint64_t at, uint32_t type, uint64_t off, uint64_t size)
{
	Elf64_Shdr sh = { .sh_type = type, .sh_offset = off, .sh_size = size };

	memcpy(buf + at, &sh, sizeof(sh));
}

static void segment(unsigned char *buf, uint64_t at, uint64_t off, uint64_t filesz)
{
	Elf64_Phdr ph = { .p_type = PT_LOAD, .p_offset = off, .p_filesz = filesz };

	memcpy(buf + at, &ph, sizeof(ph));
}

/* header | code 64..464 | section headers 512..704 (null, code, bss) */
#define SHDRS_LAST_LEN (512 + 3 * SHDR)
static void cubin_shdrs_last(unsigned char *buf)
{
	memset(buf, 0, SHDRS_LAST_LEN);
	elf_header(buf, 512, 3, 0, 0);
	section(buf, 512, SHT_NULL, 0, 0);
	section(buf, 512 + SHDR, SHT_PROGBITS, 64, 400);
	section(buf, 512 + 2 * SHDR, SHT_NOBITS, 464, 100000); /* no bytes in the file */
}

/* nvcc's order: ... section headers 512..704 | program headers 704..816 */
#define PHDRS_LAST_LEN (704 + 2 * PHDR)
static void cubin_phdrs_last(unsigned char *buf)
{
	memset(buf, 0, PHDRS_LAST_LEN);
	cubin_shdrs_last(buf);
	elf_header(buf, 512, 3, 704, 2);
	segment(buf, 704, 64, 400);
	segment(buf, 704 + PHDR, 464, 0);
}

/* header | section headers 64..256 | code 256..300 | data 704..904 */
#define SECTION_LAST_LEN 904
static void cubin_section_last(unsigned char *buf)
{
	memset(buf, 0, SECTION_LAST_LEN);
	elf_header(buf, 64, 3, 0, 0);
	section(buf, 64, SHT_NULL, 0, 0);
	section(buf, 64 + SHDR, SHT_PROGBITS, 256, 44);
	section(buf, 64 + 2 * SHDR, SHT_PROGBITS, 704, 200);
}

/* e_shnum 0: section 0's sh_size counts them (SHN_LORESERVE or more in a
 * real file); header | code 64..128 | section headers 128..320 | data 320..400 */
#define COUNTED_LEN 400
static void cubin_count_in_section0(unsigned char *buf)
{
	memset(buf, 0, COUNTED_LEN);
	elf_header(buf, 128, 0, 0, 0);
	section(buf, 128, SHT_NULL, 0, 3);
	section(buf, 128 + SHDR, SHT_PROGBITS, 64, 64);
	section(buf, 128 + 2 * SHDR, SHT_PROGBITS, 320, 80);
}

/* a section header table of 4 entries, of which the image holds 2 */
#define TRUNCATED_LEN (64 + 2 * SHDR)
static void cubin_truncated(unsigned char *buf)
{
	memset(buf, 0, TRUNCATED_LEN);
	elf_header(buf, 64, 4, 0, 0);
	section(buf, 64 + SHDR, SHT_PROGBITS, 0, 64);
}

/* the ELF header itself cut short */
#define HEADER_CUT_LEN 32
static void cubin_header_cut(unsigned char *buf)
{
	unsigned char whole[sizeof(Elf64_Ehdr)];

	elf_header(whole, 64, 1, 0, 0);
	memcpy(buf, whole, HEADER_CUT_LEN);
}

/* a section's offset (or its end) beyond any real image */
static void cubin_offset_huge(unsigned char *buf)
{
	cubin_shdrs_last(buf);
	section(buf, 512 + SHDR, SHT_PROGBITS, IMAGE_SIZE_MAX, 16);
}

static void cubin_extent_wraps(unsigned char *buf)
{
	cubin_shdrs_last(buf);
	section(buf, 512 + SHDR, SHT_PROGBITS, UINT64_MAX - 15, 64); /* ends at 48, wrapped */
}

static void cubin_table_offset_huge(unsigned char *buf)
{
	cubin_shdrs_last(buf);
	elf_header(buf, 2 * IMAGE_SIZE_MAX, 3, 0, 0); /* never read there */
}

/* section 0 counts more section headers than are walked */
static void cubin_table_too_long(unsigned char *buf)
{
	cubin_count_in_section0(buf);
	section(buf, 128, SHT_NULL, 0, IMAGE_ELF_TABLE_MAX + 1);
}

/* a 32-bit ELF: no cubin */
#define ELF32_LEN 64
static void elf32(unsigned char *buf)
{
	memset(buf, 0, ELF32_LEN);
	elf_header(buf, 0, 0, 0, 0);
	buf[EI_CLASS] = ELFCLASS32;
}

/* three bytes of the ELF magic and a NUL: not an ELF, not text */
static void elf_magic_cut(unsigned char *buf)
{
	static const unsigned char bytes[] = { ELFMAG0, ELFMAG1, ELFMAG2, 0 };

	memcpy(buf, bytes, sizeof(bytes));
}

/* The 16-byte fatbin header and the fat_size bytes after it. */
#define FATBIN_LEN 64
static void fatbin_at(unsigned char *buf, uint16_t header_size, uint64_t fat_size)
{
	struct image_fatbin_header h = { IMAGE_FATBIN_MAGIC, 1, header_size, fat_size };

	memset(buf, 0, FATBIN_LEN);
	memcpy(buf, &h, sizeof(h));
}

static void fatbin(unsigned char *buf)
{
	fatbin_at(buf, sizeof(struct image_fatbin_header),
		  FATBIN_LEN - sizeof(struct image_fatbin_header));
}

static void fatbin_header_short(unsigned char *buf)
{
	fatbin_at(buf, 8, FATBIN_LEN - 8);
}

static void fatbin_size_huge(unsigned char *buf)
{
	fatbin_at(buf, sizeof(struct image_fatbin_header), IMAGE_SIZE_MAX);
}

/* __fatBinC_Wrapper_t (24 bytes) | its fatbin at 32..96 */
#define WRAPPED_AT 32
#define WRAPPED_LEN (WRAPPED_AT + FATBIN_LEN)
static void wrapper_at(unsigned char *buf, uint32_t version, const void *data)
{
	struct {
		struct image_fatbin_wrapper w;
		uint64_t filename_or_fatbins;
	} w = { { IMAGE_FATBIN_WRAPPER_MAGIC, version, (uint64_t)(uintptr_t)data }, 0 };

	memset(buf, 0, WRAPPED_LEN);
	memcpy(buf, &w, sizeof(w));
}

static void fatbin_wrapped(unsigned char *buf)
{
	wrapper_at(buf, 1, buf + WRAPPED_AT); /* FATBINC_VERSION */
	fatbin(buf + WRAPPED_AT);
}

static void fatbin_wrapped_link(unsigned char *buf)
{
	wrapper_at(buf, 2, buf + WRAPPED_AT); /* FATBINC_LINK_VERSION (-rdc) */
	fatbin(buf + WRAPPED_AT);
}

static void wrapper_null(unsigned char *buf)
{
	wrapper_at(buf, 1, NULL);
}

static void wrapper_of_text(unsigned char *buf)
{
	wrapper_at(buf, 1, buf + WRAPPED_AT);
	memcpy(buf + WRAPPED_AT, "//\n.version 8.0\n", 17);
}

#define PTX_TEXT "//\n// tally fixture\n.version 8.0\n.target sm_90\n.address_size 64\n"
static void ptx(unsigned char *buf)
{
	memcpy(buf, PTX_TEXT, sizeof(PTX_TEXT)); /* with its NUL */
}

static void ptx_unterminated(unsigned char *buf)
{
	memcpy(buf, PTX_TEXT, sizeof(PTX_TEXT) - 1);
}

/* "P" is the fatbin magic's first byte: only that byte and the NUL are read */
static void ptx_one_byte(unsigned char *buf)
{
	memcpy(buf, "P", 2);
}

static void binary_unknown(unsigned char *buf)
{
	static const unsigned char bytes[] = { 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07 };

	memcpy(buf, bytes, sizeof(bytes));
}

/* F(builder, bytes, size): the fixture is named after its builder */
#define F(f, n, size)                                                                              \
	{                                                                                          \
		.name = #f, .len = (n), .want = (size), .build = f                                 \
	}
#define TRUNCATED(f, n)                                                                            \
	{                                                                                          \
		.name = #f, .len = (n), .reads_past_end = true, .build = f                         \
	}
const struct image_fixture image_fixtures[] = {
	/* what nvcc and the CUDA runtime hand the driver */
	F(cubin_shdrs_last, SHDRS_LAST_LEN, SHDRS_LAST_LEN),
	F(cubin_phdrs_last, PHDRS_LAST_LEN, PHDRS_LAST_LEN),
	F(cubin_section_last, SECTION_LAST_LEN, SECTION_LAST_LEN),
	F(cubin_count_in_section0, COUNTED_LEN, COUNTED_LEN),
	F(fatbin, FATBIN_LEN, FATBIN_LEN),
	F(fatbin_wrapped, WRAPPED_LEN, FATBIN_LEN),
	F(fatbin_wrapped_link, WRAPPED_LEN, FATBIN_LEN),
	F(ptx, sizeof(PTX_TEXT), sizeof(PTX_TEXT) - 1),
	F(ptx_one_byte, 2, 1),
	/* hostile: 0, and nothing read out of bounds */
	F(cubin_offset_huge, SHDRS_LAST_LEN, 0),
	F(cubin_extent_wraps, SHDRS_LAST_LEN, 0),
	F(cubin_table_offset_huge, SHDRS_LAST_LEN, 0),
	F(cubin_table_too_long, COUNTED_LEN, 0),
	F(elf32, ELF32_LEN, 0),
	F(elf_magic_cut, 4, 0),
	F(fatbin_header_short, FATBIN_LEN, 0),
	F(fatbin_size_huge, FATBIN_LEN, 0),
	F(wrapper_null, WRAPPED_LEN, 0),
	F(wrapper_of_text, WRAPPED_LEN, 0),
	F(binary_unknown, 8, 0),
	/* truncated: 0 where the bytes past the end cannot be read */
	TRUNCATED(cubin_truncated, TRUNCATED_LEN),
	TRUNCATED(cubin_header_cut, HEADER_CUT_LEN),
	TRUNCATED(ptx_unterminated, sizeof(PTX_TEXT) - 1),
};
const size_t image_fixture_count = sizeof(image_fixtures) / sizeof(image_fixtures[0]);
