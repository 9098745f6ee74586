// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A target's allocator state, read from its memory and derived exactly as the
 * allocator derives its own figures (alloc/stats_walk.h, on copies of its
 * heaps, segment headers and slot metadata). The target keeps running: a
 * heap that answered the cut's request (alloc/cut.c) is taken as it
 * answered; another is read by tally, its position read with the heap and
 * again after its segments, so that a heap that changed meanwhile is known.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "../../alloc/common/hash.h"
#include "../../alloc/stats_walk.h"
#include "../util/clock.h"
#include "../util/grow.h"
#include "remote.h"

/* The target's memory through process_vm_readv: ctx points at its pid. */
static int pid_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { buf, len }, remote = { (void *)(uintptr_t)addr, len };
	ssize_t n = process_vm_readv(*(const pid_t *)ctx, &local, 1, &remote, 1, 0);

	if (n < 0)
		return -errno;
	return (size_t)n == len ? 0 : -EFAULT;
}

static int peek(const struct remote_mem *mem, uint64_t addr, void *buf, size_t len)
{
	return mem->read(mem->ctx, addr, buf, len);
}

int remote_cut_request(pid_t pid, uint64_t req_addr, bool figures, uint64_t *req)
{
	/* unique for every tracer and every process: a heap keeps the number
	 * of the last request it answered, from another tracer, or from its
	 * parent before a fork */
	static uint64_t last;
	uint64_t now = clock_now_ns();
	uint64_t v = ((now > last ? now : last + 1) << 1) | (figures ? CUT_FIGURES : 0);
	last = v >> 1;
	*req = 0;
	struct iovec local = { &v, sizeof(v) }, remote = { (void *)(uintptr_t)req_addr, sizeof(v) };

	if (process_vm_writev(pid, &local, 1, &remote, 1, 0) != (ssize_t)sizeof(v))
		return errno ? -errno : -EFAULT;
	*req = v;
	/* the rare side of alloc/cut.c's pair: from here on, a heap read not
	 * busy and not answered answers before its next operation */
	return syscall(SYS_membarrier, MEMBARRIER_CMD_GLOBAL_EXPEDITED, 0, 0) ? -errno : 0;
}

int remote_cut_done(pid_t pid, uint64_t req_addr, uint64_t req)
{
	uint64_t at = req_addr + offsetof(struct tally_cut, done);
	struct iovec local = { &req, sizeof(req) }, remote = { (void *)(uintptr_t)at, sizeof(req) };

	return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)sizeof(req) ? 0 :
											  -errno;
}

/* A heap's answer: the number of the request it answered and its position. */
struct cut_answer {
	uint64_t gen, pos;
};
_Static_assert(offsetof(struct heap, cut_pos) == offsetof(struct heap, cut_gen) + 8,
	       "an answer is read in one copy");

static int answer_read(const struct remote_mem *mem, uint64_t at, struct cut_answer *a)
{
	return peek(mem, at + offsetof(struct heap, cut_gen), a, sizeof(*a));
}

/* One heap's figures added to the sum: every field is a signed sum. */
_Static_assert(sizeof(struct stats_walk) % sizeof(int64_t) == 0, "a walk is int64_t sums");
static void walk_add(struct stats_walk *w, const struct stats_walk *h)
{
	int64_t *d = (int64_t *)w;
	const int64_t *s = (const int64_t *)h;

	for (size_t i = 0; i < sizeof(*w) / sizeof(int64_t); i++)
		d[i] += s[i];
}

/* A heap's stream position now: its seq (records handed over) and the count
 * of its batch. A flush moves seq and empties the batch, keeping seq + count:
 * only both together tell whether a copy of the heap was torn by one. */
static int heap_pos(const struct remote_mem *mem, uint64_t addr, uint64_t *seq, uint32_t *count)
{
	int err = peek(mem, addr + offsetof(struct heap, seq), seq, sizeof(*seq));

	if (!err)
		err = peek(mem, addr + offsetof(struct heap, batch.count), count, sizeof(*count));
	return err;
}

/* Every assigned span of one segment header copied into `seg`, whose
 * address in the target is `at`. */
