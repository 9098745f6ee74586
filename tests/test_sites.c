// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The heap profile's model (user/model/sites.c): sample records in, sites
 * out, through the replay's hook as tally's model feeds it.
 */
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "../alloc/common/hash.h"
#include "../user/model/replay.h"
#include "../user/model/sites.h"
#include "../user/util/grow.h"

struct words {
	__u64 w[512];
	__u32 n;
};

static void put_sample(struct words *b, uint64_t id, uint16_t group, uint64_t bytes, uint64_t rate,
		       const uint64_t *pcs, uint32_t n)
{
	struct tally_ev e = { TALLY_EV_SAMPLE, 0, group, n, id };
	tally_ev_put(b->w, &b->n, &e);
	b->w[b->n++] = bytes;
	b->w[b->n++] = rate;
	b->w[b->n++] = 1000000000; /* its birth: 1 s */
	memcpy(&b->w[b->n], pcs, n * sizeof(*pcs));
	b->n += n;
}

static void put_free(struct words *b, uint64_t id)
{
	struct tally_ev e = { TALLY_EV_SAMPLE_FREE, 0, 0, 0, id };
	tally_ev_put(b->w, &b->n, &e);
}

static void put_module(struct words *b, uint64_t bias, uint64_t start, uint64_t end,
		       const char *path)
{
	uint32_t len = (uint32_t)strlen(path);
	struct tally_ev e = { TALLY_EV_MODULE, 0, 0, len, bias };
	tally_ev_put(b->w, &b->n, &e);
	b->w[b->n++] = start;
	b->w[b->n++] = end;
	memset(&b->w[b->n], 0, (len + 7) / 8 * 8);
	memcpy(&b->w[b->n], path, len);
	b->n += (len + 7) / 8;
}

/* The words through the replay, as the model applies a batch: 0 or -EINVAL. */
static int apply(struct sites *s, const struct words *b)
{
	struct tally_replay r;
	uint64_t applied = 0, refused = 0;
	tally_replay_init(&r);
	r.on_sample = sites_on_record;
	r.sample_ctx = s;
	int err = tally_replay_words(&r, b->w, 0, b->n, -1, &applied, &refused);
	return err ? err : refused ? -EINVAL : 0;
}

static const uint64_t stack_a[3] = { 0x401000, 0x402000, 0x403000 };
static const uint64_t stack_b[2] = { 0x401100, 0x403000 };

static void sites__weight__unbiased_scaling(void **state)
{
	(void)state;
	assert_true(sites_weight(100, 1) == 1);
	assert_true(sites_weight(0, 4096) == 1);
	/* S == R: 1 / (1 - e^-1) */
	assert_true(fabs(sites_weight(4096, 4096) - 1.5819767) < 1e-6);
	/* a block far larger than the rate is all but certain: itself */
	assert_true(fabs(sites_weight(1u << 30, 4096) - 1) < 1e-9);
	/* a small one stands for about R / S blocks */
	assert_true(fabs(sites_weight(16, 1u << 20) - 65536.5) < 1);
}

static void sites__sample_and_free__site_figures(void **state)
{
	struct sites s;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_sample(&b, 1, 3, 100, 1, stack_a, 3);
	put_sample(&b, 2, 3, 50, 1, stack_a, 3);
	put_sample(&b, 3, 0, 7, 1, stack_b, 2);
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.nstacks, 2);
	const struct site *a = &s.v[0];
	assert_int_equal(a->group, 3);
	assert_true(a->inuse_bytes == 150 && a->inuse_objects == 2 && a->alloc_bytes == 150);
	uint32_t n;
	const uint64_t *pcs = sites_frames(&s, a, &n);
	assert_int_equal(n, 3);
	assert_memory_equal(pcs, stack_a, sizeof(stack_a));
	b.n = 0;
	put_free(&b, 1);
	put_free(&b, 99); /* sampled before the attach: not known */
	put_free(&b, 0);  /* no block has id 0 (it marks an empty slot) */
	assert_int_equal(apply(&s, &b), 0);
	assert_true(a->inuse_bytes == 50 && a->inuse_objects == 1 && a->alloc_bytes == 150);
	assert_int_equal(s.unknown_frees, 2);
	assert_int_equal(s.frees, 1);
	assert_true(sites_inuse(&s) == 57);
	sites_free(&s);
}

