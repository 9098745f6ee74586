// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The image fixtures (tests/image_fixtures.c) through the fake libcuda.so.1,
 * for the driver probes' side of the image-size definition
 * (bpf/image_size.h); tests/test_image_size.c checks the CUPTI library's
 * side on the same images. Usage: image_workload FILE.
 *
 * Each fixture is built at the end of a fresh mapping whose next page nobody
 * may read, so a truncated image's missing bytes cannot be read there, and
 * loaded in a group named after it: a fatbin wrapper with
 * cuModuleLoadFatBinary, a bare fatbin with cuLibraryLoadData, anything else
 * with cuModuleLoadData. Nothing is unloaded, so that each group's
 * bytes_pinned in tally's snapshot is its fixture's size. FILE gets what it
 * must be, {"NAME": bytes, ...}, then the workload exits 0.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"
#include "../../bpf/image_format.h"
#include "../fake_cuda/cuda_abi.h"
#include "../image_fixtures.h"

static void die(const char *what)
{
	fprintf(stderr, "image_workload: %s\n", what);
	exit(1);
}

/* f's image, its last byte just before a page nobody may read */
static unsigned char *image_before_guard(const struct image_fixture *f, size_t page)
{
	size_t span = (f->len + page - 1) / page * page;
	unsigned char *map =
		mmap(NULL, span + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (map == MAP_FAILED || mprotect(map + span, page, PROT_NONE))
		die("cannot map an image");
	return map + span - f->len;
}

static bool starts_with(const unsigned char *img, size_t len, uint32_t magic)
{
	return len >= sizeof(magic) && !memcmp(img, &magic, sizeof(magic));
}

static void load(const struct image_fixture *f, const unsigned char *img)
{
	CUresult rc;
	CUmodule m;
	CUlibrary l;

	if (starts_with(img, f->len, IMAGE_FATBIN_WRAPPER_MAGIC))
		rc = cuModuleLoadFatBinary(&m, img);
	else if (starts_with(img, f->len, IMAGE_FATBIN_MAGIC))
		rc = cuLibraryLoadData(&l, img, NULL, NULL, 0, NULL, NULL, 0);
	else
		rc = cuModuleLoadData(&m, img);
	if (rc != CUDA_SUCCESS)
		die(f->name);
}

int main(int argc, char **argv)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	FILE *out;

	if (argc != 2)
		die("usage: image_workload FILE");
	if (cuInit(0) != CUDA_SUCCESS)
		die("cuInit");
	out = fopen(argv[1], "w");
	if (!out)
		die("cannot write FILE");
	fputc('{', out);
	for (size_t i = 0; i < image_fixture_count; i++) {
		const struct image_fixture *f = &image_fixtures[i];
		unsigned char *img = image_before_guard(f, page);
		struct tally_group_guard g;

		f->build(img);
		g = tally_group_enter(tally_group_register(f->name));
		load(f, img);
		tally_group_exit(g);
		fprintf(out, "%s\"%s\": %llu", i ? ", " : "", f->name, (unsigned long long)f->want);
	}
	fputs("}\n", out);
	if (fclose(out))
		die("cannot write FILE");
	return 0;
}
