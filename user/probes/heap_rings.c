// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The shared rings of traced heaps (heap_rings.h). A heap's batches reach
 * tally two ways: through its ring, and through tally:batch when its next
 * slot was still full. Both carry seq_first, the position of their first
 * record in the heap's stream, so the model gets them in order: a ring's
 * slot is delivered only when it is the next batch of its heap, and a batch
 * from the BPF ring only after the ring's older ones. A gap that lasts (a
 * batch the BPF ring lost, counted there) is passed after GAP_WAIT_NS.
 *
 * The process's memory is untrusted input: a slot is copied out before it
 * is looked at, and the model checks the copy as it checks any batch. The
 * mapping is of the process's own pages (shared anonymous memory, which the
 * process cannot truncate), through /proc/PID/map_files: that needs
 * CAP_SYS_ADMIN (or CAP_CHECKPOINT_RESTORE); without it the ring is never
 * taken and the process keeps handing its batches to the probe.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "../util/clock.h"
#include "heap_rings.h"
#include "../util/grow.h"

#define GAP_WAIT_NS (200ULL * 1000 * 1000)

struct hring {
	uint32_t pid;
	uint64_t heap_id;
	struct tally_ring *map;
	uint32_t cursor;   /* the slot to read next */
	uint64_t next_seq; /* where the heap's next batch starts */
	uint64_t gap_ns;   /* since when the next slot waits for a batch of the BPF ring */
	uint64_t key;	   /* what this tracer wrote in its `accepted` */
	uint64_t read;	   /* batches delivered from it */
};

/* Batches read from the rings of a process, once they are gone: its
 * figures say how many came in place (heap_rings_read_pid). */
struct pid_read {
	uint32_t pid;
	uint64_t n;
};

struct heap_rings {
	loader_msg_fn fn;
	void *ctx;
	struct hring *v;
	size_t n, cap;
	uint64_t missed, read;
	struct pid_read *gone; /* by process, of the rings dropped */
	size_t ngone, capgone;
	bool warned;
	bool off;		    /* TALLY_HEAP_RINGS=off: every batch through the BPF ring */
	struct tally_msg_batch msg; /* a slot's copy, as the BPF ring would carry it */
};

struct heap_rings *heap_rings_new(loader_msg_fn fn, void *ctx)
{
	struct heap_rings *r = calloc(1, sizeof(*r));

	if (r) {
		const char *e = getenv("TALLY_HEAP_RINGS");
		r->fn = fn;
		r->ctx = ctx;
		r->off = e && !strcmp(e, "off");
	}
	return r;
}

/* A dropped ring's count, kept by process (not kept when out of memory:
 * then only its figures' batches_in_place are short). */
static void gone_add(struct heap_rings *r, uint32_t pid, uint64_t n)
{
	for (size_t i = 0; i < r->ngone; i++)
		if (r->gone[i].pid == pid) {
			r->gone[i].n += n;
			return;
		}
	if (!n)
		return;
	if (grow((void **)&r->gone, &r->capgone, r->ngone + 1, sizeof(*r->gone), 8))
		return;
	r->gone[r->ngone++] = (struct pid_read){ .pid = pid, .n = n };
}

uint64_t heap_rings_read_pid(struct heap_rings *r, uint32_t pid, bool forget)
{
	uint64_t n = 0;

	for (size_t i = 0; r && i < r->n; i++)
		n += r->v[i].pid == pid ? r->v[i].read : 0;
	for (size_t i = 0; r && i < r->ngone; i++) {
		if (r->gone[i].pid != pid)
			continue;
		n += r->gone[i].n;
		/* it has ended: a later process with its pid counts from zero */
		if (forget)
			r->gone[i] = r->gone[--r->ngone];
		break;
	}
	return n;
}

static void ring_drop(struct heap_rings *r, size_t i)
{
	/* let go: the process puts nothing more in it until a tracer takes it
	 * again (a later tracer that cannot map it gets every batch through
	 * the probe, rather than a ring nobody reads) */
	uint64_t key = r->v[i].key;
	__atomic_compare_exchange_n(&r->v[i].map->accepted, &key, 0, false, __ATOMIC_RELEASE,
				    __ATOMIC_RELAXED);
	munmap(r->v[i].map, TALLY_RING_BYTES);
	gone_add(r, r->v[i].pid, r->v[i].read);
	r->v[i] = r->v[--r->n];
}

void heap_rings_free(struct heap_rings *r)
{
	if (!r)
		return;
	while (r->n)
		ring_drop(r, 0);
	free(r->v);
	free(r->gone);
	free(r);
}

