// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * user/probes/heap_rings.c against a ring this test maps itself and plays the
 * producer of: tally maps it again through /proc/self/map_files (root), takes
 * it, and hands its slots and the BPF ring's batches to the callback in the
 * order of their records, around gaps, forks and execs.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "../user/probes/heap_rings.h"

#define HEAP 7
#define KEY 5

/* What the callback saw, in order. */
static struct seen {
	uint64_t seq;
	uint32_t count, pid;
	uint64_t ts;
} seen[64];
static unsigned nseen;

static int on_msg(void *ctx, const void *data, size_t len)
{
	const struct tally_msg_batch *m = data;

	(void)ctx;
	assert_true(len >= offsetof(struct tally_msg_batch, batch.words));
	assert_int_equal(m->hdr.kind, TALLY_MSG_BATCH);
	/* (a count past a batch is read no further than one: the model refuses it) */
	uint32_t c = m->batch.count <= TALLY_BATCH_WORDS ? m->batch.count : TALLY_BATCH_WORDS;
	assert_int_equal(m->bytes, offsetof(struct tally_batch, words) + c * 8);
	assert_true(nseen < 64);
	seen[nseen++] =
		(struct seen){ m->batch.seq_first, m->batch.count, m->hdr.pid, m->hdr.ts_ns };
	return 0;
}

struct fixture {
	struct tally_ring *ring;
	struct heap_rings *r;
	uint32_t next; /* the producer's next slot */
};

static void batch_init(struct tally_batch *b, uint64_t seq, uint32_t count)
{
	b->magic = TALLY_BATCH_MAGIC;
	b->version = TALLY_BATCH_VERSION;
	b->source = TALLY_SRC_ALLOC;
	b->tid = (uint32_t)getpid();
	b->heap_id = HEAP;
	b->seq_first = seq;
	b->count = count;
	for (uint32_t i = 0; i < count; i++)
		b->words[i] = tally_ev_word(TALLY_EV_ALLOC, 0, 16, 16);
}

/* A batch through the BPF ring, as the loader sees it: before the callback. */
static struct tally_msg_batch bpf_msg;
static int bpf_batch(struct fixture *f, uint16_t kind, uint64_t seq, uint32_t count)
{
	memset(&bpf_msg, 0, sizeof(bpf_msg));
	bpf_msg.hdr = (struct tally_msg){ .kind = kind, .pid = (uint32_t)getpid(), .ts_ns = 1 };
	batch_init(&bpf_msg.batch, seq, count);
	bpf_msg.bytes = (uint32_t)(offsetof(struct tally_batch, words) + count * 8);
	return heap_rings_before(f->r, &bpf_msg,
				 offsetof(struct tally_msg_batch, batch.words) + count * 8);
}

static void announce(struct fixture *f, uint64_t seq, uint32_t len)
{
	struct tally_ev e = { TALLY_EV_RING, 0, 0, len, (uintptr_t)f->ring };
	uint32_t n = 0;

	memset(&bpf_msg, 0, sizeof(bpf_msg));
	bpf_msg.hdr = (struct tally_msg){ .kind = TALLY_MSG_BATCH, .pid = (uint32_t)getpid() };
	batch_init(&bpf_msg.batch, seq, 0);
	tally_ev_put(bpf_msg.batch.words, &n, &e);
	bpf_msg.batch.count = n;
	bpf_msg.bytes = (uint32_t)(offsetof(struct tally_batch, words) + n * 8);
	assert_int_equal(heap_rings_before(f->r, &bpf_msg, sizeof(bpf_msg)), 0);
}

/* The producer's side (alloc/common/ring.c's ring_put). */
static void put(struct fixture *f, uint64_t seq, uint32_t count, uint64_t ts)
{
	assert_int_equal(f->ring->full[f->next], 0);
	batch_init(&f->ring->slot[f->next], seq, count);
	f->ring->ts_ns[f->next] = ts;
	__atomic_store_n(&f->ring->full[f->next], 1, __ATOMIC_RELEASE);
	f->next = (f->next + 1) % TALLY_RING_SLOTS;
}

static int setup(void **state)
{
	static struct fixture f;
	void *p = mmap(NULL, TALLY_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS,
		       -1, 0);

	assert_true(p != MAP_FAILED);
	f.ring = p;
	f.ring->magic = TALLY_RING_MAGIC;
	f.ring->version = TALLY_RING_VERSION;
	f.ring->slots = TALLY_RING_SLOTS;
	f.ring->heap_id = HEAP;
	f.ring->announced = KEY;
	f.next = 0;
	f.r = heap_rings_new(on_msg, NULL);
	assert_non_null(f.r);
	nseen = 0;
	*state = &f;
	return 0;
}

static int teardown(void **state)
{
	struct fixture *f = *state;

	heap_rings_free(f->r);
	munmap(f->ring, TALLY_RING_BYTES);
	return 0;
}

static void rings__announced_ring_is_taken_and_read_in_order(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES);
	assert_true(heap_rings_active(f->r));
	assert_int_equal(f->ring->accepted, KEY);
	put(f, 102, 4, 10);
	put(f, 106, 4, 11);
	assert_int_equal(heap_rings_drain(f->r, false), 2);
	assert_int_equal(nseen, 2);
	assert_int_equal(seen[0].seq, 102);
	assert_int_equal(seen[1].seq, 106);
	/* the slot's own time, the process's pid */
	assert_int_equal(seen[0].ts, 10);
	assert_int_equal(seen[0].pid, getpid());
	assert_int_equal(f->ring->full[0], 0);
	assert_int_equal(f->ring->full[1], 0);
	assert_int_equal(heap_rings_read(f->r), 2);
}

