// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The threads of a trace with group slices open (trace_threads.h): an
 * open-addressing table by tid, without tombstones. */
#include <errno.h>
#include <stdlib.h>

#include "../../alloc/common/hash.h"
#include "trace_threads.h"

/* Fibonacci hashing: the product's high bits, which every bit of the tid
 * stirs (the low bits would only see the tid's low bits). */
static size_t hash_tid(uint32_t tid, unsigned shift)
{
	return hash_fib32(tid) >> shift;
}

static size_t slot_of(const struct trace_threads *t, uint32_t tid)
{
	return hash_tid(tid, t->shift);
}

struct trace_thread *trace_thread_find(struct trace_threads *t, uint32_t tid)
{
	if (!t->cap)
		return NULL;
	for (size_t i = slot_of(t, tid);; i = (i + 1) & (t->cap - 1)) {
		if (t->threads[i].tid == tid)
			return &t->threads[i];
		if (!t->threads[i].tid)
			return NULL;
	}
}

static int thread_grow(struct trace_threads *t)
{
	size_t cap = t->cap ? t->cap * 2 : 64;
	unsigned shift = t->cap ? t->shift - 1 : 32 - 6;
	struct trace_thread *old = t->threads, *a;

	if (cap > (1u << 30))
		return -ENOMEM;
	a = calloc(cap, sizeof(*a));
	if (!a)
		return -ENOMEM;
	for (size_t i = 0; i < t->cap; i++) {
		if (!old[i].tid)
			continue;
		size_t j = hash_tid(old[i].tid, shift);
		while (a[j].tid)
			j = (j + 1) & (cap - 1);
		a[j] = old[i];
	}
	free(old);
	t->threads = a;
	t->cap = cap;
	t->shift = shift;
	return 0;
}

struct trace_thread *trace_thread_add(struct trace_threads *t, uint32_t tid)
{
	size_t i;

	if ((t->n + 1) * 2 > t->cap && thread_grow(t))
		return NULL;
	for (i = slot_of(t, tid); t->threads[i].tid; i = (i + 1) & (t->cap - 1))
		;
	t->threads[i] = (struct trace_thread){ tid, 0 };
	t->n++;
	return &t->threads[i];
}

/* Backward-shift deletion: keeps every probe sequence unbroken without
 * tombstones, so the table never fills with dead slots. */
void trace_thread_del(struct trace_threads *t, struct trace_thread *th)
{
	size_t i = (size_t)(th - t->threads), j = i;

	for (;;) {
		j = (j + 1) & (t->cap - 1);
		if (!t->threads[j].tid)
			break;
		size_t home = slot_of(t, t->threads[j].tid);
		/* move j into the hole at i unless its home lies cyclically in (i, j] */
		if ((j > i && (home <= i || home > j)) || (j < i && home <= i && home > j)) {
			t->threads[i] = t->threads[j];
			i = j;
		}
	}
	t->threads[i].tid = 0;
	t->n--;
}

bool trace_name_changed(struct trace_threads *t, uint32_t pid, const char *name)
{
	uint32_t h = hash_fnv1a32_str(name) | 1; /* never 0: 0 is an empty depth */
	struct trace_thread *e = trace_thread_find(t, pid);

	if (e && e->depth == h)
		return false;
	if (!e && !(e = trace_thread_add(t, pid)))
		return false; /* without memory: named once more next time */
	e->depth = h;
	return true;
}
