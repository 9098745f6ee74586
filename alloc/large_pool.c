// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The pool of freed large mappings: ranges of resident pages kept for later
 * large blocks until the purge delay passes (hysteresis), all under large.c's
 * lock. A page that a block takes from here costs no fault, and a fault is
 * what a large block written whole costs: on these VMs a first touch of a
 * fresh page costs about 13 us (16 MiB: 55 ms to fault and fill, 0.9 ms to
 * fill again).
 *
 * A range of whole chunks (blocks of LARGE_ROUND_MIN up) serves a block of
 * chunks from its head, the rest pooled; and a block that no range holds is
 * mapped afresh and takes the pooled chunks, the most first, moved into it
 * by mremap (pool_compose): 0.2 ms for 16 MiB, page tables moving whole.
 * Moved a page at a time (not 2 MiB-aligned), 16 MiB took 0.7 ms and its
 * next fill 64 ms, more than fresh pages: the hypervisor's shadow page
 * tables, presumably. A freed block next to a pooled range of chunks joins
 * it. Ranges of smaller blocks serve blocks of about their size, whole, as
 * before (pool_slack).
 *
 * Before, every range served a block only whole, within that slack: the
 * malloc-large shape (5..25 MiB blocks, a ring of 20, 400 pairs) faulted
 * 238 k pages (the pool served 87 % of its blocks, the fresh ones faulted
 * every page); now 109 k (large.c).
 */
#include <errno.h>

#include "internal.h"
#include "large_layout.h"
#include "large_pool.h"

/* A cap on the pool's ranges and bytes; a freed block larger than the cap is
 * unmapped at once. Over it, the oldest ranges go (the newest free is the
 * likeliest to be asked for again), the last of them trimmed only. */
#define POOL_SLOTS 64
#define POOL_TOTAL_MAX (128UL << 20)
#define POOL_SLACK_MIN (4UL << 20) /* pool_slack */

struct pool_ent {
	char *ptr; /* NULL: empty slot */
	size_t len;
	uint64_t stamp_ms; /* the last free into it */
	uint32_t lay;	   /* large_layout.h */
};

static struct pool_ent pool[POOL_SLOTS];
static size_t pool_bytes;
/* mremap works here (off under a seccomp filter that refuses it), and moves
 * a range of several mappings (Linux 6.17 on); learnt at the first failure */
static bool move_ok = true, move_multi_ok = true;

/* len bytes of the pool are unmapped (the range's whole, or its tail). */
static void pool_unmapped(struct heap *h, size_t len)
{
	pool_bytes -= len;
	h->stats.hysteresis -= len;
	h->stats.mapped -= len;
	ev(h, TALLY_EV_POOL_UNMAP, 0, 0, 0, len);
}

static void pool_drop(struct heap *h, struct pool_ent *e)
{
	os_unmap(e->ptr, e->len);
	pool_unmapped(h, e->len);
	lay_drop(e->lay);
	e->ptr = NULL;
}

/* e's first keep bytes stay, the rest is unmapped. */
static void pool_trim(struct heap *h, struct pool_ent *e, size_t keep)
{
	struct lay_bounds b;

	os_unmap(e->ptr + keep, e->len - keep);
	pool_unmapped(h, e->len - keep);
	e->len = keep;
	lay_load(e->lay, &b);
	lay_cut(&b, keep, &b, NULL);
	e->lay = lay_put(e->lay, &b); /* fewer bounds: the record serves */
}

/* The first len bytes of e leave the pool (head: their layout). The rest's
 * bounds are some of e's: e's record, if any, holds them. */
static void pool_cut(struct pool_ent *e, size_t len, struct lay_bounds *head)
{
	struct lay_bounds b, tail;

	lay_load(e->lay, &b);
	lay_cut(&b, len, head, &tail);
	e->lay = lay_put(e->lay, &tail);
	pool_bytes -= len;
	e->ptr += len;
	e->len -= len;
	if (!e->len)
		e->ptr = NULL;
}

/* A range of whole chunks: of blocks of LARGE_ROUND_MIN or more, whose
 * pages move into larger blocks and which join their neighbours of the kind.
 * Ranges of smaller blocks serve blocks of about their size, whole: joined,
 * fewer of them did, and bench-alloc's large shape (64 KiB..8 MiB blocks,
 * each written at its head and last byte) peaked anywhere from 53 to 115 MiB
 * from run to run, against 52 MiB every run. */
static bool pool_chunky(const struct pool_ent *e)
{
	return !(((uintptr_t)e->ptr | e->len) & (LARGE_CHUNK - 1));
}