static void rings__a_slot_past_a_gap_waits_for_the_bpf_ring_batch(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES);
	put(f, 102, 4, 10);
	/* 106..109 went through the probe (its slot was full then) */
	put(f, 110, 4, 12);
	assert_int_equal(heap_rings_drain(f->r, false), 1);
	assert_int_equal(f->ring->full[1], 1);
	/* the BPF ring's batch: the ring's older ones first (none now) */
	assert_int_equal(bpf_batch(f, TALLY_MSG_BATCH, 106, 4), 0);
	assert_int_equal(nseen, 1);
	assert_int_equal(heap_rings_drain(f->r, false), 1);
	assert_int_equal(seen[1].seq, 110);
	/* a gap nobody fills (a batch the BPF ring lost): at the end */
	put(f, 200, 4, 13);
	assert_int_equal(heap_rings_drain(f->r, false), 0);
	assert_int_equal(heap_rings_drain(f->r, true), 1);
	assert_int_equal(seen[2].seq, 200);
}

static void rings__bpf_batch_comes_after_the_older_slots(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES);
	put(f, 102, 4, 10);
	put(f, 106, 4, 11);
	/* the ring was full for 110 (it is not, here: the order is the point) */
	assert_int_equal(bpf_batch(f, TALLY_MSG_BATCH, 110, 4), 0);
	assert_int_equal(nseen, 2);
	assert_int_equal(seen[0].seq, 102);
	assert_int_equal(seen[1].seq, 106);
	put(f, 114, 4, 12);
	assert_int_equal(heap_rings_drain(f->r, false), 1);
	assert_int_equal(seen[2].seq, 114);
}

static void rings__fork_takes_the_parents_slots_from_before_it(void **state)
{
	struct fixture *f = *state;
	struct tally_msg_thread fork_msg = {
		.hdr = { .kind = TALLY_MSG_PROC_FORK, .pid = 99999, .ts_ns = 20 },
		.pid = (uint32_t)getpid(),
	};

	announce(f, 100, TALLY_RING_BYTES);
	put(f, 102, 4, 10);
	put(f, 106, 4, 30);
	assert_int_equal(heap_rings_before(f->r, &fork_msg, sizeof(fork_msg)), 0);
	assert_int_equal(nseen, 1);
	assert_int_equal(seen[0].seq, 102);
	assert_int_equal(heap_rings_drain(f->r, false), 1);
}

static void rings__exec_and_exit_read_all_and_let_go(void **state)
{
	struct fixture *f = *state;
	struct tally_msg_thread m = {
		.hdr = { .kind = TALLY_MSG_THREAD_NAME,
			 .flags = TALLY_THREAD_EXEC,
			 .pid = (uint32_t)getpid() },
	};

	announce(f, 100, TALLY_RING_BYTES);
	put(f, 102, 4, 10);
	put(f, 120, 4, 11); /* past a gap: all the same, the image is gone */
	assert_int_equal(heap_rings_before(f->r, &m, sizeof(m)), 0);
	assert_int_equal(nseen, 2);
	assert_false(heap_rings_active(f->r));
}

static void rings__another_tracers_ring_is_not_taken_and_counted(void **state)
{
	struct fixture *f = *state;

	f->ring->accepted = KEY; /* taken already */
	announce(f, 100, TALLY_RING_BYTES);
	assert_false(heap_rings_active(f->r));
	assert_int_equal(heap_rings_missed(f->r), 1);
}

static void rings__a_tracer_that_lets_go_leaves_the_ring_untaken(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES);
	assert_int_equal(f->ring->accepted, KEY);
	heap_rings_free(f->r);
	/* the process puts nothing more in it: a later tracer that cannot map
	 * it gets its batches through the probe */
	assert_int_equal(f->ring->accepted, 0);
	f->r = heap_rings_new(on_msg, NULL);
	assert_non_null(f->r);
}

static void rings__a_bad_announcement_maps_nothing(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES - 4096); /* not the ring's length */
	assert_false(heap_rings_active(f->r));
	f->ring->magic = 0;
	announce(f, 100, TALLY_RING_BYTES);
	assert_false(heap_rings_active(f->r));
	assert_int_equal(f->ring->accepted, 0);
}

static void rings__a_hostile_slot_count_reads_no_further_than_a_batch(void **state)
{
	struct fixture *f = *state;

	announce(f, 100, TALLY_RING_BYTES);
	put(f, 102, 4, 10);
	f->ring->slot[0].count = 1u << 30; /* hostile */
	assert_int_equal(heap_rings_drain(f->r, false), 1);
	assert_int_equal(seen[0].count, 1u << 30);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(rings__announced_ring_is_taken_and_read_in_order,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			rings__a_slot_past_a_gap_waits_for_the_bpf_ring_batch, setup, teardown),
		cmocka_unit_test_setup_teardown(rings__bpf_batch_comes_after_the_older_slots, setup,
						teardown),
		cmocka_unit_test_setup_teardown(rings__fork_takes_the_parents_slots_from_before_it,
						setup, teardown),
		cmocka_unit_test_setup_teardown(rings__exec_and_exit_read_all_and_let_go, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			rings__another_tracers_ring_is_not_taken_and_counted, setup, teardown),
		cmocka_unit_test_setup_teardown(
			rings__a_tracer_that_lets_go_leaves_the_ring_untaken, setup, teardown),
		cmocka_unit_test_setup_teardown(rings__a_bad_announcement_maps_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			rings__a_hostile_slot_count_reads_no_further_than_a_batch, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
