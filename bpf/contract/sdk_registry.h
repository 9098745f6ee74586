/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The SDK's state in process memory (libtally.so, symbol `tally_registry`):
 * group names, per-group yield and reject counters, and each thread's current
 * group. A tracer that attaches late reads it (process_vm_readv) and starts
 * from the true state (docs/DESIGN.md §3, §8). Layout is part of the contract.
 */
#ifndef TALLY_SDK_REGISTRY_H
#define TALLY_SDK_REGISTRY_H

#include <stdint.h>

#include "tally_events.h"

#define TALLY_REGISTRY_MAGIC 0x7a11e9a1u
#define TALLY_REGISTRY_VERSION 1
#define TALLY_MAX_THREADS 4096

struct tally_registry_thread {
	uint32_t tid;	/* 0: slot free */
	uint32_t group; /* the thread's current group */
};

struct tally_registry {
	uint32_t magic;
	uint32_t version;
	uint32_t ngroups;	  /* ids 0 .. ngroups-1 are registered */
	uint32_t threads_dropped; /* threads that found no free slot below */
	uint64_t yields[TALLY_MAX_GROUPS];
	uint64_t rejects[TALLY_MAX_GROUPS];
	char names[TALLY_MAX_GROUPS][TALLY_GROUP_NAME_MAX]; /* NUL-terminated */
	struct tally_registry_thread threads[TALLY_MAX_THREADS];
};

#endif /* TALLY_SDK_REGISTRY_H */
