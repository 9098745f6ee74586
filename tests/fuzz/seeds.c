// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Writes the fuzzers' seed inputs (tests/fuzz/corpus/{remote,decoder}/seed-*),
 * built from the real structures so that they follow the layouts: `make
 * fuzz-seeds` after a change to alloc/internal.h or bpf/contract/tally_events.h.
 *
 * A remote seed is a target's memory seen through fuzz_remote.c's wrap-around
 * (address A is byte A % size), so each object is placed by its address and
 * every byte that matters claims its residue; a size where two of them would
 * claim one residue with different values is passed over for the next.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../alloc/internal.h"
#include "../../bpf/contract/sdk_registry.h"
#include "../../user/os/remote.h"

/* The seeds that reach the walk's bounds are for the fuzz build's (Makefile:
 * FUZZ_BOUNDS), which fit an input; the product's do not. */
#if REMOTE_MAX_HEAPS > 1024 || REMOTE_MAX_SEGMENTS > 1024
#error "build with the fuzz build's bounds (Makefile: FUZZ_BOUNDS)"
#endif

#define MAX_IMAGE 4096

static const char *out_dir;

static int write_seed(const char *kind, const char *name, const void *p, size_t len)
{
	char path[4096];
	FILE *f;

	if (mkdir(out_dir, 0755) && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s", out_dir, kind);
	if (mkdir(path, 0755) && errno != EEXIST)
		return -errno;
	snprintf(path, sizeof(path), "%s/%s/seed-%s", out_dir, kind, name);
	f = fopen(path, "wb");
	if (!f)
		return -errno;
	if (fwrite(p, 1, len, f) != len) {
		fclose(f);
		return -EIO;
	}
	return fclose(f) ? -errno : 0;
}

/* The remote fuzzer's memory */

struct image {
	uint8_t b[MAX_IMAGE];
	bool claimed[MAX_IMAGE];
	size_t n;
	bool clash; /* two values for one residue: this size does not work */
};

static void put(struct image *im, uint64_t addr, const void *p, size_t len)
{
	const uint8_t *v = p;

	for (size_t i = 0; i < len; i++) {
		size_t r = (addr + i) % im->n;
		if (im->claimed[r] && im->b[r] != v[i])
			im->clash = true;
		im->b[r] = v[i];
		im->claimed[r] = true;
	}
}

static void put64(struct image *im, uint64_t addr, uint64_t v)
{
	put(im, addr, &v, sizeof(v));
}

/* A field of an object at `at`, by its offset in a local copy. */
#define PUT_FIELD(im, at, obj, field)                                                              \
	put(im, (at) + ((const char *)&(obj)->field - (const char *)(obj)), &(obj)->field,         \
	    sizeof((obj)->field))

/* The fuzzer's control bytes (fuzz_remote.c), which are memory too. */
struct control {
	uint64_t heaps_addr;
	uint8_t flags, fail_at, move_after, move_by;
	uint64_t fault[3][2];
};

static void put_control(struct image *im, const struct control *c)
{
	put64(im, 0, c->heaps_addr);
	put(im, 8, &c->flags, 1);
	put(im, 9, &c->fail_at, 1);
	put(im, 10, &c->move_after, 1);
	put(im, 11, &c->move_by, 1);
	for (unsigned i = 0; i < (c->flags & 3u); i++) {
		put64(im, 16 + 16 * i, c->fault[i][0]);
		put64(im, 24 + 16 * i, c->fault[i][1]);
	}
}

#define HEAPS_AT 0x7f0000012340ULL /* &tally_heaps */
#define HEAP1 0x7f1000000000ULL
#define HEAP2 0x7f1000100000ULL
#define SEG1 0x7f2000000000ULL
#define SEG2 0x7f2000400000ULL
#define META 0x7f3000000000ULL

/* A heap: the fields the reader uses, the rest whatever the image holds. */
static void put_heap(struct image *im, uint64_t at, uint64_t id, uint64_t next, uint64_t segs,
		     uint32_t count)
{
	static struct heap h; /* about 50 KiB: not on the stack */

	memset(&h, 0, sizeof(h));
	h.id = id;
	h.all_next = (struct heap *)(uintptr_t)next;
	h.segs = (struct segment *)(uintptr_t)segs;
	h.tid = (uint32_t)(1000 + id);
	h.seq = 100 * id;
	h.batch.count = count;
	h.stats.mapped = SEGMENT_SIZE;
	h.group_counters[1].alloc_bytes = 96;
	h.group_counters[1].alloc_objs = 2;
	PUT_FIELD(im, at, &h, id);
	PUT_FIELD(im, at, &h, all_next);
	PUT_FIELD(im, at, &h, segs);
	PUT_FIELD(im, at, &h, tid);
	PUT_FIELD(im, at, &h, seq);
	PUT_FIELD(im, at, &h, batch.count);
	PUT_FIELD(im, at, &h, stats.mapped);
	PUT_FIELD(im, at, &h, group_counters[1]);
	for (uint32_t i = 0; i < count && i < 4; i++) {
		h.batch.words[i] = tally_ev_word(i & 1 ? TALLY_EV_FREE : TALLY_EV_ALLOC, 1, 48, 64);
		PUT_FIELD(im, at, &h, batch.words[i]);
	}
}

/* A segment of heap `heap`: span 1 with its metadata inline, span 2 with
 * it at META, every other span unassigned. */
static void put_segment(struct image *im, uint64_t at, uint64_t heap, uint64_t next)
{
	static struct segment s;
	uint16_t meta[8] = { 49, 0, 33, 0, 17, 0, 0, 0 };

	memset(&s, 0, sizeof(s));
	s.heap = (struct heap *)(uintptr_t)heap;
	s.next = (struct segment *)(uintptr_t)next;
	PUT_FIELD(im, at, &s, heap);
	PUT_FIELD(im, at, &s, next);
	for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
		struct span *sp = &s.spans[i];
		uint64_t sp_at = at + i * sizeof(*sp);
		if (i > 2) {
			PUT_FIELD(im, sp_at, sp, state); /* unassigned */
			continue;
		}
		sp->state = SPAN_ACTIVE;
		sp->group = 1;
		sp->size = i == 1 ? 4096 : 64;
		sp->bump = i == 1 ? 4 : 8;
		sp->used = i == 1 ? 2 : 3;
		sp->nalloc = 4;
		sp->abytes = 96;
		sp->meta_skip = 0;
		uint64_t cells = i == 1 ? sp_at + offsetof(struct span, inline_meta) : META;
		sp->cells = (uint16_t *)(uintptr_t)cells;
		if (i == 1)
			memcpy(sp->inline_meta, meta, sizeof(uint16_t) * sp->bump);
		else
			put(im, META, meta, sizeof(uint16_t) * sp->bump);
		PUT_FIELD(im, sp_at, sp, state);
		PUT_FIELD(im, sp_at, sp, group);
		PUT_FIELD(im, sp_at, sp, size);
		PUT_FIELD(im, sp_at, sp, bump);
		PUT_FIELD(im, sp_at, sp, used);
		PUT_FIELD(im, sp_at, sp, nalloc);
		PUT_FIELD(im, sp_at, sp, abytes);
		PUT_FIELD(im, sp_at, sp, acc);
		PUT_FIELD(im, sp_at, sp, xbytes);
		PUT_FIELD(im, sp_at, sp, ndrained);
		PUT_FIELD(im, sp_at, sp, meta_skip);
		PUT_FIELD(im, sp_at, sp, cells);
		if (i == 1)
			PUT_FIELD(im, sp_at, sp, inline_meta);
	}
}