static int walk_segment(const struct remote_mem *mem, uint64_t at, struct segment *seg,
			uint16_t *meta, struct stats_walk *w)
{
	for (unsigned i = 1; i < SPANS_PER_SEGMENT; i++) {
		struct span *sp = &seg->spans[i];
		uint64_t inline_at = at + offsetof(struct segment, spans) + i * sizeof(*sp) +
				     offsetof(struct span, inline_meta);
		const uint16_t *m = sp->inline_meta;

		if (sp->state == SPAN_UNASSIGNED)
			continue;
		if (sp->bump > SPAN_MAX_SLOTS)
			return -EPROTO;
		/* an address in the target: only computed, never dereferenced here */
		uint64_t meta_at = (uint64_t)(uintptr_t)sp->cells + sp->meta_skip * sizeof(*meta);
		if (sp->meta_skip > SPAN_MAX_SLOTS)
			return -EPROTO;
		if (meta_at != inline_at) {
			int err = peek(mem, meta_at, meta, sp->bump * sizeof(*meta));
			if (err)
				return err;
			m = meta;
		} else if (sp->bump > SPAN_INLINE_SLOTS) {
			return -EPROTO;
		}
		stats_walk_span(w, sp, m);
	}
	return 0;
}

void remote_heap_layout(struct remote_heap_layout *out)
{
	out->next = offsetof(struct heap, all_next);
	out->id = offsetof(struct heap, id);
	out->tid = offsetof(struct heap, tid);
	out->seq = offsetof(struct heap, seq);
	out->batch = offsetof(struct heap, batch);
	out->handing = offsetof(struct heap, handing);
	out->hand_free = HAND_FREE;
	out->hand_owner = HAND_OWNER;
}

int remote_alloc_read(pid_t pid, uint64_t heaps_addr, uint64_t req, struct remote_alloc *out)
{
	struct remote_mem mem = { pid_read, &pid };

	return remote_alloc_read_mem(&mem, heaps_addr, true, req, out);
}

int remote_pending_read(pid_t pid, uint64_t heaps_addr, uint64_t req, struct remote_alloc *out)
{
	struct remote_mem mem = { pid_read, &pid };

	return remote_alloc_read_mem(&mem, heaps_addr, false, req, out);
}

/* Segments seen in one read: a list that comes back to one is a loop. Open
 * addressing over 4 MiB-aligned addresses, sized for REMOTE_MAX_SEGMENTS. */
#define SEEN_SLOTS (2 * REMOTE_MAX_SEGMENTS)

static bool seen_add(uint64_t *seen, uint64_t addr)
{
	/* the top 17 bits, in range for any REMOTE_MAX_SEGMENTS (the fuzzer's are smaller) */
	uint64_t i = (hash_fib64(addr >> SEGMENT_SHIFT) >> 47) % SEEN_SLOTS;

	for (;; i = (i + 1) % SEEN_SLOTS) {
		if (seen[i] == addr)
			return false;
		if (!seen[i]) {
			seen[i] = addr;
			return true;
		}
	}
}

uint64_t remote_read_max_ns = 5000000000ULL;

/* The bounds above still allow a read of minutes (65536 segments of 16 KiB
 * headers and their metadata, each a system call): past this, a target is
 * not read at all. */
static bool over_time(uint64_t deadline, uint32_t n)
{
	return (n & 63) == 0 && clock_now_ns() > deadline;
}

/* The fields a position read copies: the heap list's link, id, thread, seq
 * and the batch's header (count), one contiguous range of struct heap. */
#define POS_FIRST offsetof(struct heap, all_next)
#define POS_END offsetof(struct heap, batch.words)
_Static_assert(offsetof(struct heap, id) >= POS_FIRST && offsetof(struct heap, tid) >= POS_FIRST &&
		       offsetof(struct heap, seq) >= POS_FIRST &&
		       offsetof(struct heap, batch.count) < POS_END,
	       "a position read copies the fields it uses");

/* After tally's walk of a heap: an answer since means its owner (or whoever
 * sweeps an orphan) was in it meanwhile, and the read is not of one moment. */
static void answer_moved(const struct remote_mem *mem, uint64_t req, uint64_t at, bool *consistent)
{
	struct cut_answer a;

	if (!answer_read(mem, at, &a) && a.gen == req)
		*consistent = false;
}

/* After a heap's copy: it is whole when no flush came during it (seq the
 * same) and the batch only grew (its words below the copied count are the
 * ones the owner wrote); still when nothing moved at all. */
