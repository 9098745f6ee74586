/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * uprobe_multi links (kernel 6.6), made with BPF_LINK_CREATE itself: the
 * libbpf tally builds with (1.1) predates them. One link holds a program
 * on any number of offsets of one file, each with its cookie and, for a
 * USDT probe, its semaphore. Letting one go costs a few ms; a perf-event
 * uprobe's release waits for a grace period under the tracing core's
 * event_mutex (~70 ms here, one after another however many threads let go).
 * The programs are loaded for it: expected_attach_type
 * UPROBE_MULTI_ATTACH_TYPE.
 */
#ifndef TALLY_UPROBE_MULTI_H
#define TALLY_UPROBE_MULTI_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

/* include/uapi/linux/bpf.h of kernels since 6.6, which the headers tally
 * builds with may predate: BPF_TRACE_UPROBE_MULTI. */
#define UPROBE_MULTI_ATTACH_TYPE 48

/* prog_fd on n offsets of `path` (file offsets, as uprobes take them),
 * with their cookies; ref_ctr: the semaphores' file offsets, or NULL;
 * pid: that process only, or 0 (every process that maps the file); ret:
 * return probes. The link's fd, or a negative errno. */
int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *off, const uint64_t *ref_ctr,
		      const uint64_t *cookies, unsigned n, pid_t pid, bool ret);
struct bpf_object;
/* Before obj's load: its programs whose section is one of `sections`
 * (NULL-ended) are loaded for uprobe_multi links. 0 or a negative errno. */
int uprobe_multi_prepare(struct bpf_object *obj, const char *const *sections);
/* Whether this kernel makes uprobe_multi links (a probe the first time);
 * TALLY_UPROBE_MULTI=off says no, so that the tests run the perf-event path
 * of older kernels (the USDT probes'; the driver's have no other). */
bool uprobe_multi_supported(void);
/* Close the n fds (links) side by side, each on a thread of its own: the
 * grace periods their releases wait for overlap. Returns once all are
 * closed; an fd < 0 is skipped. */
void uprobe_multi_close(const int *fds, unsigned n);

#endif /* TALLY_UPROBE_MULTI_H */