/* x with x % size == r and x % align == 0 (align a power of two): with g
 * the largest power of two dividing both, x = align * q + align * size / g * t
 * for the q that gives r and any t; none (a clash) when g does not divide r. */
static uint64_t residue_aligned(struct image *im, uint64_t r, uint64_t align, uint64_t t)
{
	uint64_t g = 1, m, a;

	while (!(im->n % (g * 2)) && g * 2 <= align)
		g *= 2;
	r %= im->n;
	if (r % g) {
		im->clash = true;
		return 0;
	}
	m = im->n / g;
	a = (align / g) % m;
	/* a's inverse modulo m (m is odd, a a power of two), once per size */
	static uint64_t inv_n, inv_align, inv;
	if (inv_n != im->n || inv_align != align) {
		inv_n = im->n;
		inv_align = align;
		for (inv = 0; inv < m && (a * inv) % m != 1 % m; inv++)
			;
	}
	return align * ((r / g) * inv % m) + align * m * t;
}

/* REMOTE_MAX_HEAPS + 1 heaps, each 8 bytes on from the last in the image
 * (their address 8 more modulo its size): one's all_next and another's id
 * share a word, ids falling as the list goes. The walk stops at the bound. */
static void put_many_heaps(struct image *im)
{
	const uint64_t r0 = 1024;
	struct heap *h = NULL;
	/* heap k's id is the word of heap k + d's all_next */
	uint64_t d = (offsetof(struct heap, id) - offsetof(struct heap, all_next)) / 8;
	uint32_t zero = 0;

	_Static_assert((offsetof(struct heap, id) - offsetof(struct heap, all_next)) % 8 == 0,
		       "id and all_next a whole number of words apart");
#define HEAP_K(k) residue_aligned(im, r0 + 8 * (k), OS_PAGE, REMOTE_MAX_HEAPS + 16 - (k))
	put64(im, HEAPS_AT, HEAP_K(0));
	for (uint64_t k = 0; k < REMOTE_MAX_HEAPS; k++) {
		uint64_t at = HEAP_K(k);
		put64(im, at + offsetof(struct heap, all_next), HEAP_K(k + 1));
		put64(im, at + offsetof(struct heap, id), HEAP_K(k + d + 1));
		put(im, at + offsetof(struct heap, batch.count), &zero, sizeof(h->batch.count));
	}
#undef HEAP_K
}

