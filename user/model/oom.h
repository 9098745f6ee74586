/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A process the OOM killer chose (TALLY_MSG_OOM, bpf/tally_oom.bpf.h), as
 * the model and the figures keep it: what the kernel said at the choice,
 * and the cgroups' paths, which the session resolves (user/os/cgroup_id.c)
 * as plain values. Plain data (docs/STYLE.md rule 8).
 */
#ifndef TALLY_MODEL_OOM_H
#define TALLY_MODEL_OOM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"

#define OOM_PATH_MAX 256

struct model_oom {
	bool killed;			 /* the OOM killer chose it */
	struct tally_msg_oom msg;	 /* what it saw then */
	char cgroup[OOM_PATH_MAX];	 /* msg.cgroup_id's path in its hierarchy ("": not found) */
	char limit_cgroup[OOM_PATH_MAX]; /* msg.limit_cgroup_id's */
};

/* Where the session stands in giving the OOM program a process's heaps
 * (user/session/session_oom.c): the address given, its next look. */
struct oom_arm {
	uint64_t pushed;   /* tally_heaps's address in the BPF map (0: none yet) */
	uint64_t retry_ns; /* CLOCK_MONOTONIC of the next look for the allocator */
	unsigned tries;	   /* looks so far in this image */
};

/* The cgroup file the limit is written in (NULL: none was reached). */
static inline const char *model_oom_limit_file(const struct tally_msg_oom *m)
{
	if (m->limit == TALLY_OOM_NO_LIMIT)
		return NULL;
	return !m->v1	? "memory.max" :
	       m->memsw ? "memory.memsw.limit_in_bytes" :
			  "memory.limit_in_bytes";
}

/* Every record its heaps held at the choice reached the model: its figures
 * are those of that moment, though no exit hand-over came (a SIGKILL). */
static inline bool model_oom_whole(const struct model_oom *o)
{
	return o->killed && (o->msg.hdr.flags & TALLY_OOM_HEAPS_ALL);
}

#endif /* TALLY_MODEL_OOM_H */
