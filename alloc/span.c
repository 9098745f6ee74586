// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Spans: the life of a 64 KiB span from claim to retirement, and every move
 * of its bytes between the identity's terms (docs/DESIGN.md §2). Only the owning
 * heap's thread runs this code for a span (or a thread holding the heaps lock
 * for an orphaned heap, or the purger while the owner is kept out: purge.c).
 * The heap decides when a span changes state (heap.c); this file does it.
 * Pages go back in batches (heap_discard), at the end of a sweep.
 *
 * Where a span's bytes are, by state:
 *   ACTIVE:  [0, slot_off) segment_overhead; slots below bump: live + rounding,
 *            cache (foreign frees in flight), returned (span.returned: the bytes
 *            of free slots on discarded pages) or span_free; at or above bump, and
 *            the tail: src_term (virgin, or returned for a span that was retired
 *            before)
 *   EMPTY:   slot_off + bump * size - span.returned in hysteresis; the rest as
 *            ACTIVE
 *   UNASSIGNED: all virgin (never claimed) or all returned (retired)
 * In each, the terms sum to SPAN_SIZE; the debug build checks it at every
 * transition (SPAN_CHECK, span_check.c).
 */
#include <string.h>

#include "internal.h"
#include "purge.h"
#include "stats_walk.h"

/* Pages [first, last] covered by the byte range [off, off + len) as a mask. */
static inline uint16_t page_mask(uint32_t off, uint32_t len)
{
	uint32_t first = off / OS_PAGE, last = (off + len - 1) / OS_PAGE;
	return (uint16_t)(((2u << last) - 1) & ~((1u << first) - 1));
}

static void term_add(struct heap *h, uint8_t term, int64_t bytes)
{
	if (term == TALLY_TERM_VIRGIN)
		h->stats.virgin += bytes;
	else
		h->stats.returned += bytes;
}

static struct bin *span_bin(struct heap *h, struct span *sp)
{
	return &h->gbins[sp->group][sp->cls];
}

/*
 * Rebuild the free list from the metadata: the free slots below bump none of
 * whose pages is discarded, lowest first. A free slot with a discarded page
 * stays out of the list (writing its link could fault the page back in) until
 * span_unreclaim; its bytes on discarded pages are `returned`, the rest
 * span_free. Returns the returned bytes.
 */
static uint32_t span_rebuild_free(struct span *sp)
{
	char *base = span_base(sp);
	uint32_t returned = 0, parked = 0;

	sp->free = NULL;
	for (uint32_t i = sp->bump; i-- > 0;) {
		if (span_meta(sp)[i] != META_FREE)
			continue;
		uint32_t off = sp->slot_off + i * sp->size, end = off + sp->size;
		uint16_t pm = page_mask(off, sp->size);
		if (sp->discarded & pm) {
			parked++;
			for (uint32_t p = off / OS_PAGE; p * OS_PAGE < end; p++) {
				if (!(sp->discarded & (1u << p)))
					continue;
				uint32_t lo = p * OS_PAGE > off ? p * OS_PAGE : off;
				uint32_t hi = (p + 1) * OS_PAGE < end ? (p + 1) * OS_PAGE : end;
				returned += hi - lo;
			}
			continue;
		}
		span_push_free(sp, base + off);
	}
	sp->parked_slots = parked;
	return returned;
}

/* Link the next page's worth of never-used slots (at least one): src_term ->
 * span_free. */
static bool span_bump(struct heap *h, struct span *sp)
{
	if (sp->bump >= sp->nslots)
		return false;
	uint32_t start = sp->bump, s = sp->size;
	uint32_t end_off = sp->slot_off + (start + 1) * s;
	uint32_t page_end = (end_off + OS_PAGE - 1) & ~(uint32_t)(OS_PAGE - 1);
	uint32_t end = (page_end - sp->slot_off) / s;
	if (end > sp->nslots)
		end = sp->nslots;
	char *base = span_base(sp) + sp->slot_off;
	for (uint32_t i = end; i-- > start;)
		span_push_free(sp, base + (size_t)i * s);
	sp->bump = end;
	uint64_t bytes = (uint64_t)(end - start) * s;
	term_add(h, sp->src_term, -(int64_t)bytes);
	h->stats.pool += bytes;
	ev(h, TALLY_EV_BUMP, sp->src_term, 0, 0, bytes);
	return true;
}

/* Take back the slots on discarded pages: returned -> span_free. Their pages
 * come back zero-filled when touched. */