/* One heap with REMOTE_MAX_SEGMENTS + 1 segments, 16 bytes apart in the
 * image: each one's heap and next words are the next one's padding. Every
 * span state byte lands on a residue that is 0 modulo 16, which therefore
 * holds 0 everywhere: the heap's id is 0x100, and the pointers' low bytes are 0. */
static void put_many_segments(struct image *im)
{
	const uint64_t r0 = 1024;
	uint8_t unassigned = SPAN_UNASSIGNED;
	uint32_t zero = 0;

#define SEG_K(k) residue_aligned(im, r0 + 16 * (k), SEGMENT_SIZE, 1 + (k))
	put64(im, HEAPS_AT & ~0xffULL, HEAP1);
	put64(im, HEAP1 + offsetof(struct heap, id), 0x100);
	put64(im, HEAP1 + offsetof(struct heap, all_next), 0);
	put64(im, HEAP1 + offsetof(struct heap, segs), SEG_K(0));
	put(im, HEAP1 + offsetof(struct heap, batch.count), &zero, sizeof(zero));
	for (uint64_t k = 0; k < REMOTE_MAX_SEGMENTS; k++) {
		uint64_t at = SEG_K(k);
		put64(im, at + offsetof(struct segment, heap), HEAP1);
		put64(im, at + offsetof(struct segment, next), SEG_K(k + 1));
		for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++)
			put(im, at + i * sizeof(struct span) + offsetof(struct span, state),
			    &unassigned, 1);
	}
#undef SEG_K
}

enum remote_seed {
	ONE_HEAP,	 /* a valid heap with one segment and two pending records */
	TWO_HEAPS,	 /* two heaps, each with a segment */
	HEAP_LOOP,	 /* a heap whose next is itself: -ELOOP */
	SEGMENT_LOOP,	 /* a segment whose next is itself: -ELOOP */
	FOREIGN_SEGMENT, /* the second heap's segment names the first: -EPROTO */
	BAD_COUNT,	 /* a batch count past TALLY_BATCH_WORDS: -EPROTO */
	UNMAPPED_META,	 /* span 2's metadata in an unmapped range: -EFAULT */
	TARGET_GONE,	 /* the fourth read says -ESRCH */
	MOVING,		 /* the memory moves after the heap's copy: inconsistent */
	REGISTRY,	 /* a valid SDK registry at the same address */
	MANY_HEAPS,	 /* one heap more than the bound: -E2BIG */
	MANY_SEGMENTS,	 /* one segment more than the bound: -E2BIG */
	REMOTE_SEEDS,
};