uint64_t heap_rings_missed(const struct heap_rings *r)
{
	return r ? r->missed : 0;
}

uint64_t heap_rings_read(const struct heap_rings *r)
{
	return r ? r->read : 0;
}

bool heap_rings_active(const struct heap_rings *r)
{
	return r && r->n;
}

static struct hring *ring_find(struct heap_rings *r, uint32_t pid, uint64_t heap_id)
{
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].pid == pid && r->v[i].heap_id == heap_id)
			return &r->v[i];
	return NULL;
}

/* Deliver the ring's full slots in order, up to (not including) the batch
 * that starts at `upto` or one filled at upto_ns or later; past a gap only
 * when `all` or the gap has lasted. The number delivered, or the callback's
 * stop or error. */
static int ring_take(struct heap_rings *r, struct hring *h, uint64_t upto, uint64_t upto_ns,
		     bool all)
{
	const size_t hdr = offsetof(struct tally_batch, words);
	int taken = 0, stop = 0;

	while (!stop && __atomic_load_n(&h->map->full[h->cursor], __ATOMIC_ACQUIRE)) {
		struct tally_batch *b = &r->msg.batch;
		const struct tally_batch *s = &h->map->slot[h->cursor];
		uint64_t ts = __atomic_load_n(&h->map->ts_ns[h->cursor], __ATOMIC_RELAXED);
		memcpy(b, s, hdr);
		if (b->seq_first >= upto || ts >= upto_ns)
			break;
		if (b->seq_first > h->next_seq && !all) {
			uint64_t now = clock_now_ns();
			if (!h->gap_ns)
				h->gap_ns = now;
			if (now - h->gap_ns < GAP_WAIT_NS)
				break;
		}
		uint32_t count = b->count <= TALLY_BATCH_WORDS ? b->count : TALLY_BATCH_WORDS;
		memcpy(b->words, s->words, (size_t)count * sizeof(b->words[0]));
		__atomic_store_n(&h->map->full[h->cursor], 0, __ATOMIC_RELEASE);
		h->cursor = (h->cursor + 1) % TALLY_RING_SLOTS;
		h->gap_ns = 0;
		if (b->seq_first + count > h->next_seq)
			h->next_seq = b->seq_first + count;
		r->msg.hdr = (struct tally_msg){
			.kind = TALLY_MSG_BATCH, .tid = b->tid, .ts_ns = ts, .pid = h->pid
		};
		r->msg.bytes = (uint32_t)(hdr + (size_t)count * sizeof(b->words[0]));
		r->msg.pad = 0;
		int err = r->fn(r->ctx, &r->msg,
				offsetof(struct tally_msg_batch, batch) + r->msg.bytes);
		taken++;
		r->read++;
		h->read++;
		if (err < 0)
			stop = err;
	}
	return stop ? stop : taken;
}

/* Map an announced ring and take it: the process writes nothing in it
 * until its `accepted` says so. */
