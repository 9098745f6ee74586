// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Bins: the lists an assigned span is on (bin.h says which, and when). */
#include "internal.h"

static void list_push(struct span **head, struct span *sp)
{
	sp->prev = NULL;
	sp->next = *head;
	if (*head)
		(*head)->prev = sp;
	*head = sp;
}

static void list_remove(struct span **head, struct span *sp)
{
	if (sp->prev)
		sp->prev->next = sp->next;
	else
		*head = sp->next;
	if (sp->next)
		sp->next->prev = sp->prev;
	sp->next = sp->prev = NULL;
}

/* The direct table's entries of b's class follow its current span, when b is
 * one of the current group's bins. */
static void bin_direct_sync(struct heap *h, struct bin *b)
{
	if (b < h->bins || b >= h->bins + CLASS_COUNT)
		return;
	unsigned c = (unsigned)(b - h->bins);
	struct span *cur = heap_direct_entry(h, b->head);
	for (unsigned i = tally_class_direct_lo[c]; i <= tally_class_direct_hi[c]; i++)
		h->direct[i] = cur;
	h->direct[DIRECT_CLASS(c)] = cur;
}

void bin_push(struct heap *h, struct bin *b, struct span *sp)
{
	list_push(&b->head, sp);
	bin_direct_sync(h, b);
}

/* Behind the current span, which stays current: a free that finds its span
 * full brings it back here. (Pushed at the head, then the current span taken
 * out and pushed back, it cost three syncs of the direct table, 100
 * instructions of the 140 such a free took in alloc-test, where a tenth of
 * the frees land in spans filled long before.) */
void bin_push_behind(struct heap *h, struct bin *b, struct span *sp)
{
	struct span *cur = b->head;
	if (!cur) {
		bin_push(h, b, sp);
		return;
	}
	sp->prev = cur;
	sp->next = cur->next;
	if (cur->next)
		cur->next->prev = sp;
	cur->next = sp;
}

void bin_remove(struct heap *h, struct bin *b, struct span *sp)
{
	bool cur = b->head == sp;
	list_remove(&b->head, sp);
	if (cur) /* the direct table mirrors the head alone */
		bin_direct_sync(h, b);
}

void bin_push_empty(struct heap *h, struct bin *b, struct span *sp)
{
	list_push(&b->empty, sp);
	/* the newest at the tail */
	sp->lru_next = NULL;
	sp->lru_prev = h->lru_tail;
	if (h->lru_tail)
		h->lru_tail->lru_next = sp;
	else
		h->lru_head = sp;
	h->lru_tail = sp;
}

void bin_remove_empty(struct heap *h, struct bin *b, struct span *sp)
{
	list_remove(&b->empty, sp);
	if (sp->lru_prev)
		sp->lru_prev->lru_next = sp->lru_next;
	else
		h->lru_head = sp->lru_next;
	if (sp->lru_next)
		sp->lru_next->lru_prev = sp->lru_prev;
	else
		h->lru_tail = sp->lru_prev;
	sp->lru_next = sp->lru_prev = NULL;
}
