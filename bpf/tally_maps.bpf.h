/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The maps tally's BPF objects share (BPF side only). tally.bpf.c creates
 * them; the other objects declare them identically and their loaders hand
 * them tally.bpf.c's (bpf_map__reuse_fd), so that every record goes to one
 * ring buffer, every drop to one counter, and every object sees the group
 * the SDK's probes and the scheduler programs keep per thread.
 */
#ifndef TALLY_MAPS_BPF_H
#define TALLY_MAPS_BPF_H

#include "tally_bpf.h"
#include "contract/tally_events.h"

/* sized by the loader (--ring-mb) */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 4096);
} events SEC(".maps");

struct {
	__uint(type, BPF_MAP_TYPE_PERCPU_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, struct tally_lost);
} lost SEC(".maps");

#include "tally_threads.bpf.h"

#endif /* TALLY_MAPS_BPF_H */
