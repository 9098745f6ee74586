/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A Chrome trace-event file (the object form, {"traceEvents": [...]}) that
 * Perfetto's UI and chrome://tracing open, written as the session goes:
 * every event is streamed through a struct json_writer as soon as it is
 * known, so memory stays bounded however long the recording (a depth per
 * live thread is all that is kept).
 *
 * What it holds:
 *   - "M" process_name and thread_name metadata;
 *   - "C" counters at each sample: every Stats term that is known, each
 *     group's live bytes and CPU ns, the SDK's yields and rejections and
 *     the GPU gauges when there are any;
 *   - "B"/"E" slices for SDK group enter/exit on each thread, balanced on
 *     every thread (see trace_message() for the unmatched cases);
 *   - "i" instant events for GPU launches, device memory, pinned host memory
 *     and module images, SDK rejections (not yields: thousands a second
 *     would swamp the file; they are a counter), and a global "events lost"
 *     marker wherever the ring buffer dropped messages.
 *
 * Timestamps ("ts") are microseconds (with ns decimals) since the session's
 * start, from the messages' CLOCK_MONOTONIC stamps. Pure code apart from the
 * FILE it writes: the counters are a struct figures (figures.h).
 */
#ifndef TALLY_TRACE_H
#define TALLY_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "../model/figures.h"
#include "../model/model.h"

struct trace;

/* A trace to f (not closed by the trace) of process pid, whose ts 0 is
 * start_ns: 0 or -ENOMEM. Writes the opening of the document. */
int trace_new(struct trace **out, FILE *f, uint32_t pid, uint64_t start_ns);
void trace_free(struct trace *t);
/* The process's name, and the name and current group of each thread the
 * model already knows (a late attach): a thread that was inside a group
 * before tally came gets a slice from ts 0. */
void trace_begin(struct trace *t, const struct model *m, const char *comm);
/*
 * One ring message, after the model applied it (names and kernel names come
 * from the model). GROUP_ENTER opens a slice on the thread; GROUP_EXIT
 * closes the innermost open one. An exit with no open slice (the thread
 * entered before tally attached, or the enter was lost) opens a slice for
 * the group it returns to, unless that is root, so the thread still shows
 * where it is; the exit's own slice, whose start is unknown, is not drawn.
 * THREAD_EXIT closes what the thread left open.
 */
void trace_message(struct trace *t, const struct model *m, const void *data, size_t len);
/* Counters of the figures at now_ns; a lost-events marker when more were
 * lost since the last sample. */
void trace_sample(struct trace *t, const struct figures *f, uint64_t now_ns);
/* Threads' names as the model has them at the end, every open slice closed
 * at now_ns, then the end of the document: 0 or the writer's -errno. */
int trace_end(struct trace *t, const struct model *m, uint64_t now_ns, const struct figures *f);
/* Slices open now on all threads (for tests and the caller's report). */
uint64_t trace_open_slices(const struct trace *t);

#endif /* TALLY_TRACE_H */