static const char *const remote_names[REMOTE_SEEDS] = {
	"one-heap",	   "two-heaps",	      "heap-loop",     "segment-loop",
	"foreign-segment", "bad-batch-count", "unmapped-meta", "target-gone",
	"moving-target",   "registry",	      "many-heaps",    "many-segments",
};

static void build_remote(struct image *im, enum remote_seed k)
{
	struct control c = { .heaps_addr = k == MANY_SEGMENTS ? HEAPS_AT & ~0xffULL : HEAPS_AT };

	switch (k) {
	case UNMAPPED_META:
		c.flags = 1;
		c.fault[0][0] = META;
		c.fault[0][1] = 4096;
		break;
	case TARGET_GONE:
		c.flags = 4;
		c.fail_at = 4;
		break;
	case MOVING:
		c.move_after = 3;
		c.move_by = 8;
		break;
	default:
		break;
	}
	put_control(im, &c);
	switch (k) {
	case REGISTRY: {
		static struct tally_registry reg;
		memset(&reg, 0, sizeof(reg));
		reg.magic = TALLY_REGISTRY_MAGIC;
		reg.version = TALLY_REGISTRY_VERSION;
		reg.ngroups = 3;
		reg.yields[1] = 5;
		put(im, HEAPS_AT, &reg, offsetof(struct tally_registry, yields) + 16);
		put(im, HEAPS_AT + offsetof(struct tally_registry, names[0]), "root", 5);
		put(im, HEAPS_AT + offsetof(struct tally_registry, names[1]), "net", 4);
		put(im, HEAPS_AT + offsetof(struct tally_registry, names[2]), "disk", 5);
		return;
	}
	case MANY_HEAPS:
		put_many_heaps(im);
		return;
	case MANY_SEGMENTS:
		put_many_segments(im);
		return;
	case HEAP_LOOP:
		put64(im, HEAPS_AT, HEAP1);
		put_heap(im, HEAP1, 5, HEAP1, 0, 0);
		return;
	case TWO_HEAPS:
	case FOREIGN_SEGMENT:
		put64(im, HEAPS_AT, HEAP2);
		put_heap(im, HEAP2, 2, HEAP1, SEG2, 1);
		put_segment(im, SEG2, k == FOREIGN_SEGMENT ? HEAP1 : HEAP2, 0);
		put_heap(im, HEAP1, 1, 0, SEG1, 0);
		put_segment(im, SEG1, HEAP1, 0);
		return;
	default:
		put64(im, HEAPS_AT, HEAP1);
		put_heap(im, HEAP1, 1, 0, SEG1, k == BAD_COUNT ? TALLY_BATCH_WORDS + 1 : 2);
		put_segment(im, SEG1, HEAP1, k == SEGMENT_LOOP ? SEG1 : 0);
		return;
	}
}

static int remote_seeds(void)
{
	static struct image im;

	for (int k = 0; k < REMOTE_SEEDS; k++) {
		/* the smallest size from 512 up where nothing clashes */
		for (im.n = 512; im.n <= MAX_IMAGE; im.n++) {
			memset(im.b, 0, sizeof(im.b));
			memset(im.claimed, 0, sizeof(im.claimed));
			im.clash = false;
			build_remote(&im, (enum remote_seed)k);
			if (!im.clash)
				break;
		}
		if (im.n > MAX_IMAGE) {
			fprintf(stderr, "seeds: no size fits remote seed %s\n", remote_names[k]);
			return -E2BIG;
		}
		int err = write_seed("remote", remote_names[k], im.b, im.n);
		if (err)
			return err;
	}
	return 0;
}

/* An empty batch of the CUPTI library's, from thread 100. */
static void cupti_batch(struct tally_msg_batch *m)
{
	memset(m, 0, sizeof(*m));
	m->hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 100, 5, 0, 0 };
	m->batch.magic = TALLY_BATCH_MAGIC;
	m->batch.version = TALLY_BATCH_VERSION;
	m->batch.source = TALLY_SRC_CUPTI;
	m->batch.tid = 100;
}

