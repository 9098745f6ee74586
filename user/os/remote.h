/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Reading a running target's allocator and SDK state from its memory
 * (process_vm_readv): the starting point of a late attach and the allocator's
 * own figures for a snapshot taken while the target runs (docs/DESIGN.md §8).
 */
#ifndef TALLY_REMOTE_H
#define TALLY_REMOTE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../../bpf/contract/sdk_registry.h"
#include "../../alloc/include/tally_alloc.h"
#include "../../bpf/contract/tally_events.h"
#include "../model/alloc_state.h"

/* Bounds on a walk of a target's memory, which is untrusted input: lists that
 * loop, or lengths beyond these, fail the read (-ELOOP, -E2BIG) rather than
 * run on. 65536 heaps (threads that ever allocated) and 65536 segments
 * (256 GiB of small blocks) are far beyond the programs tally is meant for.
 * Only the fuzzer's build sets others (tests/fuzz), to keep each input short. */
/* And on its time: past remote_read_max_ns (5 s) a read fails (-ETIME). */
extern uint64_t remote_read_max_ns;
#ifndef REMOTE_MAX_HEAPS
#define REMOTE_MAX_HEAPS 65536U
#endif
#ifndef REMOTE_MAX_SEGMENTS
#define REMOTE_MAX_SEGMENTS 65536U
#endif

/* A cut's request (docs/DESIGN.md §8, alloc/cut.c): a number no heap of the
 * target can have answered yet (the clock's, and past the last one), with
 * CUT_FIGURES when each heap's figures are wanted too, written at req_addr
 * (the target's `tally_cut.req`). The reads below, given it, take each
 * heap's answer where it has one. 0 or -errno. */
int remote_cut_request(pid_t pid, uint64_t req_addr, bool figures, uint64_t *req);
/* That every heap was read for req (tally_cut.done, beside req): 0 or -errno. */
int remote_cut_done(pid_t pid, uint64_t req_addr, uint64_t req);
/* (*req is 0 when it could not be written; set, with an error, when the
 * barrier after it failed: heaps read busy-free may then be mid-operation.) */

/* The allocator's state: heaps_addr is the address of `tally_heaps` in the
 * target; req the request made just before (0: none). 0 or -errno (-ESRCH:
 * the target is gone; -ELOOP, -E2BIG, -EPROTO: its state is corrupt, or
 * hostile, and was not used). */
int remote_alloc_read(pid_t pid, uint64_t heaps_addr, uint64_t req, struct remote_alloc *out);
/* Only each heap's position and pending records (no figures): cheap enough
 * for every refresh of a view. */
int remote_pending_read(pid_t pid, uint64_t heaps_addr, uint64_t req, struct remote_alloc *out);
void remote_alloc_free(struct remote_alloc *ra);
/* What a failed read means, for a one-line message. */
const char *remote_strerror(int err);
/* The SDK's registry at `addr` (symbol tally_registry of libtally.so). */
int remote_registry_read(pid_t pid, uint64_t addr, struct tally_registry *out);

/* Where struct heap's fields lie in this build of the allocator (alloc/heap.h),
 * for a reader that walks the heaps without this file: the OOM program
 * (bpf/tally_oom.bpf.h), which reads them from inside the victim. */
struct remote_heap_layout {
	uint32_t next, id, tid, seq, batch;
	uint32_t handing;		/* who hands its batch over (a byte) */
	uint32_t hand_free, hand_owner; /* ... its values: nobody, its owner */
};
void remote_heap_layout(struct remote_heap_layout *out);

/* Where the reads above take the target's memory from: process_vm_readv for
 * the functions above; anything else for tests and the fuzzer (tests/fuzz).
 * read fills all len bytes at addr and returns 0, or returns -errno (a
 * partial read is -EFAULT); the reader then fails with that error. */
struct remote_mem {
	int (*read)(void *ctx, uint64_t addr, void *buf, size_t len);
	void *ctx;
};
/* remote_alloc_read (spans true) or remote_pending_read (false) from `mem`. */
int remote_alloc_read_mem(const struct remote_mem *mem, uint64_t heaps_addr, bool spans,
			  uint64_t req, struct remote_alloc *out);
int remote_registry_read_mem(const struct remote_mem *mem, uint64_t addr,
			     struct tally_registry *out);

#endif /* TALLY_REMOTE_H */