/* The range that serves a block of len bytes: the smallest that holds it. */
static struct pool_ent *pool_fit(size_t len)
{
	struct pool_ent *fit = NULL;

	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		if (e->ptr && e->len >= len && (!fit || e->len < fit->len))
			fit = e;
	}
	return fit;
}

/* The most a range may exceed a block under LARGE_ROUND_MIN by, to serve it
 * (whole): 4 MiB, or the block's size where larger. The excess is the
 * block's rounding, resident; the block's first and last pages are likely
 * those a block of the range touched before. (Cut from a larger range
 * instead, the blocks of bench-alloc's large shape, which writes each
 * block's head and last byte only, faulted a third more often: 0.7 times
 * the speed.) */
static size_t pool_slack(size_t len)
{
	return len > POOL_SLACK_MIN ? len : POOL_SLACK_MIN;
}

/*
 * A block of *len bytes (a page multiple) from the smallest range that holds
 * it; NULL when none does. A block under LARGE_ROUND_MIN takes a range
 * within its slack whole (*len grows to it). A larger one, whole chunks,
 * takes the range's head, or the whole range where the rest would be empty
 * or no layout record is free for the two parts. hysteresis gives the bytes
 * up, as the block's TALLY_LARGE_POOL allocation says.
 */
void *pool_take(struct heap *h, size_t *len, uint32_t *lay)
{
	struct pool_ent *fit = pool_fit(*len);
	size_t want = *len;
	struct lay_bounds head;

	if (!fit || (want < LARGE_ROUND_MIN && fit->len - want > pool_slack(want)))
		return NULL;
	char *p = fit->ptr;
	if (want < LARGE_ROUND_MIN || (fit->lay && !lay_room()))
		want = fit->len;
	pool_cut(fit, want, &head);
	/* a record is free: lay_room, or fit's own, left with no bound */
	*lay = lay_put(0, &head);
	*len = want;
	h->stats.hysteresis -= want;
	return p;
}

/* The bounds a block takes in with the first t bytes of e, placed at byte
 * offset at of it: its own and the one at at. */
static uint32_t move_bounds(const struct pool_ent *e, size_t at, size_t t)
{
	return lay_below(e->lay, t) + (at != 0);
}

/* The bytes of e that may move to a block needing need bytes more: whole
 * chunks of a range of whole chunks (0: none). */
static size_t move_len(const struct pool_ent *e, size_t need)
{
	if (!pool_chunky(e))
		return 0;
	return (e->len < need ? e->len : need) & ~(LARGE_CHUNK - 1);
}

/* The range with the most bytes that may move to byte offset at of a block
 * of bounds bounds so far, which needs need bytes more; room is kept for two
 * bounds more (one where its fresh pages begin, one after a failed move). */
static struct pool_ent *compose_source(uint32_t bounds, size_t at, size_t need)
{
	struct pool_ent *best = NULL;
	size_t best_t = 0;
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		size_t t = e->ptr ? move_len(e, need) : 0;
		if (t <= best_t || (lay_below(e->lay, t) && !move_multi_ok))
			continue;
		if (bounds + move_bounds(e, at, t) + 2 <= LAY_BOUNDS_MAX) {
			best = e;
			best_t = t;
		}
	}
	return best;
}

/* A failed move of t bytes from e to dst: e goes (its pages are in no known
 * state), and what the failure says is kept. */
static void move_failed(struct heap *h, struct pool_ent *e, size_t t, int err)
{
	if (lay_below(e->lay, t) && err == -EFAULT)
		move_multi_ok = false;
	else if (err != -ENOMEM && err != -EIO)
		move_ok = false;
	pool_drop(h, e);
}

/*
 * dst, a fresh mapping of len bytes, takes pooled pages from its start: the
 * bytes moved, which leave the pool as unmapped ones (TALLY_EV_POOL_UNMAP:
 * their addresses are gone; the block's fresh mapping counts them again).
 * *lay: the block's layout. SIZE_MAX: dst has a hole (a failed move whose
 * dst could not be mapped again); the caller unmaps it.
 */
size_t pool_compose(struct heap *h, char *dst, size_t len, uint32_t *lay)
{
	struct lay_bounds acc = { 0 }, part;
	size_t moved = 0, restored = 0;
	struct pool_ent *e;

	*lay = 0;
	if (!lay_room()) /* the block's record, taken at the end */
		return 0;
	while (move_ok && moved < len && (e = compose_source(acc.n, moved, len - moved))) {
		size_t t = move_len(e, len - moved);
		int err = os_move(dst + moved, e->ptr, t);
		if (err) {
			move_failed(h, e, t, err);
			if (err == -EIO)
				return SIZE_MAX;
			restored = moved + t; /* mapped afresh: a mapping of its own */
			break;
		}
		pool_cut(e, t, &part);
		lay_append(&acc, moved, &part);
		h->stats.hysteresis -= t;
		h->stats.mapped -= t;
		ev(h, TALLY_EV_POOL_UNMAP, 0, 0, 0, t);
		moved += t;
	}
	struct lay_bounds none = { 0 };
	if (moved && moved < len)
		lay_append(&acc, moved, &none);
	if (restored && restored < len)
		lay_append(&acc, restored, &none);
	*lay = lay_put(0, &acc);
	return moved;
}

