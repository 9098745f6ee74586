/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What every BPF object of tally needs (BPF side only): the target it
 * watches, the calling thread's group, and a map lookup that creates the
 * entry it does not find.
 */
#ifndef TALLY_COMMON_BPF_H
#define TALLY_COMMON_BPF_H

#include "tally_bpf.h"
#include "contract/tally_events.h"
#include "tally_threads.bpf.h"

/* The target's tgid: read-only data, set by the object's loader before load. */
const volatile __u32 target_tgid = 0;

/* The probe fired in a thread of the target (upper half: the tgid). */
static __always_inline bool in_target(void)
{
	return (bpf_get_current_pid_tgid() >> 32) == target_tgid;
}

/* The calling thread's current group: root for a thread not seen yet, and
 * for an id past the group table (the SDK in the target, which is not
 * trusted, writes it; tally.bpf.c charges no CPU to such an id either). */
static __always_inline __u32 current_group(void)
{
	__u32 tid = (__u32)bpf_get_current_pid_tgid();
	struct tally_bpf_thread *t = bpf_map_lookup_elem(&threads, &tid);
	__u32 g = t ? t->group : 0;

	return g < TALLY_MAX_GROUPS ? g : 0;
}

/* The value at key, after inserting *init there if there was none (as
 * libbpf-tools' bpf_map_lookup_or_try_init). NULL when the map is full; of
 * two CPUs racing to insert, one value wins and both get it. */
static __always_inline void *map_lookup_or_init(void *map, const void *key, const void *init)
{
	void *v = bpf_map_lookup_elem(map, key);

	if (v)
		return v;
	bpf_map_update_elem(map, key, init, BPF_NOEXIST);
	return bpf_map_lookup_elem(map, key);
}

/* A message's header (tally_events.h): what it is, whose, when. */
static __always_inline void fill_hdr(struct tally_msg *m, __u16 kind, __u32 tid, __u32 pid,
				     __u64 now)
{
	m->kind = kind;
	m->flags = 0;
	m->tid = tid;
	m->ts_ns = now;
	m->pid = pid;
	m->ns_pid = 0;
}

/* The calling thread's tid and tgid, as the header has them. */
static __always_inline void fill_hdr_current(struct tally_msg *m, __u16 kind, __u64 now)
{
	__u64 id = bpf_get_current_pid_tgid();

	fill_hdr(m, kind, (__u32)id, (__u32)(id >> 32), now);
}

#endif /* TALLY_COMMON_BPF_H */
