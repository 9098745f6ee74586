/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The target's threads (BPF side only): each thread's current group and the
 * start of the CPU interval being timed. tally.bpf.c creates the map; every
 * other object declares it identically and its loader hands it tally.bpf.c's
 * (bpf_map__reuse_fd), so all see the group the SDK's probes and the
 * scheduler programs keep. An object loaded alone sees it empty: group 0.
 */
#ifndef TALLY_THREADS_BPF_H
#define TALLY_THREADS_BPF_H

#include "tally_bpf.h"

struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_THREADS);
	__type(key, __u32);
	__type(value, struct tally_bpf_thread);
} threads SEC(".maps");

#endif /* TALLY_THREADS_BPF_H */
