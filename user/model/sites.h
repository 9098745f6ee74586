/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A process's heap profile by call site (docs/DESIGN.md §7), rebuilt from the
 * allocator's sample records: stacks interned, and per site (a stack in a
 * resource group) the estimated bytes and objects allocated and still in
 * use. A sample of S bytes drawn at rate R stands for 1 / (1 - exp(-S/R))
 * blocks of S bytes (Go's and jemalloc's scaling), so that the sums are
 * unbiased; at rate 1 every block is sampled and counts once. Pure code.
 */
#ifndef TALLY_SITES_H
#define TALLY_SITES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../../bpf/contract/tally_events.h"
#include "replay.h"

struct sites_stack {
	uint64_t hash;
	uint32_t off; /* first frame in sites.pcs */
	uint32_t n;   /* frames, the allocation's caller first */
};

/* Lifetimes of sampled blocks, from their sample to their free (as the
 * process measured them: SAMPLE_FREE's n): below 1 ms, 10 ms, 100 ms,
 * 1 s, 10 s, and longer. */
#define SITES_LIFE_BUCKETS 6
/* The bucket of a lifetime of `us` microseconds. */
unsigned sites_life_bucket(uint64_t us);

/* A stack in a group. Estimates, as doubles: they are sums of scaled samples. */
struct site {
	uint32_t stack;
	uint16_t group;
	double alloc_bytes, alloc_objects;
	double inuse_bytes, inuse_objects;
	uint64_t samples; /* samples taken here */
	/* in use at the replay's peak, kept lazily as the replay keeps a
	 * group's (struct tally_replay): taken at the site's first change
	 * after the peak; `changed`: the replay's records then */
	double peak_bytes, peak_objects;
	uint64_t changed;
	/* objects freed after each lifetime (sites_life_bucket), estimated;
	 * those whose free said none are not counted here */
	double life[SITES_LIFE_BUCKETS];
};

/* An object frames lie in, as the process announced it (TALLY_EV_MODULE). */
struct sites_module {
	bool program;	     /* the program itself, not a library */
	uint64_t bias;	     /* process address - file address */
	uint64_t start, end; /* its mapping */
	uint32_t path, len;  /* its path: sites.names[path .. path + len) */
};

/* A sampled block still live: what its free takes off its site; or one
 * whose free came before its sample (site SITES_FREED). */
#define SITES_FREED UINT32_MAX
struct sites_live {
	uint64_t id; /* 0: empty slot */
	uint32_t site;
	double bytes, objects;
	/* its birth, as its SAMPLE record says; SITES_FREED: its free's n */
	uint64_t born_ns;
};

struct sites {
	uint64_t *pcs; /* every interned stack's frames */
	size_t npcs, cap_pcs;
	struct sites_stack *stacks;
	size_t nstacks, cap_stacks;
	uint32_t *stack_ix; /* hash index into stacks (+1; 0: empty) */
	size_t cap_stack_ix;
	struct site *v;
	size_t n, cap;
	uint32_t *site_ix; /* hash index of (stack, group) into v (+1) */
	size_t cap_site_ix;
	struct sites_live *live; /* open addressing by id */
	size_t nlive, cap_live;
	uint64_t samples, frees; /* records applied */
	/* frees of a block not sampled yet: its sample is in another thread's
	 * batch still on its way, or it was sampled before the attach (or its
	 * record was refused); `early` of them are still waiting */
	uint64_t unknown_frees, early;
	uint64_t refused; /* malformed records, or no memory */
	uint64_t rate;	  /* the rate of the last sample (the profile's period) */
	/* the replay whose records these samples come among, for the peak:
	 * set by the caller before each use, as tally_replay.sample_ctx
	 * (models move); NULL: no peak kept */
	const struct tally_replay *clock;
	bool settled; /* sites_settle: peak_bytes and peak_objects are final */
	struct sites_module *mods;
	size_t nmods, cap_mods;
	char *names; /* the modules' paths, one after the other */
	size_t nnames, cap_names;
	/* a late attach: what each group had live then, which no sample
	 * covers (docs/DESIGN.md §7: one site, named for what it is); NULL: none
	 * (a process's model is copied at each fork: this stays small) */
	struct sites_seed {
		int64_t bytes, objects;
	} * seed; /* TALLY_MAX_GROUPS of them */
};

void sites_init(struct sites *s);
void sites_free(struct sites *s); /* leaves s empty */
/* An ended process's: what a profile reads kept, the rest freed. */
void sites_trim(struct sites *s);
/* The bytes it holds, beside the struct. */
size_t sites_bytes(const struct sites *s);
/* exec: the old image's blocks are gone */
void sites_reset(struct sites *s);
/* fork: the child's live samples are its parent's: 0 or -ENOMEM */
int sites_copy(struct sites *dst, const struct sites *src);
/* A late attach's state read: what each group had live then. -ENOMEM. */
int sites_seed(struct sites *s, const struct tally_replay *r);
/* The replay's hook (struct tally_replay.on_sample): ctx is the sites. */
void sites_on_record(void *ctx, const struct tally_ev *e, const __u64 *extra);
/* The module holding a process address (the latest announced), or NULL. */
const struct sites_module *sites_module_of(const struct sites *s, uint64_t pc);
/* The weight of one sample of `bytes` drawn at `rate`: the blocks it stands for. */
double sites_weight(uint64_t bytes, uint64_t rate);
/* A site's estimated bytes and objects in use at the peak of `r` (the
 * replay its records came through; NULL once settled). */
void sites_at_peak(const struct sites *s, const struct site *st, const struct tally_replay *r,
		   double *bytes, double *objects);
/* An ended process's: each site's figures at r's peak fixed, for a reader
 * without the replay. */
void sites_settle(struct sites *s, const struct tally_replay *r);
/* Per site (indexed as s->v), the estimated bytes and objects allocated
 * at or after since_ns and still in use: bytes[i], objects[i] (zeroed
 * here). Walks the live samples. */
void sites_recent(const struct sites *s, uint64_t since_ns, double *bytes, double *objects);
/* Estimated in-use bytes of every site together. */
double sites_inuse(const struct sites *s);
static inline const uint64_t *sites_frames(const struct sites *s, const struct site *st,
					   uint32_t *n)
{
	*n = s->stacks[st->stack].n;
	return &s->pcs[s->stacks[st->stack].off];
}

#endif /* TALLY_SITES_H */
