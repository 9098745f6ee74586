/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The links a loader holds (loader.c, cuda.c, glibc.c): a fixed array and
 * its count, kept and let go the same way by each, so that a partial attach
 * is undone the same way everywhere.
 */
#ifndef TALLY_LINKS_H
#define TALLY_LINKS_H

#include <errno.h>

#include <bpf/libbpf.h>

/* Keep a link just made (NULL: not made, errno says why) in links[*n] of
 * cap: 0, or -errno (-ENOSPC past cap, the link destroyed). */
static inline int links_keep(struct bpf_link **links, unsigned *n, unsigned cap,
			     struct bpf_link *link)
{
	if (!link)
		return -errno;
	if (*n == cap) {
		bpf_link__destroy(link);
		return -ENOSPC;
	}
	links[(*n)++] = link;
	return 0;
}

/* Destroy the links from links[first] on: what one attach made, or all. */
static inline void links_drop_to(struct bpf_link **links, unsigned *n, unsigned first)
{
	while (*n > first)
		bpf_link__destroy(links[--*n]);
}

#endif /* TALLY_LINKS_H */