static int heap_settled(const struct remote_mem *mem, uint64_t at, struct remote_heap *rh,
			bool *consistent)
{
	uint64_t seq;
	uint32_t now_count;
	int err = heap_pos(mem, at, &seq, &now_count);

	if (err)
		return err;
	rh->whole = seq == rh->seq_first && now_count >= rh->npending;
	/* an answered heap goes on past its answer: only its copy must be whole */
	if (!rh->whole || (!rh->answered && now_count != rh->npending))
		*consistent = false;
	return 0;
}

/* The segments of the heap at `at` (copied in h). */
static int walk_heap_segments(const struct remote_mem *mem, uint64_t at, const struct heap *h,
			      struct segment *seg, uint16_t *meta, struct stats_walk *w,
			      uint64_t *seen, uint32_t *nsegs, uint64_t deadline)
{
	int err = 0;

	for (uint64_t seg_at = (uint64_t)(uintptr_t)h->segs; !err && seg_at;
	     seg_at = (uint64_t)(uintptr_t)seg->next) {
		if (seg_at & (SEGMENT_SIZE - 1))
			return -EPROTO;
		if (!seen_add(seen, seg_at))
			return -ELOOP;
		if (++*nsegs > REMOTE_MAX_SEGMENTS)
			return -E2BIG;
		if (over_time(deadline, *nsegs))
			return -ETIME;
		err = peek(mem, seg_at, seg, sizeof(*seg));
		if (!err && (uint64_t)(uintptr_t)seg->heap != at)
			err = -EPROTO; /* every segment of a heap's list names the heap */
		if (!err)
			err = walk_segment(mem, seg_at, seg, meta, w);
	}
	return err;
}

/* One read's working copies (each malloc'd once, not per heap) and state. */
struct remote_read {
	const struct remote_mem *mem;
	bool spans;	/* walk the segments too: the figures */
	uint64_t req;	/* the cut's request (0: none) */
	struct heap *h; /* the heap being read */
	/* with the figures (spans) only: */
	struct segment *seg; /* one segment header of it */
	uint16_t *meta;	     /* one span's slot metadata, SPAN_MAX_SLOTS entries */
	struct stats_walk *w;
	struct stats_walk *hw; /* one heap's answered figures */
	uint64_t *seen;	       /* segments seen, SEEN_SLOTS */
	/* without (a position read) only: */
	uint64_t *addrs; /* each heap's address in the target, as out->heaps */
	uint32_t cap;	 /* entries of out->heaps and addrs */
	uint32_t nsegs;
	uint64_t last_id; /* of the heap before: ids strictly fall along the list */
	uint64_t deadline;
};

static int read_begin(struct remote_read *r, const struct remote_mem *mem, bool spans, uint64_t req)
{
	*r = (struct remote_read){ .mem = mem, .spans = spans, .req = req };
	r->h = malloc(sizeof(*r->h));
	r->last_id = UINT64_MAX;
	r->deadline = clock_now_ns() + remote_read_max_ns;
	if (!r->h)
		return -ENOMEM;
	if (!spans) /* a view's cut, at every tick: nothing more to set up */
		return 0;
	r->seg = malloc(sizeof(*r->seg));
	r->meta = malloc(SPAN_MAX_SLOTS * sizeof(uint16_t));
	r->w = calloc(1, sizeof(*r->w));
	r->hw = malloc(sizeof(*r->hw));
	r->seen = calloc(SEEN_SLOTS, sizeof(*r->seen));
	return r->seg && r->meta && r->w && r->hw && r->seen ? 0 : -ENOMEM;
}

static void read_end(struct remote_read *r)
{
	free(r->h);
	free(r->seg);
	free(r->meta);
	free(r->w);
	free(r->hw);
	free(r->seen);
	free(r->addrs);
}

/* The heap at `at`, the list's nheaps-th, copied into r->h (without the
 * figures, only its position fields) and checked against the list's bounds. */
static int heap_copy(struct remote_read *r, uint64_t at, uint32_t nheaps)
{
	struct heap *h = r->h;
	int err;

	if (at & (OS_PAGE - 1))
		return -EPROTO; /* heaps are mapped whole pages */
	if (nheaps == REMOTE_MAX_HEAPS)
		return -E2BIG;
	if (over_time(r->deadline, nheaps + 1))
		return -ETIME;
	/* without the figures, only the list's fields and the batch's
	 * header: every heap's position read within microseconds (a
	 * view's cut), its words copied after */
	if (r->spans)
		err = peek(r->mem, at, h, sizeof(*h));
	else
		err = peek(r->mem, at + POS_FIRST, (char *)h + POS_FIRST, POS_END - POS_FIRST);
	if (err)
		return err;
	if (h->id >= r->last_id || !h->id)
		return -ELOOP;
	r->last_id = h->id;
	if (h->batch.count > TALLY_BATCH_WORDS)
		return -EPROTO;
	return 0;
}

