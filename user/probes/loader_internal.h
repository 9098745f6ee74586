/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The loader's state (loader.h), for the files that make it up: loader.c
 * (the object's lifecycle, its probes, its ring) and loader_cpu.c (the
 * CPU charged by one loader for many sessions, serve --all).
 */
#ifndef TALLY_LOADER_INTERNAL_H
#define TALLY_LOADER_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "loader.h"

#define MAX_LINKS 32

struct tally_bpf;
struct ring_buffer;
struct bpf_link;
struct heap_rings;

struct loader {
	struct tally_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *links[MAX_LINKS];
	unsigned nlinks;
	bool multi;	     /* USDT probes on uprobe_multi links: */
	int ufds[MAX_LINKS]; /* theirs */
	unsigned nufds;
	unsigned nspecs; /* entries of __bpf_usdt_specs used: the cookies given */
	loader_msg_fn fn;
	void *ctx;
	uint64_t ring_bytes;
	bool follow;	 /* the probes fire in every process: the map says which are ours */
	bool no_switch;	 /* another loader charges the CPU (loader_share_cpu) */
	uint64_t budget; /* bytes this consume may still take */
	unsigned taken;
	bool more; /* the last consume stopped with records left */
	struct heap_rings *rings;
};

#endif /* TALLY_LOADER_INTERNAL_H */
