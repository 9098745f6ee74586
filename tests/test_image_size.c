// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The image-size definition (bpf/image_size.h) on the image fixtures
 * (tests/image_fixtures.c), in user space and without the CUDA toolkit:
 *   - through the CUPTI library's own function, tally_cupti_image_size
 *     (cupti/image_size.c, built alone), on each image in a buffer of
 *     exactly its length, so that AddressSanitizer sees any read past it;
 *   - through the same header with a reader that fails outside the image's
 *     bytes, which is what the BPF side's bpf_probe_read_user does where the
 *     fake driver's tests put an image: right before a page nobody may read.
 * The driver probes themselves read the same fixtures in tests/gpu/run.sh.
 */
#include <elf.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <linux/types.h>

#include "../bpf/contract/tally_events.h"
#include "../cupti/image_size.h"
#include "image_fixtures.h"

/* The bytes the bounded reader may read: one image's. */
static const unsigned char *readable;
static size_t readable_len;

static bool in_readable(__u64 addr, __u64 len)
{
	uintptr_t lo = (uintptr_t)readable;

	return addr >= lo && addr - lo <= readable_len && len <= readable_len - (addr - lo);
}

static long image_read(void *dst, __u32 len, __u64 addr)
{
	if (!in_readable(addr, len))
		return -1;
	memcpy(dst, (const void *)(uintptr_t)addr, len);
	return 0;
}

static __u64 image_strlen(__u64 addr)
{
	const char *s = (const char *)(uintptr_t)addr;
	const char *nul;

	if (!in_readable(addr, 0))
		return 0;
	nul = memchr(s, 0, readable_len - (addr - (uintptr_t)readable));
	return nul ? (__u64)(nul - s) : 0;
}

#include "../bpf/image_size.h"

/* bpf/image_format.h's copy of the ELF layouts is <elf.h>'s. */
#define SAME_FIELD(ours, theirs, field)                                                            \
	_Static_assert(offsetof(struct ours, field) == offsetof(theirs, field) &&                  \
			       sizeof(((struct ours *)0)->field) == sizeof(((theirs *)0)->field),  \
		       #field)
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_ident);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_phoff);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_shoff);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_ehsize);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_phentsize);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_phnum);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_shentsize);
SAME_FIELD(image_elf64_ehdr, Elf64_Ehdr, e_shnum);
SAME_FIELD(image_elf64_shdr, Elf64_Shdr, sh_type);
SAME_FIELD(image_elf64_shdr, Elf64_Shdr, sh_offset);
SAME_FIELD(image_elf64_shdr, Elf64_Shdr, sh_size);
SAME_FIELD(image_elf64_phdr, Elf64_Phdr, p_offset);
SAME_FIELD(image_elf64_phdr, Elf64_Phdr, p_filesz);
_Static_assert(sizeof(struct image_elf64_ehdr) == sizeof(Elf64_Ehdr), "Elf64_Ehdr");
_Static_assert(sizeof(struct image_elf64_shdr) == sizeof(Elf64_Shdr), "Elf64_Shdr");
_Static_assert(sizeof(struct image_elf64_phdr) == sizeof(Elf64_Phdr), "Elf64_Phdr");
_Static_assert(IMAGE_ELF_CLASS == EI_CLASS && IMAGE_ELF_CLASS64 == ELFCLASS64, "e_ident");
_Static_assert(IMAGE_SHT_NULL == SHT_NULL && IMAGE_SHT_NOBITS == SHT_NOBITS, "sh_type");
_Static_assert(IMAGE_ELF_MAGIC ==
		       (ELFMAG0 | ELFMAG1 << 8 | ELFMAG2 << 16 | (unsigned)ELFMAG3 << 24),
	       "ELF magic");

/* One fixture's image, built in a buffer of exactly its length. */
static unsigned char *fixture_image(const struct image_fixture *f)
{
	unsigned char *buf = malloc(f->len);

	assert_non_null(buf);
	f->build(buf);
	return buf;
}

static void image_size__each_fixture__cupti_library(void **state)
{
	unsigned wrong = 0, sized = 0;

	(void)state;
	for (size_t i = 0; i < image_fixture_count; i++) {
		const struct image_fixture *f = &image_fixtures[i];
		if (f->reads_past_end)
			continue; /* the driver accepts no such image: never sized here */
		unsigned char *img = fixture_image(f);
		uint64_t got = tally_cupti_image_size(img);
		if (got != f->want) {
			print_error("%s: %llu bytes, want %llu\n", f->name, (unsigned long long)got,
				    (unsigned long long)f->want);
			wrong++;
		}
		sized++;
		free(img);
	}
	assert_int_equal(wrong, 0);
	assert_true(sized > 0);
}

static void image_size__each_fixture__reads_fail_past_the_image(void **state)
{
	unsigned wrong = 0;

	(void)state;
	for (size_t i = 0; i < image_fixture_count; i++) {
		const struct image_fixture *f = &image_fixtures[i];
		unsigned char *img = fixture_image(f);
		readable = img;
		readable_len = f->len;
		uint64_t got = image_size((uintptr_t)img);
		if (got != f->want) {
			print_error("%s: %llu bytes, want %llu\n", f->name, (unsigned long long)got,
				    (unsigned long long)f->want);
			wrong++;
		}
		free(img);
	}
	readable = NULL;
	readable_len = 0;
	assert_int_equal(wrong, 0);
}

static void image_size__null__is_zero(void **state)
{
	(void)state;
	assert_int_equal(tally_cupti_image_size(NULL), 0);
	assert_int_equal(image_size(0), 0);
}

/* The fixtures' names are group names in tests/gpu: distinct, and short
 * enough for the SDK. */
static void image_fixtures__names__distinct_group_names(void **state)
{
	(void)state;
	for (size_t i = 0; i < image_fixture_count; i++) {
		assert_true(strlen(image_fixtures[i].name) < TALLY_GROUP_NAME_MAX);
		for (size_t j = 0; j < i; j++)
			assert_string_not_equal(image_fixtures[i].name, image_fixtures[j].name);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(image_size__each_fixture__cupti_library),
		cmocka_unit_test(image_size__each_fixture__reads_fail_past_the_image),
		cmocka_unit_test(image_size__null__is_zero),
		cmocka_unit_test(image_fixtures__names__distinct_group_names),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