/* Room for one more heap in out->heaps, and in r->addrs for a position read. */
static int heaps_reserve(struct remote_read *r, struct remote_alloc *out)
{
	size_t cap = r->cap, acap = r->cap, need = (size_t)out->nheaps + 1;
	int err;

	if (out->nheaps != r->cap)
		return 0;
	err = grow((void **)&out->heaps, &cap, need, sizeof(*out->heaps), 16);
	if (!err && !r->spans)
		err = grow((void **)&r->addrs, &acap, need, sizeof(*r->addrs), 16);
	if (!err)
		r->cap = (uint32_t)cap; /* one capacity: both grew alike */
	return err;
}

/* The heap's answer to the request, read after the copy of its position
 * (a position that holds a record made after the answer is then read with
 * the answer: the owner stored the answer first). Its figures with it, when
 * asked for (a copy of their own: a read of the heap whole is one copy of
 * the kernel's, in no promised order). */
static int answer_take(struct remote_read *r, uint64_t at, struct remote_heap *rh, bool *answered)
{
	struct cut_answer a;
	int err = r->req ? answer_read(r->mem, at, &a) : 0;

	*answered = !err && r->req && a.gen == r->req;
	if (!*answered)
		return err;
	/* answered after the copy of its position: the batch grew since (or
	 * was handed over, which the check after its words tells) */
	uint32_t had = rh->npending;
	if (a.pos < rh->seq_first || a.pos - rh->seq_first > TALLY_BATCH_WORDS) {
		/* answered before its last hand-over (records from pos on came
		 * through the ring: none of its batch is below it), or after
		 * batches handed over since the copy (those come through the
		 * ring too: its words are not the copy's batch) */
		rh->npending = 0;
		rh->whole = false;
	} else {
		rh->npending = (uint32_t)(a.pos - rh->seq_first);
	}
	if (rh->npending > had) {
		__u64 *more = realloc(rh->pending, rh->npending * sizeof(rh->pending[0]));
		if (!more)
			return -ENOMEM;
		rh->pending = more;
	} else if (!rh->npending) {
		free(rh->pending);
		rh->pending = NULL;
	}
	rh->pos = a.pos;
	rh->answered = true;
	if (!r->spans)
		return 0;
	err = peek(r->mem, at + offsetof(struct heap, cut_walk), r->hw, sizeof(*r->hw));
	if (!err)
		walk_add(r->w, r->hw);
	return err;
}

/* The heap copied in r->h, at `at`, appended to out: its position and room
 * for its pending records (their words copied now with the figures, else
 * after every position was read); with the figures, its own answer's or
 * tally's walk of its segments. */
static int heap_add(struct remote_read *r, uint64_t at, struct remote_alloc *out)
{
	const struct heap *h = r->h;
	int err = heaps_reserve(r, out);
	bool answered;

	if (err)
		return err;
	if (!r->spans)
		r->addrs[out->nheaps] = at;
	struct remote_heap *rh = &out->heaps[out->nheaps];
	uint32_t count = h->batch.count;
	*rh = (struct remote_heap){ .id = h->id,
				    .tid = h->tid,
				    .seq_first = h->seq,
				    .pos = h->seq + count,
				    .npending = count };
	if (count) {
		rh->pending = malloc(count * sizeof(rh->pending[0]));
		if (!rh->pending)
			return -ENOMEM;
	}
	out->nheaps++;
	err = answer_take(r, at, rh, &answered);
	if (err)
		return err;
	/* in the middle of an operation it began before the request: its
	 * position is not one to cut at (alloc/cut.c) */
	if (!answered && h->busy)
		out->nbusy++;
	if (r->spans && rh->npending && rh->npending <= count)
		memcpy(rh->pending, h->batch.words, rh->npending * sizeof(rh->pending[0]));
	else if (r->spans && rh->npending) /* answered since the copy: read now */
		err = peek(r->mem, at + offsetof(struct heap, batch.words), rh->pending,
			   rh->npending * sizeof(rh->pending[0]));
	if (err || !r->spans)
		return err;
	if (answered) /* its batch's words below pos were whole if seq stayed */
		return heap_settled(r->mem, at, rh, &out->consistent);
	stats_walk_heap(r->w, h);
	err = walk_heap_segments(r->mem, at, h, r->seg, r->meta, r->w, r->seen, &r->nsegs,
				 r->deadline);
	if (!err)
		err = heap_settled(r->mem, at, rh, &out->consistent);
	/* its owner came back meanwhile: the walk may hold part of its operation */
	if (!err && r->req)
		answer_moved(r->mem, r->req, at, &out->consistent);
	return err;
}