static void ring_announced(struct heap_rings *r, uint32_t pid, const struct tally_batch *b,
			   const struct tally_ev *e)
{
	char path[64];
	uint64_t addr = e->bytes;

	if (r->off || e->n != TALLY_RING_BYTES || addr % 4096 || addr + TALLY_RING_BYTES < addr)
		return;
	snprintf(path, sizeof(path), "/proc/%u/map_files/%llx-%llx", pid, (unsigned long long)addr,
		 (unsigned long long)(addr + TALLY_RING_BYTES));
	int fd = open(path, O_RDWR | O_CLOEXEC);
	if (fd < 0)
		return; /* not allowed, or gone: the probe goes on carrying its batches */
	struct tally_ring *map =
		mmap(NULL, TALLY_RING_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (map == MAP_FAILED)
		return;
	uint64_t key = __atomic_load_n(&map->announced, __ATOMIC_ACQUIRE), none = 0;
	if (map->magic != TALLY_RING_MAGIC || map->version != TALLY_RING_VERSION ||
	    map->slots != TALLY_RING_SLOTS || map->heap_id != b->heap_id || !key)
		goto unmap;
	/* an earlier ring of this heap (announced again to a new tracer, or
	 * before an exec): what it holds first */
	struct hring *old = ring_find(r, pid, b->heap_id);
	if (old) {
		ring_take(r, old, UINT64_MAX, UINT64_MAX, true);
		ring_drop(r, (size_t)(old - r->v));
	}
	if (!__atomic_compare_exchange_n(&map->accepted, &none, key, false, __ATOMIC_ACQ_REL,
					 __ATOMIC_ACQUIRE)) {
		/* another tracer took it: the batches it carries are not ours */
		if (!r->warned)
			fprintf(stderr,
				"tally: another tracer reads process %u's records in place: "
				"this one's figures lack them\n",
				pid);
		r->warned = true;
		r->missed++;
		goto unmap;
	}
	if (grow((void **)&r->v, &r->cap, r->n + 1, sizeof(*r->v), 8)) {
		/* taken, and never read: its batches are lost, and said so */
		r->missed++;
		goto unmap;
	}
	r->v[r->n++] = (struct hring){ .pid = pid,
				       .heap_id = b->heap_id,
				       .map = map,
				       .next_seq = b->seq_first + b->count,
				       .key = key };
	return;
unmap:
	munmap(map, TALLY_RING_BYTES);
}

/* What pid's rings hold from before upto_ns; gone: the process (or its
 * image) is, and its rings go. */
static int rings_of(struct heap_rings *r, uint32_t pid, uint64_t upto_ns, bool gone)
{
	int stop = 0;

	for (size_t i = 0; i < r->n;) {
		if (r->v[i].pid != pid) {
			i++;
			continue;
		}
		int err = ring_take(r, &r->v[i], UINT64_MAX, upto_ns, true);
		if (err < 0 && !stop)
			stop = err;
		if (gone)
			ring_drop(r, i);
		else
			i++;
	}
	return stop;
}

int heap_rings_before(struct heap_rings *r, const void *data, size_t len)
{
	const struct tally_msg *m = data;

	if (len < sizeof(*m))
		return 0;
	if (m->kind == TALLY_MSG_BATCH && len >= offsetof(struct tally_msg_batch, batch.words)) {
		const struct tally_batch *b = &((const struct tally_msg_batch *)data)->batch;
		/* the header's heap and seq_first are all that orders the two
		 * transports: a batch of the wrong version or count still takes
		 * its heap's older ring batches first, and the model refuses it */
		__u32 sources = TALLY_SRC_BIT(TALLY_SRC_ALLOC) | TALLY_SRC_BIT(TALLY_SRC_INTERPOSE);
		size_t valid = len - offsetof(struct tally_msg_batch, batch);
		enum tally_batch_fault f = tally_batch_check(b, valid, sources);
		if (f == TALLY_BATCH_FAULT_SHORT || f == TALLY_BATCH_FAULT_MAGIC ||
		    f == TALLY_BATCH_FAULT_SOURCE)
			return 0;
		/* an announcement is the first record of a batch of its own */
		struct tally_ev e;
		uint32_t pos = 0;
		if (b->count == 2 && len >= offsetof(struct tally_msg_batch, batch.words) + 16 &&
		    !tally_ev_next(b->words, 2, &pos, &e) && e.type == TALLY_EV_RING) {
			ring_announced(r, m->pid, b, &e);
			return 0;
		}
		struct hring *h = r->n ? ring_find(r, m->pid, b->heap_id) : NULL;
		if (!h)
			return 0;
		int err = ring_take(r, h, b->seq_first, UINT64_MAX, true);
		uint32_t count = b->count <= TALLY_BATCH_WORDS ? b->count : TALLY_BATCH_WORDS;
		if (b->seq_first + count > h->next_seq)
			h->next_seq = b->seq_first + count;
		return err < 0 ? err : 0;
	}
	if (!r->n)
		return 0;
	if (m->kind == TALLY_MSG_STATS)
		return rings_of(r, m->pid, UINT64_MAX, false);
	if ((m->kind == TALLY_MSG_THREAD_EXIT && (m->flags & TALLY_THREAD_GROUP_DEAD)) ||
	    (m->kind == TALLY_MSG_THREAD_NAME && (m->flags & TALLY_THREAD_EXEC)))
		return rings_of(r, m->pid, UINT64_MAX, true);
	/* a child's model starts as a copy of its parent's at the fork: the
	 * parent's batches from before it go in first */
	if (m->kind == TALLY_MSG_PROC_FORK && len >= sizeof(struct tally_msg_thread))
		return rings_of(r, ((const struct tally_msg_thread *)data)->pid, m->ts_ns, false);
	return 0;
}

int heap_rings_drain(struct heap_rings *r, bool all)
{
	int taken = 0;

	for (size_t i = 0; r && i < r->n; i++) {
		int n = ring_take(r, &r->v[i], UINT64_MAX, UINT64_MAX, all);
		if (n < 0)
			return n;
		taken += n;
	}
	return taken;
}