/* A record whose text follows it in words (a kernel's name, CUPTI's reason). */
static void put_text(struct tally_msg_batch *m, const struct tally_ev *e, const char *text)
{
	tally_ev_put(m->batch.words, &m->batch.count, e);
	memcpy(&m->batch.words[m->batch.count], text, strlen(text));
	m->batch.count += (uint32_t)((strlen(text) + 7) / 8);
}

/* The decoder's input: a flags byte, then chunks (fuzz_decoder.c) */

struct stream {
	uint8_t b[8192];
	size_t len;
};

static void start(struct stream *s, uint8_t flags)
{
	s->b[0] = flags;
	s->len = 1;
}

static void chunk(struct stream *s, unsigned kind, const void *p, size_t len)
{
	uint16_t hdr = (uint16_t)(kind << 14 | len);

	memcpy(s->b + s->len, &hdr, sizeof(hdr));
	memcpy(s->b + s->len + sizeof(hdr), p, len);
	s->len += sizeof(hdr) + len;
}

/* A batch message cut after its records, as the BPF side sends it. */
static void batch(struct stream *s, uint16_t source, uint64_t heap, uint64_t seq, uint32_t tid,
		  const struct tally_ev *recs, unsigned n, uint32_t magic)
{
	static struct tally_msg_batch m;
	size_t hdr = offsetof(struct tally_batch, words);

	memset(&m, 0, sizeof(m));
	m.hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, tid, 1, 0, 0 };
	m.batch.magic = magic;
	m.batch.version = TALLY_BATCH_VERSION;
	m.batch.source = source;
	m.batch.tid = tid;
	m.batch.heap_id = heap;
	m.batch.seq_first = seq;
	for (unsigned i = 0; i < n; i++)
		tally_ev_put(m.batch.words, &m.batch.count, &recs[i]);
	m.bytes = (uint32_t)(hdr + m.batch.count * 8);
	chunk(s, 0, &m, offsetof(struct tally_msg_batch, batch) + m.bytes);
}

/* A batch of heap-profile records (words beyond a record's two): a
 * module, two samples of one stack, a free of one of them. */
static void sample_batch(struct stream *s, uint64_t heap, uint32_t tid)
{
	static struct tally_msg_batch m;
	static const char path[] = "/usr/bin/app";
	const uint64_t pcs[3] = { 0x401234, 0x402345, 0x7f0000001234 };
	const struct tally_ev mod = { TALLY_EV_MODULE, 1, 0, sizeof(path) - 1, 0 };
	size_t hdr = offsetof(struct tally_batch, words);
	__u64 *w = m.batch.words;

	memset(&m, 0, sizeof(m));
	m.hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, tid, 1, 0, 0 };
	m.batch.magic = TALLY_BATCH_MAGIC;
	m.batch.version = TALLY_BATCH_VERSION;
	m.batch.source = TALLY_SRC_ALLOC;
	m.batch.tid = tid;
	m.batch.heap_id = heap;
	tally_ev_put(w, &m.batch.count, &mod);
	w[m.batch.count++] = 0x400000;
	w[m.batch.count++] = 0x480000;
	memcpy(&w[m.batch.count], path, sizeof(path) - 1);
	m.batch.count += (sizeof(path) - 1 + 7) / 8;
	for (uint64_t id = 1; id <= 2; id++) {
		const struct tally_ev smp = { TALLY_EV_SAMPLE, 0, 1, 3, id };
		tally_ev_put(w, &m.batch.count, &smp);
		w[m.batch.count++] = 100 * id;
		w[m.batch.count++] = 524288;
		w[m.batch.count++] = 1000000000 * id; /* its birth */
		memcpy(&w[m.batch.count], pcs, sizeof(pcs));
		m.batch.count += 3;
	}
	const struct tally_ev fr = { TALLY_EV_SAMPLE_FREE, 0, 0, 0, 1 };
	tally_ev_put(w, &m.batch.count, &fr);
	m.bytes = (uint32_t)(hdr + m.batch.count * 8);
	chunk(s, 0, &m, offsetof(struct tally_msg_batch, batch) + m.bytes);
}

