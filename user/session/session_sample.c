// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Sampling for heap profiles in a running process (session.h): what tally
 * writes into the allocator of a process it attaches to. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "../util/clock.h"
#include "session.h"
#include "../os/target.h"

void session_sample_attach(const struct session *s, pid_t pid)
{
	static const char *const names[] = { "tally_sample_rate", "tally_sample_epoch" };
	/* any value the allocator has not seen: it compares, nothing more */
	uint64_t v[2] = { s->sample_rate, clock_now_ns() | 1 };
	int err = target_lib_poke(pid, "libtally_alloc.so", names, v, 2);

	/* an allocator older than sampling has neither: no sites, figures
	 * whole; without the permission, or with the target gone meanwhile
	 * (ESRCH: it exited while the probes attached), the attach says so
	 * itself, in its one line */
	if (err && err != -ENOENT && err != -EPERM && err != -EACCES && err != -ESRCH)
		fprintf(stderr, "tally: cannot set the sampling rate in %d: %s\n", pid,
			strerror(-err));
}