/* Another thread's free of a sampled block may come before the sample (its
 * batch reached the ring first): the sample then counts as allocated, not
 * in use. */
static void sites__free_before_its_sample__not_in_use(void **state)
{
	struct sites s;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_free(&b, 5);
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(s.early, 1);
	b.n = 0;
	put_sample(&b, 5, 0, 64, 1, stack_a, 3);
	put_sample(&b, 6, 0, 32, 1, stack_a, 3);
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(s.early, 0);
	assert_int_equal(s.n, 1);
	assert_true(s.v[0].alloc_bytes == 96 && s.v[0].inuse_bytes == 32);
	assert_true(s.v[0].inuse_objects == 1 && s.frees == 1);
	/* and the id is free again: a second free of it is unknown */
	b.n = 0;
	put_free(&b, 6);
	assert_int_equal(apply(&s, &b), 0);
	assert_true(s.v[0].inuse_bytes == 0);
	sites_free(&s);
}

/* The same stack in two groups is two sites; a record with a group past the
 * last one, or an id already live, is refused and counted. */
static void sites__groups_split_and_bad_records_refused(void **state)
{
	struct sites s;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_sample(&b, 1, 1, 10, 1, stack_a, 3);
	put_sample(&b, 2, 2, 10, 1, stack_a, 3);
	put_sample(&b, 2, 2, 10, 1, stack_a, 3);
	put_sample(&b, 3, 300, 10, 1, stack_a, 3);
	put_sample(&b, 0, 1, 10, 1, stack_a, 3);
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(s.n, 2);
	assert_int_equal(s.nstacks, 1);
	assert_int_equal(s.refused, 3);
	sites_free(&s);
}

/* A record cut short (frames past the batch's end) is refused whole. */
static void sites__record_cut_short__refused(void **state)
{
	struct sites s;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_sample(&b, 1, 0, 10, 1, stack_a, 3);
	b.n--;
	assert_int_equal(apply(&s, &b), -EINVAL);
	b.n = 0;
	put_sample(&b, 1, 0, 10, 1, stack_a, 3);
	b.w[0] =
		(b.w[0] & ~(0xffffffffULL << 32)) | ((uint64_t)(TALLY_SAMPLE_FRAMES_MAX + 1) << 32);
	assert_int_equal(apply(&s, &b), -EINVAL);
	sites_free(&s);
}

/* fork: the child's copy is its own; exec: nothing of the old image. */
static void sites__copy_is_independent_and_reset_empties(void **state)
{
	struct sites s, c;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_sample(&b, 1, 0, 10, 1, stack_a, 3);
	put_module(&b, 0x1000, 0x401000, 0x409000, "/usr/bin/app");
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(sites_copy(&c, &s), 0);
	b.n = 0;
	put_free(&b, 1);
	put_sample(&b, 2, 0, 30, 1, stack_b, 2);
	assert_int_equal(apply(&c, &b), 0);
	assert_true(s.v[0].inuse_bytes == 10 && s.n == 1);
	assert_true(c.v[0].inuse_bytes == 0 && c.n == 2);
	assert_non_null(sites_module_of(&c, 0x401234));
	sites_reset(&c);
	assert_int_equal(c.n, 0);
	assert_null(sites_module_of(&c, 0x401234));
	sites_free(&c);
	sites_free(&s);
}

/* Modules: the latest announced holding an address; the same one twice
 * is kept once; one whose end is not past its start is refused. */
static void sites__modules__latest_wins(void **state)
{
	struct sites s;
	struct words b = { .n = 0 };
	(void)state;
	sites_init(&s);
	put_module(&b, 0, 0x400000, 0x500000, "/old");
	put_module(&b, 0, 0x400000, 0x500000, "/old");
	put_module(&b, 0x7f00, 0x480000, 0x490000, "/lib/new.so");
	put_module(&b, 0, 0x900000, 0x900000, "/empty");
	assert_int_equal(apply(&s, &b), 0);
	assert_int_equal(s.nmods, 2);
	assert_int_equal(s.refused, 1);
	const struct sites_module *m = sites_module_of(&s, 0x481000);
	assert_non_null(m);
	assert_int_equal(m->bias, 0x7f00);
	assert_memory_equal(&s.names[m->path], "/lib/new.so", m->len);
	m = sites_module_of(&s, 0x401000);
	assert_memory_equal(&s.names[m->path], "/old", m->len);
	assert_null(sites_module_of(&s, 0x500000));
	sites_free(&s);
}

