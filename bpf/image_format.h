/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What a CUDA module image looks like, as far as its size goes: the magic
 * numbers and the few header layouts that image_size.h reads. Written once
 * for the BPF side (bpf/cuda.bpf.c), the CUPTI library (cupti/image_size.c)
 * and the tests that build images (tests/image_fixtures.c). The ELF layouts
 * are <elf.h>'s, which BPF C cannot include (tests/test_image_size.c checks
 * that they match); fatbinary_section.h (the CUDA toolkit's) describes the
 * fatbin wrapper, and the fatbin header is the one nvcc writes.
 */
#ifndef TALLY_IMAGE_FORMAT_H
#define TALLY_IMAGE_FORMAT_H

#ifdef __BPF__
/* vmlinux.h provides __u8 ... __u64 */
#else
#include <linux/types.h>
#endif

/* Magic numbers, as the image's first 4 bytes read little-endian. None has a
 * 0 byte, so comparing them byte by byte never reads past the NUL of a short
 * PTX string. */
#define IMAGE_ELF_MAGIC 0x464c457fu	       /* "\x7fELF" */
#define IMAGE_FATBIN_MAGIC 0xba55ed50u	       /* struct image_fatbin_header */
#define IMAGE_FATBIN_WRAPPER_MAGIC 0x466243b1u /* __fatBinC_Wrapper_t, FATBINC_MAGIC */

/* Beyond what a real image has: a header that says so is corrupt. */
#define IMAGE_SIZE_MAX (1ULL << 40) /* bytes: an offset, a size, an image */
#define IMAGE_ELF_TABLE_MAX 65536   /* section headers */

/* e_ident[] of an ELF file (EI_CLASS, ELFCLASS64 in <elf.h>) */
#define IMAGE_ELF_CLASS 4   /* the byte that says 32 or 64 bits */
#define IMAGE_ELF_CLASS64 2 /* a 64-bit file, as every cubin is */
#define IMAGE_ELF_IDENT_LEN 16
/* sh_type values whose sections have no bytes in the file */
#define IMAGE_SHT_NULL 0
#define IMAGE_SHT_NOBITS 8

/* Elf64_Ehdr */
struct image_elf64_ehdr {
	__u8 e_ident[IMAGE_ELF_IDENT_LEN];
	__u16 e_type;
	__u16 e_machine;
	__u32 e_version;
	__u64 e_entry;
	__u64 e_phoff; /* file offset of the program header table, 0: none */
	__u64 e_shoff; /* file offset of the section header table, 0: none */
	__u32 e_flags;
	__u16 e_ehsize;	   /* bytes of this header */
	__u16 e_phentsize; /* bytes per program header */
	__u16 e_phnum;
	__u16 e_shentsize; /* bytes per section header */
	__u16 e_shnum;	   /* 0 with e_shoff set: the count is section 0's sh_size */
	__u16 e_shstrndx;
};
_Static_assert(sizeof(struct image_elf64_ehdr) == 64, "Elf64_Ehdr is 64 bytes");

/* Elf64_Shdr */
struct image_elf64_shdr {
	__u32 sh_name;
	__u32 sh_type;
	__u64 sh_flags;
	__u64 sh_addr;
	__u64 sh_offset; /* file offset of the section's bytes */
	__u64 sh_size;	 /* bytes (none in the file for SHT_NOBITS) */
	__u32 sh_link;
	__u32 sh_info;
	__u64 sh_addralign;
	__u64 sh_entsize;
};
_Static_assert(sizeof(struct image_elf64_shdr) == 64, "Elf64_Shdr is 64 bytes");

/* Elf64_Phdr */
struct image_elf64_phdr {
	__u32 p_type;
	__u32 p_flags;
	__u64 p_offset; /* file offset of the segment's bytes */
	__u64 p_vaddr;
	__u64 p_paddr;
	__u64 p_filesz; /* bytes in the file */
	__u64 p_memsz;
	__u64 p_align;
};
_Static_assert(sizeof(struct image_elf64_phdr) == 56, "Elf64_Phdr is 56 bytes");

/* The header at the start of a fatbin: nvcc's -fatbin output is exactly
 * header_size + fat_size bytes long. */
struct image_fatbin_header {
	__u32 magic;	   /* IMAGE_FATBIN_MAGIC */
	__u16 version;	   /* 1 */
	__u16 header_size; /* bytes of this header, 16 */
	__u64 fat_size;	   /* bytes that follow the header */
};
_Static_assert(sizeof(struct image_fatbin_header) == 16, "fatbin header is 16 bytes");

/* The start of __fatBinC_Wrapper_t (fatbinary_section.h), which the CUDA
 * runtime hands to cuModuleLoadFatBinary and cuLibraryLoadData: a pointer
 * to a fatbin, in either version (1, FATBINC_VERSION; 2,
 * FATBINC_LINK_VERSION, whose other field lists prelinked fatbins). */
struct image_fatbin_wrapper {
	__u32 magic;   /* IMAGE_FATBIN_WRAPPER_MAGIC */
	__u32 version; /* 1 or 2: data means the same in both */
	__u64 data;    /* address of the fatbin */
};
_Static_assert(sizeof(struct image_fatbin_wrapper) == 16, "fatbin wrapper's start is 16 bytes");

#endif /* TALLY_IMAGE_FORMAT_H */
