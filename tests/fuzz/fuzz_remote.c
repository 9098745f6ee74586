// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the remote state reader (user/os/remote.c) on a target
 * whose memory is the fuzzer's input. Every address maps onto the input with
 * wrap-around (byte A is input[A % size]), so that any pointer the input
 * holds points back into it and the fuzzer can build heap and segment lists,
 * self-referencing ones included. The first bytes, read the same way, also
 * say where the reads start and which of them fail:
 *
 *   0..7    heaps_addr, the address of `tally_heaps` (and of the registry)
 *   8       bits 0-1: how many of the fault ranges below are in force;
 *           bit 2: the failing read (byte 9) says -ESRCH (target gone), else -EFAULT
 *   9       the read, counted from 1, that fails (0: none): a target gone mid-walk
 *   10, 11  the read after which the memory moves by byte 11's value: a
 *           target that runs while it is read (0: it never moves)
 *   12      the cut's request (alloc/cut.c) the read is given: this byte
 *           shifted left by one, with CUT_FIGURES for the read with spans
 *           (0 and without: no request)
 *   16..63  up to three ranges [lo, lo + len), as two little-endian u64 each,
 *           where every read fails with -EFAULT (unmapped memory)
 *
 * Each input is read with spans (remote_alloc_read) and without
 * (remote_pending_read), then as the SDK's registry, and the results are
 * checked against the readers' contracts in remote.h.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../user/os/remote.h"

#define FAULT_RANGES 3

struct image {
	const uint8_t *data;
	size_t size;
	uint64_t fault_lo[FAULT_RANGES], fault_len[FAULT_RANGES];
	unsigned nfaults;
	int fail_err;
	uint32_t fail_at, move_after, reads;
	uint64_t move_by;
};

/* n bytes of the image from `off` on, wrapping at its end. */
static void image_copy(const struct image *img, uint64_t off, void *buf, size_t len)
{
	uint8_t *out = buf;

	off %= img->size;
	while (len) {
		size_t chunk = img->size - off < len ? img->size - off : len;
		memcpy(out, img->data + off, chunk);
		out += chunk;
		len -= chunk;
		off = 0;
	}
}

static uint64_t image_u64(const struct image *img, uint64_t off)
{
	uint8_t b[8];
	uint64_t v = 0;

	image_copy(img, off, b, sizeof(b));
	for (int i = 7; i >= 0; i--)
		v = v << 8 | b[i];
	return v;
}

static uint8_t image_u8(const struct image *img, uint64_t off)
{
	uint8_t b;

	image_copy(img, off, &b, 1);
	return b;
}

/* As process_vm_readv does: all of it, or an error. */
static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *img = ctx;
	uint32_t n = ++img->reads;

	if (img->fail_at && n == img->fail_at)
		return img->fail_err;
	if (addr + len < addr)
		return -EFAULT; /* past the top of the address space */
	for (unsigned i = 0; i < img->nfaults; i++) {
		uint64_t lo = img->fault_lo[i], hi = lo + img->fault_len[i];
		if (hi < lo)
			hi = UINT64_MAX;
		if (addr < hi && addr + len > lo)
			return -EFAULT;
	}
	image_copy(img, addr + (img->move_after && n > img->move_after ? img->move_by : 0), buf,
		   len);
	return 0;
}

static void image_init(struct image *img, const uint8_t *data, size_t size)
{
	memset(img, 0, sizeof(*img));
	img->data = data;
	img->size = size;
	uint8_t flags = image_u8(img, 8);
	img->nfaults = flags & 3;
	img->fail_err = flags & 4 ? -ESRCH : -EFAULT;
	img->fail_at = image_u8(img, 9);
	img->move_after = image_u8(img, 10);
	img->move_by = image_u8(img, 11);
	for (unsigned i = 0; i < img->nfaults; i++) {
		img->fault_lo[i] = image_u64(img, 16 + 16 * i);
		img->fault_len[i] = image_u64(img, 24 + 16 * i);
	}
}

/* What remote.h promises of a read: on failure a negative errno with a
 * message and nothing left to free; on success bounded heaps whose pending
 * records are all there. */
static void check_alloc(int err, const struct remote_alloc *ra)
{
	if (err > 0 || !remote_strerror(err))
		abort();
	if (err) {
		if (ra->nheaps || ra->heaps)
			abort();
		return;
	}
	if (ra->nheaps > REMOTE_MAX_HEAPS || (ra->nheaps && !ra->heaps))
		abort();
	for (uint32_t i = 0; i < ra->nheaps; i++) {
		const struct remote_heap *rh = &ra->heaps[i];
		volatile __u64 sum = 0;
		/* an answered heap's position may be off its batch (it answered
		 * before its last hand-over, or after batches since), with
		 * nothing pending */
		bool pos_ok =
			rh->pos == rh->seq_first + rh->npending || (rh->answered && !rh->npending);
		if (rh->npending > TALLY_BATCH_WORDS || !rh->npending != !rh->pending || !pos_ok ||
		    (i && rh->id >= ra->heaps[i - 1].id))
			abort();
		for (uint32_t k = 0; k < rh->npending; k++)
			sum += rh->pending[k]; /* every word is there (ASan checks) */
		(void)sum;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct remote_mem mem;
	struct image img;
	uint64_t heaps_addr;

	if (!size)
		return 0;
	image_init(&img, data, size);
	heaps_addr = image_u64(&img, 0);
	mem = (struct remote_mem){ image_read, &img };
	for (int spans = 1; spans >= 0; spans--) {
		struct remote_alloc ra;
		img.reads = 0;
		/* a request the image's heaps may have answered (alloc/cut.c):
		 * its answers, figures and positions, are untrusted too */
		uint64_t req = (uint64_t)image_u8(&img, 12) << 1 | (uint64_t)spans;
		int err = remote_alloc_read_mem(&mem, heaps_addr, spans, req, &ra);
		check_alloc(err, &ra);
		remote_alloc_free(&ra);
	}

	struct tally_registry *reg = malloc(sizeof(*reg));
	if (!reg)
		return 0;
	img.reads = 0;
	int err = remote_registry_read_mem(&mem, heaps_addr, reg);
	if (err > 0)
		abort();
	if (!err) {
		if (reg->ngroups > TALLY_MAX_GROUPS)
			abort();
		for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
			if (strnlen(reg->names[g], TALLY_GROUP_NAME_MAX) == TALLY_GROUP_NAME_MAX)
				abort(); /* the views print them as strings */
	}
	free(reg);
	return 0;
}