static void thread_msg(struct stream *s, uint16_t kind, uint16_t flags, uint32_t tid,
		       const char *comm)
{
	struct tally_msg_thread m = { .hdr = { kind, flags, tid, 2 }, .pid = 100 };

	strncpy(m.comm, comm, sizeof(m.comm) - 1);
	chunk(s, 0, &m, sizeof(m));
}

static void group_msg(struct stream *s, uint16_t kind, uint32_t tid, uint32_t g, const char *name)
{
	struct tally_msg_group m = { .hdr = { kind, 0, tid, 3 }, .group = g };

	if (name)
		strncpy(m.name, name, sizeof(m.name) - 1);
	chunk(s, 0, &m, sizeof(m));
}

static const struct tally_ev alloc_recs[] = {
	{ TALLY_EV_SEG_MAP, 0, 0, 16384, SEGMENT_SIZE },
	{ TALLY_EV_SPAN_CLAIM, 0, 0, 512, 0 },
	{ TALLY_EV_BUMP, 0, 0, 0, 4096 },
	{ TALLY_EV_ALLOC, 0, 1, 40, 48 },
	{ TALLY_EV_ALLOC, 0, 1, 48, 48 },
	{ TALLY_EV_FREE, 0, 1, 40, 48 },
	{ TALLY_EV_FREE_FOREIGN, 0, 1, 48, 48 },
	{ TALLY_EV_DRAIN, 0, 0, 0, 48 },
	{ TALLY_EV_REALLOC, 0, 1, 10, 20 },
	{ TALLY_EV_LARGE_ALLOC, TALLY_LARGE_FRESH, 0, 4000, 1 << 20 },
	{ TALLY_EV_LARGE_FREE, TALLY_LARGE_POOL, 0, 4000, 1 << 20 },
};
#define NRECS(a) (sizeof(a) / sizeof((a)[0]))