static struct pool_ent *pool_oldest(void)
{
	struct pool_ent *old = NULL;
	for (int i = 0; i < POOL_SLOTS; i++)
		if (pool[i].ptr && (!old || pool[i].stamp_ms < old->stamp_ms))
			old = &pool[i];
	return old;
}

/* Room for len more bytes: the oldest ranges unmapped, the last in part. */
static void pool_make_room(struct heap *h, size_t len)
{
	while (pool_bytes + len > POOL_TOTAL_MAX) {
		struct pool_ent *e = pool_oldest();
		size_t over = pool_bytes + len - POOL_TOTAL_MAX;
		size_t keep = over < e->len ? e->len - over : 0;
		if (pool_chunky(e)) /* it stays of whole chunks */
			keep &= ~(LARGE_CHUNK - 1);
		if (keep)
			pool_trim(h, e, keep);
		else
			pool_drop(h, e);
	}
}

/* r joined by a pooled range next to it, its slot emptied; false: none
 * (or none whose bounds, and the one where they meet, fit a layout). */
static bool pool_join(struct pool_ent *r)
{
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		if (!e->ptr || (e->ptr + e->len != r->ptr && e->ptr != r->ptr + r->len) ||
		    !pool_chunky(e))
			continue;
		struct pool_ent *lo = e->ptr < r->ptr ? e : r, *hi = lo == e ? r : e;
		struct lay_bounds b, hb;
		lay_load(lo->lay, &b);
		lay_load(hi->lay, &hb);
		if (!lay_append(&b, lo->len, &hb))
			continue;
		uint32_t lay = lay_put(lo->lay ? lo->lay : hi->lay, &b);
		if (lay == LAY_NONE)
			continue;
		if (lo->lay && hi->lay)
			lay_drop(hi->lay);
		r->ptr = lo->ptr;
		r->len += e->len;
		r->lay = lay;
		pool_bytes -= e->len;
		e->ptr = NULL;
		return true;
	}
	return false;
}

static struct pool_ent *pool_slot(struct heap *h)
{
	for (int i = 0; i < POOL_SLOTS; i++)
		if (!pool[i].ptr)
			return &pool[i];
	struct pool_ent *e = pool_oldest();
	pool_drop(h, e);
	return e;
}

/* A freed block's mapping into the pool (hysteresis), joined to the ranges
 * next to it; false: too large to keep (the caller unmaps it). */
bool pool_put(struct heap *h, void *p, size_t len, uint32_t lay)
{
	struct pool_ent r = { .ptr = p, .len = len, .lay = lay }, *e;

	if (len > POOL_TOTAL_MAX)
		return false;
	pool_make_room(h, len);
	while (pool_chunky(&r) && pool_join(&r))
		;
	/* the delay counts from the free: the heap's clock is read at its
	 * ticks, and an owner that last ticked before a slow stretch of its
	 * own would stamp the entry old enough to go at once */
	h->now_ms = os_now_ms();
	r.stamp_ms = h->now_ms;
	e = pool_slot(h);
	*e = r;
	pool_bytes += r.len;
	h->stats.hysteresis += len;
	return true;
}

void pool_sweep(struct heap *h, bool force)
{
	for (int i = 0; i < POOL_SLOTS; i++) {
		struct pool_ent *e = &pool[i];
		/* another heap's clock may be older than the stamp: that entry is
		 * young, not 2^64 ms old */
		if (e->ptr && (force || (h->now_ms >= e->stamp_ms &&
					 h->now_ms - e->stamp_ms >= tally_purge_ms)))
			pool_drop(h, e);
	}
}

/* When pool_sweep will next have something to unmap (UINT64_MAX: never). */
uint64_t pool_due(void)
{
	uint64_t due = UINT64_MAX;

	for (int i = 0; i < POOL_SLOTS; i++)
		if (pool[i].ptr && pool[i].stamp_ms + tally_purge_ms < due)
			due = pool[i].stamp_ms + tally_purge_ms;
	return due;
}

uint64_t pool_resident(void)
{
	uint64_t bytes = 0;

	for (int i = 0; i < POOL_SLOTS; i++)
		if (pool[i].ptr)
			bytes += os_resident(pool[i].ptr, pool[i].len);
	return bytes;
}
