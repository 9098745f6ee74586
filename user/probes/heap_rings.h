/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The shared rings traced heaps put their full batches in (struct
 * tally_ring, bpf/contract/tally_events.h; alloc/common/ring.c): mapped here from the
 * process, read in place, and handed to the loader's callback as if the BPF
 * ring had carried them, each heap's batches in the order of their records.
 */
#ifndef TALLY_HEAP_RINGS_H
#define TALLY_HEAP_RINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "loader.h"

struct heap_rings;

struct heap_rings *heap_rings_new(loader_msg_fn fn, void *ctx);
/* Unmaps every ring; what they still hold is not read. */
void heap_rings_free(struct heap_rings *r);
/* A message from the BPF ring, before the callback takes it: a ring's
 * announcement is taken up; before a heap's batch, its ring's older
 * batches are delivered; before a process's last words (its allocator's
 * figures at exit, the exit of its last thread), all its rings hold.
 * Returns LOADER_STOP when the callback asked for it on one of those
 * (delivered all the same), another -errno on its error, else 0. */
int heap_rings_before(struct heap_rings *r, const void *data, size_t len);
/* Deliver what the rings hold, in order; all: also past a gap in a heap's
 * order (a batch the BPF ring lost), as at the end. The number delivered,
 * or LOADER_STOP / -errno as above. */
int heap_rings_drain(struct heap_rings *r, bool all);
/* Rings another tracer took first: their batches never reach this one. */
uint64_t heap_rings_missed(const struct heap_rings *r);
/* Batches read from the rings so far. */
uint64_t heap_rings_read(const struct heap_rings *r);
/* ... from the rings of one process; forget: it has ended, and its count
 * goes (a later process with its pid counts from zero). */
uint64_t heap_rings_read_pid(struct heap_rings *r, uint32_t pid, bool forget);
/* Whether any ring is mapped: the caller polls more often while they are. */
bool heap_rings_active(const struct heap_rings *r);

#endif /* TALLY_HEAP_RINGS_H */
