// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The layouts of large ranges (large_layout.h): a fixed table of records,
 * one per range of several mappings. When it is full, no range of several
 * mappings is made (large_pool.c composes no block), so the mappings the
 * allocator adds stay under LAY_RECORDS * LAY_BOUNDS_MAX.
 */
#include "internal.h"
#include "large_layout.h"

#define LAY_RECORDS 512

static struct lay_bounds recs[LAY_RECORDS];
static bool used[LAY_RECORDS];
static uint32_t nused;

void lay_load(uint32_t lay, struct lay_bounds *b)
{
	if (lay)
		*b = recs[lay - 1];
	else
		b->n = 0;
}

void lay_drop(uint32_t lay)
{
	if (lay) {
		used[lay - 1] = false;
		nused--;
	}
}

bool lay_room(void)
{
	return nused < LAY_RECORDS;
}

/* b stored as lay (0: in a record of its own): the handle, 0 when b has no
 * bound, LAY_NONE when it needs a record and none is free. */
uint32_t lay_put(uint32_t lay, const struct lay_bounds *b)
{
	if (!b->n) {
		lay_drop(lay);
		return 0;
	}
	for (uint32_t i = 0; !lay && i < LAY_RECORDS; i++)
		if (!used[i]) {
			used[i] = true;
			nused++;
			lay = i + 1;
		}
	if (lay)
		recs[lay - 1] = *b;
	return lay ? lay : LAY_NONE;
}

/* The bounds of lay before byte offset at. */
uint32_t lay_below(uint32_t lay, size_t at)
{
	uint32_t n = 0;

	if (lay)
		while (n < recs[lay - 1].n && recs[lay - 1].off[n] < at / OS_PAGE)
			n++;
	return n;
}

/* b's bounds split at byte offset at: those before it, and those after it
 * counted from it (one at it is a bound of neither). */
void lay_cut(const struct lay_bounds *b, size_t at, struct lay_bounds *head,
	     struct lay_bounds *tail)
{
	uint32_t pg = (uint32_t)(at / OS_PAGE);
	struct lay_bounds h = { 0 }, t = { 0 };

	for (uint32_t i = 0; i < b->n; i++) {
		if (b->off[i] < pg)
			h.off[h.n++] = b->off[i];
		else if (b->off[i] > pg)
			t.off[t.n++] = b->off[i] - pg;
	}
	if (head)
		*head = h;
	if (tail)
		*tail = t;
}

/* A range of part's bounds placed at byte offset at of b's range (past all
 * of b's): a bound at at, where at is not 0, and part's. false: too many. */
bool lay_append(struct lay_bounds *b, size_t at, const struct lay_bounds *part)
{
	uint32_t pg = (uint32_t)(at / OS_PAGE);

	if (b->n + (pg != 0) + part->n > LAY_BOUNDS_MAX)
		return false;
	if (pg)
		b->off[b->n++] = pg;
	for (uint32_t i = 0; i < part->n; i++)
		b->off[b->n++] = part->off[i] + pg;
	return true;
}