/* Without the figures: the words of each batch, after every position was read. */
static int pending_words_read(struct remote_read *r, struct remote_alloc *out)
{
	int err = 0;

	for (uint32_t i = 0; !err && i < out->nheaps; i++) {
		struct remote_heap *rh = &out->heaps[i];
		if (rh->npending)
			err = peek(r->mem, r->addrs[i] + offsetof(struct heap, batch.words),
				   rh->pending, rh->npending * sizeof(rh->pending[0]));
		if (!err)
			err = heap_settled(r->mem, r->addrs[i], rh, &out->consistent);
	}
	return err;
}

static void figures_finish(const struct stats_walk *w, struct remote_alloc *out)
{
	stats_walk_finish(w, &out->stats);
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++)
		out->groups[g] = (struct tally_group_stats){ (uint64_t)w->groups[g].alloc_bytes,
							     (uint64_t)w->groups[g].alloc_objs,
							     (uint64_t)w->groups[g].dealloc_bytes,
							     (uint64_t)w->groups[g].dealloc_objs };
}

/* spans: walk the segments too (the figures); without, only the heaps'
 * positions and pending records. Heaps are only ever added at the head of
 * the list, with ids counting up: the list's ids strictly fall, which no
 * loop can keep doing. */
int remote_alloc_read_mem(const struct remote_mem *mem, uint64_t heaps_addr, bool spans,
			  uint64_t req, struct remote_alloc *out)
{
	struct remote_read r;
	uint64_t at;
	int err;

	memset(out, 0, sizeof(*out));
	out->consistent = true;
	err = read_begin(&r, mem, spans, req);
	if (err)
		goto out;
	err = peek(mem, heaps_addr, &at, sizeof(at));
	for (; !err && at; at = (uint64_t)(uintptr_t)r.h->all_next) {
		err = heap_copy(&r, at, out->nheaps);
		if (!err)
			err = heap_add(&r, at, out);
	}
	if (!err && !spans)
		err = pending_words_read(&r, out);
	if (!err && spans)
		figures_finish(r.w, out);
out:
	if (err)
		remote_alloc_free(out);
	read_end(&r);
	return err;
}

void remote_alloc_free(struct remote_alloc *ra)
{
	for (uint32_t i = 0; i < ra->nheaps; i++)
		free(ra->heaps[i].pending);
	free(ra->heaps);
	ra->heaps = NULL;
	ra->nheaps = 0;
}

const char *remote_strerror(int err)
{
	switch (err) {
	case -ELOOP:
		return "its heap or segment list loops (corrupt or hostile allocator state)";
	case -E2BIG:
		return "more heaps or segments than tally reads (65536 each)";
	case -EPROTO:
		return "malformed allocator state (corrupt or hostile)";
	case -ETIME:
		return "its state took more than 5 s to read (corrupt or hostile allocator state?)";
	default:
		return strerror(-err);
	}
}

int remote_registry_read(pid_t pid, uint64_t addr, struct tally_registry *out)
{
	struct remote_mem mem = { pid_read, &pid };

	return remote_registry_read_mem(&mem, addr, out);
}

int remote_registry_read_mem(const struct remote_mem *mem, uint64_t addr,
			     struct tally_registry *out)
{
	int err = peek(mem, addr, out, sizeof(*out));

	if (err)
		return err;
	if (out->magic != TALLY_REGISTRY_MAGIC || out->version != TALLY_REGISTRY_VERSION ||
	    out->ngroups > TALLY_MAX_GROUPS)
		return -EPROTO;
	for (unsigned i = 0; i < TALLY_MAX_GROUPS; i++)
		out->names[i][TALLY_GROUP_NAME_MAX - 1] = 0;
	return 0;
}
