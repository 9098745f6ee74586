/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The threads of a trace (trace.c) with group slices open, and how deep:
 * a slice begun is ended on its thread, at the latest when the thread or the
 * trace ends. Pure code.
 */
#ifndef TALLY_TRACE_THREADS_H
#define TALLY_TRACE_THREADS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A thread with slices open; tid 0 marks an empty slot (no thread of a
 * traced process has tid 0). */
struct trace_thread {
	uint32_t tid;
	uint32_t depth; /* open slices, > 0 while in the table */
};

struct trace_threads {
	struct trace_thread *threads;
	size_t cap, n;	/* cap a power of two, n < cap / 2 */
	unsigned shift; /* 32 - log2(cap) */
};

/* The thread's entry, or NULL. */
struct trace_thread *trace_thread_find(struct trace_threads *t, uint32_t tid);
/* A new entry (depth 0) for a tid not in the table; NULL without memory. */
struct trace_thread *trace_thread_add(struct trace_threads *t, uint32_t tid);
/* th's entry goes (others may move into its slot). */
void trace_thread_del(struct trace_threads *t, struct trace_thread *th);
/* The same table by pid, depth a hash of the name its track was last given:
 * whether `name` differs (and is now the one). */
bool trace_name_changed(struct trace_threads *t, uint32_t pid, const char *name);

#endif /* TALLY_TRACE_THREADS_H */
