/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The processes of the traced tree (BPF side only): tally.bpf.c keeps the
 * map, bpf/cuda.bpf.c shares it (its loader reuses tally.bpf.c's fd).
 */
#ifndef TALLY_PROCS_BPF_H
#define TALLY_PROCS_BPF_H

#include "tally_bpf.h"

/* key: tgid, value: its parent's tgid. The root, seeded by the loader, and
 * with `follow` every process one of them starts, added at its fork. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u32);
} procs SEC(".maps");

static __always_inline bool tgid_in_tree(__u32 tgid)
{
	return bpf_map_lookup_elem(&procs, &tgid) != NULL;
}

/* The probe fired in a process of the tree. The probes sit on the files,
 * for every process that maps them: the map says which are ours. */
static __always_inline bool in_tree(void)
{
	return tgid_in_tree((__u32)(bpf_get_current_pid_tgid() >> 32));
}

#endif /* TALLY_PROCS_BPF_H */