static int decoder_seeds(void)
{
	static struct stream s;
	int err = 0;

	/* a batch with every kind of allocator record */
	start(&s, 0);
	batch(&s, TALLY_SRC_ALLOC, 1, 0, 100, alloc_recs, NRECS(alloc_recs), TALLY_BATCH_MAGIC);
	err = err ?: write_seed("decoder", "alloc-batch", s.b, s.len);

	/* heap-profile records: a module, samples, a free */
	start(&s, 0);
	sample_batch(&s, 1, 100);
	err = err ?: write_seed("decoder", "samples", s.b, s.len);

	/* the same with a bad magic: refused */
	start(&s, 0);
	batch(&s, TALLY_SRC_ALLOC, 1, 0, 100, alloc_recs, 4, 0xdeadbeef);
	err = err ?: write_seed("decoder", "bad-magic", s.b, s.len);

	/* two heaps' batches out of order, records read from memory, the final cut */
	start(&s, 0);
	batch(&s, TALLY_SRC_ALLOC, 2, 6, 101, alloc_recs + 3, 4, TALLY_BATCH_MAGIC);
	batch(&s, TALLY_SRC_ALLOC, 1, 0, 100, alloc_recs, 3, TALLY_BATCH_MAGIC);
	batch(&s, TALLY_SRC_ALLOC, 2, 0, 101, alloc_recs, 3, TALLY_BATCH_MAGIC);
	{
		uint8_t p[20 + 16] = { 0 };
		uint64_t heap = 1, seq = 6,
			 w[2] = { tally_ev_word(TALLY_EV_ALLOC, 0, 8, 16),
				  tally_ev_word(TALLY_EV_FREE, 0, 8, 16) };
		uint32_t tid = 100;
		memcpy(p, &heap, 8);
		memcpy(p + 8, &seq, 8);
		memcpy(p + 16, &tid, 4);
		memcpy(p + 20, w, sizeof(w));
		chunk(&s, 1, p, sizeof(p));
		uint64_t cut[2] = { 2, 8 };
		chunk(&s, 2, cut, sizeof(cut));
	}
	batch(&s, TALLY_SRC_ALLOC, 2, 10, 101, alloc_recs + 3, 4, TALLY_BATCH_MAGIC);
	err = err ?: write_seed("decoder", "heaps-pending-cut", s.b, s.len);

	/* threads: new, grouped by a --group rule, renamed by an exec, the last exit */
	start(&s, 1);
	thread_msg(&s, TALLY_MSG_THREAD_NEW, 0, 100, "work-1");
	thread_msg(&s, TALLY_MSG_THREAD_NEW, 0, 101, "io3");
	batch(&s, TALLY_SRC_ALLOC, 1, 0, 100, alloc_recs, NRECS(alloc_recs), TALLY_BATCH_MAGIC);
	thread_msg(&s, TALLY_MSG_THREAD_NAME, TALLY_THREAD_EXEC, 100, "work-2");
	thread_msg(&s, TALLY_MSG_THREAD_EXIT, 0, 101, "io3");
	thread_msg(&s, TALLY_MSG_THREAD_EXIT, TALLY_THREAD_GROUP_DEAD, 100, "work-2");
	err = err ?: write_seed("decoder", "threads", s.b, s.len);

	/* the SDK's groups: registered, entered, yields, rejections, one on a rule's id */
	start(&s, 1);
	group_msg(&s, TALLY_MSG_GROUP_REGISTER, 100, 1, "net");
	group_msg(&s, TALLY_MSG_GROUP_REGISTER, 100, 255, "disk");
	group_msg(&s, TALLY_MSG_GROUP_ENTER, 100, 1, NULL);
	group_msg(&s, TALLY_MSG_YIELD, 100, 1, NULL);
	group_msg(&s, TALLY_MSG_REJECT, 100, 1, NULL);
	group_msg(&s, TALLY_MSG_GROUP_EXIT, 100, 0, NULL);
	err = err ?: write_seed("decoder", "groups", s.b, s.len);

	/* GPU: driver records, and a CUPTI batch with a kernel's name */
	start(&s, 0);
	{
		struct tally_msg_gpu g = { .hdr = { TALLY_MSG_GPU, 0, 100, 4 },
					   .ev = { TALLY_EV_GPU_DEVICE_MEM, 0, 1, 0, 1 << 20 } };
		chunk(&s, 0, &g, sizeof(g));
		g.ev = (struct tally_ev){ TALLY_EV_GPU_LAUNCH, 0, 1, 0,
					  TALLY_GPU_API_LAUNCH_KERNEL };
		chunk(&s, 0, &g, sizeof(g));
		static struct tally_msg_batch m;
		const char name[] = "vector_add_kernel";
		size_t hdr = offsetof(struct tally_batch, words);
		cupti_batch(&m);
		struct tally_ev kn = { TALLY_EV_GPU_KERNEL_NAME, 0, 0, 7, sizeof(name) - 1 };
		put_text(&m, &kn, name);
		struct tally_ev l = { TALLY_EV_GPU_LAUNCH, 0, 1, 7, TALLY_GPU_API_LAUNCH_KERNEL };
		tally_ev_put(m.batch.words, &m.batch.count, &l);
		m.bytes = (uint32_t)(hdr + m.batch.count * 8);
		chunk(&s, 0, &m, offsetof(struct tally_msg_batch, batch) + m.bytes);
	}
	err = err ?: write_seed("decoder", "gpu", s.b, s.len);

	/* CUPTI refused tally's subscriber: its reason after the record, then
	 * the driver's records; a driver's load and its hold */
	start(&s, 0);
	{
		static struct tally_msg_batch m;
		const char why[] = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; held by nsys";
		size_t hdr = offsetof(struct tally_batch, words);
		cupti_batch(&m);
		struct tally_ev r = { TALLY_EV_GPU_CUPTI_REFUSED, 0, 0, 39, sizeof(why) - 1 };
		put_text(&m, &r, why);
		m.bytes = (uint32_t)(hdr + m.batch.count * 8);
		chunk(&s, 0, &m, offsetof(struct tally_msg_batch, batch) + m.bytes);
		struct tally_msg_driver d = { .hdr = { TALLY_MSG_DRIVER_LOAD, 0, 100, 6, 100, 0 },
					      .base = 0x7f0000000000 };
		chunk(&s, 0, &d, sizeof(d));
		d.hdr.kind = TALLY_MSG_DRIVER_HELD;
		d.waited_ns = 1500000;
		chunk(&s, 0, &d, sizeof(d));
		struct tally_msg_gpu g = { .hdr = { TALLY_MSG_GPU, 0, 100, 7 },
					   .ev = { TALLY_EV_GPU_LAUNCH, 0, 1, 0,
						   TALLY_GPU_API_LAUNCH_KERNEL } };
		chunk(&s, 0, &g, sizeof(g));
	}
	err = err ?: write_seed("decoder", "gpu-cupti-refused", s.b, s.len);

	/* the allocator's figures at exit */
	start(&s, 0);
	{
		struct tally_msg_stats st = { .hdr = { TALLY_MSG_STATS, TALLY_STATS_THREADS_HELD,
						       100, 6 },
					      .resident = 8192 };
		st.stats[0] = SEGMENT_SIZE;
		chunk(&s, 0, &st, sizeof(st));
	}
	err = err ?: write_seed("decoder", "exit-stats", s.b, s.len);

	/* a tree: the root's batch, a fork, the child's own batch and group,
	 * its exit; a vfork child that execs */
	start(&s, 0);
	batch(&s, TALLY_SRC_ALLOC, 1, 0, 100, alloc_recs, 5, TALLY_BATCH_MAGIC);
	{
		struct tally_msg_thread f = { .hdr = { TALLY_MSG_PROC_FORK, 0, 200, 7, 200, 2 },
					      .pid = 100,
					      .parent_tid = 100 };
		strcpy(f.comm, "child");
		chunk(&s, 3, &f, sizeof(f));
		static struct tally_msg_batch m;
		memset(&m, 0, sizeof(m));
		m.hdr = (struct tally_msg){ TALLY_MSG_BATCH, 0, 200, 8, 200, 0 };
		m.batch.magic = TALLY_BATCH_MAGIC;
		m.batch.version = TALLY_BATCH_VERSION;
		m.batch.source = TALLY_SRC_ALLOC;
		m.batch.tid = 200;
		m.batch.heap_id = 1;
		m.batch.seq_first = 9;
		for (unsigned i = 3; i < 6; i++)
			tally_ev_put(m.batch.words, &m.batch.count, &alloc_recs[i]);
		m.bytes = (uint32_t)(offsetof(struct tally_batch, words) + m.batch.count * 8);
		chunk(&s, 3, &m, offsetof(struct tally_msg_batch, batch) + m.bytes);
		struct tally_msg_group g = { .hdr = { TALLY_MSG_GROUP_REGISTER, 0, 200, 9, 200, 0 },
					     .group = 2 };
		strcpy(g.name, "kid");
		chunk(&s, 3, &g, sizeof(g));
		struct tally_msg_thread v = { .hdr = { TALLY_MSG_PROC_FORK, TALLY_PROC_SHARED_VM,
						       201, 10, 201, 3 },
					      .pid = 200,
					      .parent_tid = 200 };
		chunk(&s, 3, &v, sizeof(v));
		v.hdr.kind = TALLY_MSG_THREAD_NAME;
		v.hdr.flags = TALLY_THREAD_EXEC;
		strcpy(v.comm, "true");
		chunk(&s, 3, &v, sizeof(v));
		f.hdr.kind = TALLY_MSG_THREAD_EXIT;
		f.hdr.flags = TALLY_THREAD_GROUP_DEAD;
		chunk(&s, 3, &f, sizeof(f));
	}
	err = err ?: write_seed("decoder", "tree", s.b, s.len);
	return err;
}

int main(int argc, char **argv)
{
	int err;

	if (argc != 2) {
		fprintf(stderr,
			"usage: %s CORPUS_DIR (writes CORPUS_DIR/{remote,decoder}/seed-*)\n",
			argv[0]);
		return 2;
	}
	out_dir = argv[1];
	err = remote_seeds();
	if (!err)
		err = decoder_seeds();
	if (err) {
		fprintf(stderr, "seeds: %s\n", strerror(-err));
		return 1;
	}
	return 0;
}