/* The one set of hashes (alloc/common/hash.h) the sites, the symbols, top
 * and the guests' tables share: FNV-1a's published vectors, and the values
 * each copy it replaced computed (Python, each copy's arithmetic). */
static void hash__values_as_the_copies_had_them(void **state)
{
	(void)state;
	assert_true(hash_fnv1a64_str("") == 0xcbf29ce484222325ULL);
	assert_true(hash_fnv1a64_str("a") == 0xaf63dc4c8601ec8cULL);
	assert_true(hash_fnv1a64_str("foobar") == 0x85944171f73967e8ULL);
	assert_true(hash_fnv1a64("foobar!", 6) == 0x85944171f73967e8ULL);
	assert_true(hash_fnv1a32_str("a") == 0xe40c292cu);
	assert_true(hash_fnv1a32_str("foobar") == 0xbf9cf968u);
	assert_true(hash_mix64(1) == 0x5692161d100b05e5ULL);
	assert_true(hash_mix64(0x7f0012345678ULL) == 0x85c81367a6729464ULL);
	assert_true(hash_fib64(0x7f0012345678ULL) == 0x8514e2915edd37d8ULL);
	assert_true(hash_fib32(12345) == 0xa12cca31u);
	assert_true(hash_knuth32(12345) == 0xa12b4869u);
}

/* The tracer's one growth (user/util/grow.h), which the sites' arrays use:
 * doubled from its first capacity, untouched when there is room, and
 * refused without a change when the size would pass SIZE_MAX. */
static void grow__doubles_and_refuses_an_overflow(void **state)
{
	uint32_t *a = NULL, *was;
	size_t cap = 0;
	(void)state;
	assert_int_equal(grow((void **)&a, &cap, 1, sizeof(*a), 16), 0);
	assert_int_equal(cap, 16);
	a[15] = 7;
	was = a;
	assert_int_equal(grow((void **)&a, &cap, 16, sizeof(*a), 16), 0);
	assert_ptr_equal(a, was);
	assert_int_equal(cap, 16);
	assert_int_equal(grow((void **)&a, &cap, 17, sizeof(*a), 16), 0);
	assert_int_equal(cap, 32);
	assert_int_equal(grow((void **)&a, &cap, 100, sizeof(*a), 16), 0);
	assert_int_equal(cap, 128);
	assert_int_equal(a[15], 7);
	was = a;
	/* the element count doubled past SIZE_MAX, then the bytes past it */
	assert_int_equal(grow((void **)&a, &cap, SIZE_MAX, sizeof(*a), 16), -ENOMEM);
	assert_int_equal(grow((void **)&a, &cap, SIZE_MAX / 4, sizeof(*a), 16), -ENOMEM);
	assert_ptr_equal(a, was);
	assert_int_equal(cap, 128);
	free(a);
	a = NULL;
	cap = 0;
	assert_int_equal(grow((void **)&a, &cap, 2, SIZE_MAX / 2 + 1, 1), -ENOMEM);
	assert_null(a);
	assert_int_equal(cap, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sites__weight__unbiased_scaling),
		cmocka_unit_test(sites__sample_and_free__site_figures),
		cmocka_unit_test(sites__free_before_its_sample__not_in_use),
		cmocka_unit_test(sites__groups_split_and_bad_records_refused),
		cmocka_unit_test(sites__record_cut_short__refused),
		cmocka_unit_test(sites__copy_is_independent_and_reset_empties),
		cmocka_unit_test(sites__modules__latest_wins),
		cmocka_unit_test(hash__values_as_the_copies_had_them),
		cmocka_unit_test(grow__doubles_and_refuses_an_overflow),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
