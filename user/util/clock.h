/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/* The tracer's one clock: CLOCK_MONOTONIC, the clock the BPF side stamps
 * its messages with (bpf_ktime_get_ns), in nanoseconds. */
#ifndef TALLY_CLOCK_H
#define TALLY_CLOCK_H

#include <stdint.h>
#include <time.h>

#define NSEC_PER_SEC 1000000000ULL
#define NSEC_PER_MSEC 1000000ULL

static inline uint64_t clock_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC_PER_SEC + (uint64_t)ts.tv_nsec;
}

#endif /* TALLY_CLOCK_H */