static bool span_unreclaim(struct heap *h, struct span *sp)
{
	if (!sp->parked_slots)
		return false;
	uint64_t bytes = sp->returned;
	sp->discarded = 0;
	sp->returned = 0;
	span_rebuild_free(sp);
	if (bytes) {
		h->stats.returned -= bytes;
		h->stats.pool += bytes;
		ev(h, TALLY_EV_UNRECLAIM, 0, 0, 0, bytes);
	}
	SPAN_CHECK(sp);
	return sp->free != NULL;
}

/* Assign an unassigned span to class cls of the heap's current group. */
static void span_init(struct heap *h, struct span *sp, unsigned cls)
{
	const struct tally_class *k = &tally_classes[cls];
	char *base = span_base(sp);

	sp->size = k->size;
	sp->recip = k->recip;
	sp->slot_off = k->slot_off;
	sp->nslots = k->nslots;
	sp->used = sp->bump = sp->returned = sp->parked_slots = 0;
	sp->cls = (uint16_t)cls;
	sp->group = (uint16_t)h->group;
	sp->ev_tmpl = span_ev_template(sp->group, k->size);
	sp->discarded = 0;
	sp->state = SPAN_ACTIVE;
	span_set_flags(sp, sp->flags & SPAN_DIRTY); /* it may still sit on the dirty list */
	sp->free = NULL;
	sp->heap = h;
	sp->owner_tp = h->tp;
	atomic_store_explicit(&sp->xfree, NULL, memory_order_relaxed);
	if (k->slot_off) {
		sp->cells = (uint16_t *)base;
		/* fresh or discarded pages read as zero: all slots free already */
		os_touch(base, k->slot_off);
	} else if (k->hdr_cells) {
		sp->cells = segment_cells(h, sp, k->hdr_cells);
	} else {
		sp->cells = sp->inline_meta;
		memset(sp->inline_meta, 0, sizeof(sp->inline_meta));
	}
	sp->meta_skip = (uint16_t)(k->slot_off / k->size);
	term_add(h, sp->src_term, -(int64_t)k->slot_off);
	h->stats.segment_overhead += k->slot_off;
	h->stats.spans_assigned++;
	ev(h, TALLY_EV_SPAN_CLAIM, sp->src_term, 0, k->slot_off, 0);
}

/* An empty span is used again, as its bin's current span: the reverse of
 * span_make_empty (the SPAN_REFILL record). */
static void span_reactivate(struct heap *h, struct span *sp)
{
	struct bin *b = span_bin(h, sp);
	uint64_t free_bytes = ((uint64_t)sp->bump * sp->size - sp->returned);

	bin_remove_empty(h, b, sp);
	sp->state = SPAN_ACTIVE;
	h->stats.hysteresis -= free_bytes + sp->slot_off;
	h->stats.pool += free_bytes;
	h->stats.segment_overhead += sp->slot_off;
	ev(h, TALLY_EV_SPAN_REFILL, 0, 0, sp->slot_off, free_bytes);
	bin_push(h, b, sp);
	SPAN_CHECK(sp);
}

void span_make_empty(struct heap *h, struct span *sp)
{
	struct bin *b = span_bin(h, sp);
	uint64_t free_bytes = ((uint64_t)sp->bump * sp->size - sp->returned);

	if (!(sp->flags & SPAN_FULL))
		bin_remove(h, b, sp);
	span_set_flags(sp, sp->flags & ~SPAN_FULL);
	sp->state = SPAN_EMPTY;
	sp->stamp_ms = h->now_ms;
	bin_push_empty(h, b, sp);
	h->stats.pool -= free_bytes;
	h->stats.segment_overhead -= sp->slot_off;
	h->stats.hysteresis += free_bytes + sp->slot_off;
	ev(h, TALLY_EV_SPAN_EMPTY, 0, 0, sp->slot_off, free_bytes);
	SPAN_CHECK(sp);
	purge_kick(h);
}

struct span_frees span_owner_frees(const struct span *sp)
{
	return stats_span_frees(sp, span_meta(sp));
}

/* Move the span's share of its group's counters into the heap's. */
static void span_fold_counters(struct heap *h, struct span *sp)
{
	struct group_ctr *g = &heap_acct(h)->group_counters[sp->group];
	struct span_frees fr = span_owner_frees(sp);
	g->alloc_bytes += fr.abytes;
	g->alloc_objs += fr.nalloc;
	g->dealloc_bytes += fr.bytes;
	g->dealloc_objs += fr.objs;
	sp->acc = sp->abytes = sp->nalloc = sp->xbytes = sp->ndrained = 0;
}

/* An empty span leaves its class: hysteresis and virgin -> returned, as far
 * as the figures go (span_retire hands the pages back too). */
static void span_unassign(struct heap *h, struct span *sp)
{
	struct bin *b = span_bin(h, sp);
	struct heap *a = heap_acct(h);
	uint64_t hyst = ((uint64_t)sp->bump * sp->size - sp->returned) + sp->slot_off;
	uint64_t virgin = 0;

	if (sp->src_term == TALLY_TERM_VIRGIN)
		virgin = SPAN_SIZE - sp->slot_off - (uint64_t)sp->bump * sp->size;
	bin_remove_empty(h, b, sp);
	span_fold_counters(h, sp);
	sp->state = SPAN_UNASSIGNED;
	sp->src_term = TALLY_TERM_RETURNED;
	sp->free = NULL;
	sp->bump = 0;
	sp->recip = 0; /* the free path's cell test then refuses any pointer into it */
	a->stats.hysteresis -= hyst;
	a->stats.virgin -= virgin;
	a->stats.returned += hyst + virgin;
	a->stats.spans_assigned--;
	ev(a, TALLY_EV_SPAN_RETIRE, 0, 0, (uint32_t)virgin, hyst);
}

/* Hand an empty span back to the OS and to its segment: hysteresis and virgin
 * -> returned. */
void span_retire(struct heap *h, struct span *sp)
{
	heap_discard(h, span_base(sp), SPAN_SIZE);
	span_unassign(h, sp);
	SPAN_CHECK(sp);
	segment_release_span(h, sp);
}

/* The pages of an empty span that hold nothing: handed back (discarded), or
 * never touched (at and above the page of its bump cursor's end). */
static uint16_t span_pages_gone(const struct span *sp)
{
	uint32_t touched = sp->slot_off + sp->bump * sp->size;
	uint32_t first = (touched + (uint32_t)OS_PAGE - 1) / (uint32_t)OS_PAGE;
	uint16_t above = first >= PAGES_PER_SPAN ? 0 : (uint16_t)(0xffffu << first);

	return sp->discarded | above;
}

/*
 * An empty span of another class becomes class cls's current span with its
 * pages as they are: a heap that needs a span for one class while another
 * holds empty ones (sizes that come and go) must not hand pages back and
 * fault them in again for each. In the figures, a retirement and a claim
 * (hysteresis -> returned -> the new metadata), every slot linked at once
 * (-> span_free), and the slots on pages that hold nothing parked as after
 * a reclaim (-> returned): the records of those four steps carry it.
 */
void span_repurpose(struct heap *h, struct span *sp, unsigned cls)
{
	const struct tally_class *k = &tally_classes[cls];
	uint16_t gone = span_pages_gone(sp);

	span_unassign(h, sp);
	span_init(h, sp, cls);
	if (k->slot_off) {
		/* span_init relies on fresh pages reading as zero: these held slots */
		memset(span_base(sp), 0, k->slot_off);
		gone &= (uint16_t)~page_mask(0, k->slot_off);
	}
	uint64_t bytes = (uint64_t)k->nslots * k->size;
	sp->bump = k->nslots;
	h->stats.returned -= bytes;
	h->stats.pool += bytes;
	ev(h, TALLY_EV_BUMP, TALLY_TERM_RETURNED, 0, 0, bytes);
	sp->discarded = gone;
	sp->returned = span_rebuild_free(sp);
	if (sp->returned) {
		h->stats.pool -= sp->returned;
		h->stats.returned += sp->returned;
		ev(h, TALLY_EV_RECLAIM, 0, 0, 0, sp->returned);
	}
	/* every slot on a page that holds nothing: take them back as any span
	 * whose free slots were all reclaimed */
	if (!sp->free)
		span_unreclaim(h, sp);
	bin_push(h, &h->bins[cls], sp);
	SPAN_CHECK(sp);
}

/*
 * Discard the pages of a live span that hold only free slots: span_free ->
 * returned for the slots whose every page goes (span_rebuild_free).
 */
void span_reclaim(struct heap *h, struct span *sp)
{
	uint32_t s = sp->size;
	uint16_t busy = 0;

	if (sp->slot_off)
		busy |= page_mask(0, sp->slot_off);
	/* the page of the bump cursor and beyond: untouched or already handed back,
	 * and slots still to be linked there. Once every slot is linked, the tail
	 * past the last slot is never written and its page goes as any other. */
	uint32_t bump_off = sp->slot_off + sp->bump * s;
	if (sp->bump < sp->nslots)
		busy |= page_mask(bump_off, (uint32_t)SPAN_SIZE - bump_off);
	for (uint32_t i = 0; i < sp->bump; i++)
		if (span_meta(sp)[i] != META_FREE)
			busy |= page_mask(sp->slot_off + i * s, s);
	uint16_t discardable = (uint16_t)~busy & (uint16_t)~sp->discarded;
	if (!discardable)
		return;
	char *base = span_base(sp);
	for (uint32_t p = 0; p < PAGES_PER_SPAN;) {
		if (!(discardable & (1u << p))) {
			p++;
			continue;
		}
		uint32_t q = p;
		while (q < PAGES_PER_SPAN && (discardable & (1u << q)))
			q++;
		heap_discard(h, base + p * OS_PAGE, (q - p) * OS_PAGE);
		p = q;
	}
	sp->discarded |= discardable;
	uint32_t returned = span_rebuild_free(sp);
	if (returned != sp->returned) {
		struct heap *a = heap_acct(h);
		uint64_t bytes = returned - sp->returned;
		sp->returned = returned;
		a->stats.pool -= bytes;
		a->stats.returned += bytes;
		ev(a, TALLY_EV_RECLAIM, 0, 0, 0, bytes);
	}
	SPAN_CHECK(sp);
}

/* Bring a span's foreign frees home: cache -> span_free. */
void span_drain(struct heap *h, struct span *sp)
{
	void *list = atomic_exchange_explicit(&sp->xfree, NULL, memory_order_acquire);
	uint32_t n = 0;

	for (void *p = list, *next; p; p = next) {
		uint32_t i = span_slot_index(sp, p);
		next = *(void **)p;
		free_link_check(p, next);
		sp->xbytes += meta_requested(sp->size, span_meta(sp)[i]);
		span_meta(sp)[i] = META_FREE;
		span_push_free(sp, p);
		n++;
	}
	if (!n)
		return;
	sp->used -= n;
	sp->ndrained += n;
	uint64_t bytes = (uint64_t)n * sp->size;
	h->stats.cache -= bytes;
	ev(h, TALLY_EV_DRAIN, 0, 0, 0, bytes);
	span_free_slow(h, sp);
}

/* A local free (or a drain) found the span full, clean or empty. */
void span_free_slow(struct heap *h, struct span *sp)
{
	if (!(sp->flags & SPAN_DIRTY)) {
		span_set_flags(sp, sp->flags | SPAN_DIRTY);
		sp->stamp_ms = h->now_ms;
		sp->dirty_next = h->dirty;
		h->dirty = sp;
		purge_kick(h);
	}
	struct bin *b = span_bin(h, sp);
	if (sp->flags & SPAN_FULL) {
		span_set_flags(sp, sp->flags & ~SPAN_FULL);
		bin_push_behind(h, b, sp); /* the current span stays current */
	}
	/* The bin's current span stays active when it empties: a pattern that
	 * allocates and frees one object must not move a span in and out of
	 * hysteresis on every call. A sweep returns its pages all the same. */
	if (span_used(sp) == 0 && b->head != sp)
		span_make_empty(h, sp);
}

/* Refill the free list of an active span; false when it has no free slot. */
static bool span_refill_free(struct heap *h, struct span *sp)
{
	return sp->free || span_bump(h, sp) || span_unreclaim(h, sp);
}

/*
 * A span of bin b with a free slot, made the bin's current span: the current
 * one, the next active one once the full ones have left the list, or an
 * empty one used again. NULL when the bin has none: the heap then claims an
 * unassigned span for the class (heap_refill).
 */
struct span *span_find_free(struct heap *h, struct bin *b)
{
	struct span *sp;

	while ((sp = b->head)) {
		if (span_refill_free(h, sp))
			return sp;
		/* full: out of the list until a free brings it back */
		bin_remove(h, b, sp);
		span_set_flags(sp, sp->flags | SPAN_FULL);
	}
	if ((sp = b->empty)) {
		span_reactivate(h, sp);
		/* all its free slots may be on pages handed back, when a sweep
		 * came between a free and its slow part (heap_settle, at the
		 * start of free_tail): take them back */
		if (span_refill_free(h, sp))
			return sp;
	}
	return NULL;
}

/* Class cls of the heap's current group claims the unassigned span sp: it
 * becomes the bin's current span, with its first page of slots linked. */
void span_claim(struct heap *h, struct span *sp, unsigned cls)
{
	span_init(h, sp, cls);
	bin_push(h, &h->bins[cls], sp);
	span_bump(h, sp);
	SPAN_CHECK(sp);
}
