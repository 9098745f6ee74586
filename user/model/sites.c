// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A process's heap profile by call site, from sample records (sites.h). */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "../../alloc/common/hash.h"
#include "../util/grow.h"
#include "sites.h"

void sites_init(struct sites *s)
{
	memset(s, 0, sizeof(*s));
}

void sites_free(struct sites *s)
{
	free(s->pcs);
	free(s->stacks);
	free(s->stack_ix);
	free(s->v);
	free(s->site_ix);
	free(s->live);
	free(s->mods);
	free(s->names);
	free(s->seed);
	sites_init(s);
}

void sites_trim(struct sites *s)
{
	free(s->stack_ix);
	free(s->site_ix);
	free(s->live);
	free(s->seed);
	s->stack_ix = s->site_ix = NULL;
	s->live = NULL;
	s->seed = NULL;
	s->cap_stack_ix = s->cap_site_ix = s->cap_live = s->nlive = 0;
}

size_t sites_bytes(const struct sites *s)
{
	return s->cap_pcs * sizeof(*s->pcs) + s->cap_stacks * sizeof(*s->stacks) +
	       s->cap_stack_ix * sizeof(*s->stack_ix) + s->cap * sizeof(*s->v) +
	       s->cap_site_ix * sizeof(*s->site_ix) + s->cap_live * sizeof(*s->live) +
	       s->cap_mods * sizeof(*s->mods) + s->cap_names + (s->seed ? 4096 : 0) + sizeof(*s);
}

void sites_reset(struct sites *s)
{
	sites_free(s);
}

static int dup_array(void **dst, const void *src, size_t n, size_t size)
{
	*dst = NULL;
	if (!n)
		return 0;
	*dst = malloc(n * size);
	if (!*dst)
		return -ENOMEM;
	memcpy(*dst, src, n * size);
	return 0;
}

int sites_copy(struct sites *dst, const struct sites *src)
{
	*dst = *src;
	dst->pcs = NULL;
	dst->stacks = NULL;
	dst->stack_ix = NULL;
	dst->v = NULL;
	dst->site_ix = NULL;
	dst->live = NULL;
	dst->mods = NULL;
	dst->names = NULL;
	dst->seed = NULL;
	dst->cap_mods = src->nmods;
	dst->cap_names = src->nnames;
	dst->cap_pcs = src->npcs;
	dst->cap_stacks = src->nstacks;
	dst->cap = src->n;
	if (dup_array((void **)&dst->pcs, src->pcs, src->npcs, sizeof(*src->pcs)) ||
	    dup_array((void **)&dst->stacks, src->stacks, src->nstacks, sizeof(*src->stacks)) ||
	    dup_array((void **)&dst->stack_ix, src->stack_ix, src->cap_stack_ix,
		      sizeof(*src->stack_ix)) ||
	    dup_array((void **)&dst->v, src->v, src->n, sizeof(*src->v)) ||
	    dup_array((void **)&dst->site_ix, src->site_ix, src->cap_site_ix,
		      sizeof(*src->site_ix)) ||
	    dup_array((void **)&dst->live, src->live, src->cap_live, sizeof(*src->live)) ||
	    dup_array((void **)&dst->mods, src->mods, src->nmods, sizeof(*src->mods)) ||
	    dup_array((void **)&dst->names, src->names, src->nnames, 1) ||
	    (src->seed &&
	     dup_array((void **)&dst->seed, src->seed, TALLY_MAX_GROUPS, sizeof(*src->seed)))) {
		sites_free(dst);
		return -ENOMEM;
	}
	return 0;
}

int sites_seed(struct sites *s, const struct tally_replay *r)
{
	if (!s->seed)
		s->seed = malloc(TALLY_MAX_GROUPS * sizeof(*s->seed));
	if (!s->seed)
		return -ENOMEM;
	for (unsigned g = 0; g < TALLY_MAX_GROUPS; g++) {
		s->seed[g].bytes = r->groups[g].alloc_bytes - r->groups[g].dealloc_bytes;
		s->seed[g].objects = r->groups[g].alloc_objs - r->groups[g].dealloc_objs;
	}
	return 0;
}

double sites_weight(uint64_t bytes, uint64_t rate)
{
	if (rate <= 1 || !bytes)
		return 1;
	return 1 / -expm1(-(double)bytes / (double)rate);
}

double sites_inuse(const struct sites *s)
{
	double sum = 0;
	for (size_t i = 0; i < s->n; i++)
		sum += s->v[i].inuse_bytes;
	return sum;
}

/* An index of `n` entries (1-based into their array) rebuilt at twice the
 * size, by each entry's hash: three quarters full at most. */
static int index_fit(uint32_t **ix, size_t *cap, size_t n, uint64_t (*hash)(const void *, size_t),
		     const void *arr)
{
	if ((n + 1) * 4 <= *cap * 3)
		return 0;
	size_t ncap = *cap ? *cap * 2 : 16;
	uint32_t *t = calloc(ncap, sizeof(*t));
	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		size_t j = hash(arr, i) & (ncap - 1);
		while (t[j])
			j = (j + 1) & (ncap - 1);
		t[j] = (uint32_t)i + 1;
	}
	free(*ix);
	*ix = t;
	*cap = ncap;
	return 0;
}

static uint64_t stack_hash_of(const void *arr, size_t i)
{
	return ((const struct sites_stack *)arr)[i].hash;
}

static uint64_t frames_hash(const __u64 *pcs, uint32_t n)
{
	uint64_t h = hash_fib64(n);
	for (uint32_t i = 0; i < n; i++)
		h = hash_fib64(h ^ pcs[i]) + (h >> 29);
	return h ^ (h >> 31);
}

/* The stack's index, interned; -ENOMEM. */
static int64_t stack_intern(struct sites *s, const __u64 *pcs, uint32_t n)
{
	uint64_t h = frames_hash(pcs, n);
	if (index_fit(&s->stack_ix, &s->cap_stack_ix, s->nstacks, stack_hash_of, s->stacks))
		return -ENOMEM;
	size_t j = h & (s->cap_stack_ix - 1);
	for (; s->stack_ix[j]; j = (j + 1) & (s->cap_stack_ix - 1)) {
		const struct sites_stack *st = &s->stacks[s->stack_ix[j] - 1];
		if (st->hash == h && st->n == n &&
		    (!n || !memcmp(&s->pcs[st->off], pcs, n * sizeof(*pcs))))
			return s->stack_ix[j] - 1;
	}
	if (s->npcs + n > UINT32_MAX || s->nstacks >= UINT32_MAX - 1 ||
	    grow((void **)&s->pcs, &s->cap_pcs, s->npcs + n, sizeof(*s->pcs), 16) ||
	    grow((void **)&s->stacks, &s->cap_stacks, s->nstacks + 1, sizeof(*s->stacks), 16))
		return -ENOMEM;
	if (n) /* (a sample without frames: none outside the allocator) */
		memcpy(&s->pcs[s->npcs], pcs, n * sizeof(*pcs));
	s->stacks[s->nstacks] = (struct sites_stack){ h, (uint32_t)s->npcs, n };
	s->npcs += n;
	s->stack_ix[j] = (uint32_t)++s->nstacks;
	return (int64_t)s->nstacks - 1;
}

static uint64_t site_key(uint32_t stack, uint16_t group)
{
	return hash_fib64((uint64_t)stack << 16 | group);
}

static uint64_t site_hash_of(const void *arr, size_t i)
{
	const struct site *st = &((const struct site *)arr)[i];
	return site_key(st->stack, st->group);
}

static int64_t site_of(struct sites *s, uint32_t stack, uint16_t group)
{
	if (index_fit(&s->site_ix, &s->cap_site_ix, s->n, site_hash_of, s->v))
		return -ENOMEM;
	size_t j = site_key(stack, group) & (s->cap_site_ix - 1);
	for (; s->site_ix[j]; j = (j + 1) & (s->cap_site_ix - 1)) {
		const struct site *st = &s->v[s->site_ix[j] - 1];
		if (st->stack == stack && st->group == group)
			return s->site_ix[j] - 1;
	}
	if (s->n >= UINT32_MAX - 1 || grow((void **)&s->v, &s->cap, s->n + 1, sizeof(*s->v), 16))
		return -ENOMEM;
	s->v[s->n] = (struct site){ .stack = stack, .group = group };
	s->site_ix[j] = (uint32_t)++s->n;
	return (int64_t)s->n - 1;
}

static size_t live_home(const struct sites *s, uint64_t id)
{
	return (size_t)(hash_fib64(id) >> 17) & (s->cap_live - 1);
}

static int live_fit(struct sites *s)
{
	if ((s->nlive + 1) * 4 <= s->cap_live * 3)
		return 0;
	size_t ocap = s->cap_live;
	struct sites_live *old = s->live;
	s->cap_live = ocap ? ocap * 2 : 16;
	s->live = calloc(s->cap_live, sizeof(*s->live));
	if (!s->live) {
		s->live = old;
		s->cap_live = ocap;
		return -ENOMEM;
	}
	for (size_t i = 0; i < ocap; i++) {
		if (!old[i].id)
			continue;
		size_t j = live_home(s, old[i].id);
		while (s->live[j].id)
			j = (j + 1) & (s->cap_live - 1);
		s->live[j] = old[i];
	}
	free(old);
	return 0;
}

static struct sites_live *live_find(struct sites *s, uint64_t id)
{
	/* (id 0 marks an empty slot: no block has it) */
	if (!s->cap_live || !id)
		return NULL;
	for (size_t j = live_home(s, id);; j = (j + 1) & (s->cap_live - 1)) {
		if (s->live[j].id == id)
			return &s->live[j];
		if (!s->live[j].id)
			return NULL;
	}
}

/* Backward-shift deletion keeps probe chains whole. */
static void live_del(struct sites *s, struct sites_live *e)
{
	size_t i = (size_t)(e - s->live), j = i, mask = s->cap_live - 1;
	for (;;) {
		j = (j + 1) & mask;
		if (!s->live[j].id)
			break;
		size_t k = live_home(s, s->live[j].id);
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			s->live[i] = s->live[j];
			i = j;
		}
	}
	s->live[i].id = 0;
	s->nlive--;
}

/* Site st's in-use is about to change: its figures at the peak kept first
 * if this is its first change since. */
static void site_touch(const struct sites *s, struct site *st)
{
	if (!s->clock)
		return;
	if (st->changed <= s->clock->peak.seq) {
		st->peak_bytes = st->inuse_bytes;
		st->peak_objects = st->inuse_objects;
	}
	st->changed = s->clock->records;
}

void sites_at_peak(const struct sites *s, const struct site *st, const struct tally_replay *r,
		   double *bytes, double *objects)
{
	bool now = !s->settled && r && st->changed <= r->peak.seq;
	*bytes = now ? st->inuse_bytes : st->peak_bytes;
	*objects = now ? st->inuse_objects : st->peak_objects;
}

unsigned sites_life_bucket(uint64_t us)
{
	unsigned b = 0;

	for (uint64_t lim = 1000; b < SITES_LIFE_BUCKETS - 1 && us >= lim; lim *= 10)
		b++;
	return b;
}

/* A sampled block of `objects` freed with SAMPLE_FREE's n. */
static void life_add(struct site *st, uint32_t n, double objects)
{
	if (n)
		st->life[sites_life_bucket(n - 1)] += objects;
}

void sites_recent(const struct sites *s, uint64_t since_ns, double *bytes, double *objects)
{
	memset(bytes, 0, s->n * sizeof(*bytes));
	memset(objects, 0, s->n * sizeof(*objects));
	for (size_t j = 0; j < s->cap_live; j++) {
		const struct sites_live *l = &s->live[j];
		if (!l->id || l->site == SITES_FREED || l->born_ns < since_ns)
			continue;
		bytes[l->site] += l->bytes;
		objects[l->site] += l->objects;
	}
}

void sites_settle(struct sites *s, const struct tally_replay *r)
{
	for (size_t i = 0; i < s->n && !s->settled; i++)
		sites_at_peak(s, &s->v[i], r, &s->v[i].peak_bytes, &s->v[i].peak_objects);
	s->settled = true;
	s->clock = NULL;
}

static void sample_add(struct sites *s, const struct tally_ev *e, const __u64 *extra)
{
	uint64_t bytes = extra[0], rate = extra[1];
	struct sites_live *early = live_find(s, e->bytes);
	if (!e->bytes || e->group >= TALLY_MAX_GROUPS || (early && early->site != SITES_FREED))
		goto refuse;
	/* its free's n, read before live_fit moves the entries */
	const uint32_t early_n = early ? (uint32_t)early->born_ns : 0;
	int64_t stack = stack_intern(s, &extra[TALLY_SAMPLE_WORDS], e->n);
	int64_t at = stack < 0 ? -1 : site_of(s, (uint32_t)stack, e->group);
	if (at < 0 || live_fit(s))
		goto refuse;
	double w = sites_weight(bytes, rate);
	struct site *st = &s->v[at];
	st->samples++;
	st->alloc_objects += w;
	st->alloc_bytes += w * (double)bytes;
	s->samples++;
	s->rate = rate;
	if (early) {
		/* another thread freed it, and its batch came first */
		life_add(st, early_n, w);
		live_del(s, live_find(s, e->bytes));
		s->early--;
		s->frees++;
		return;
	}
	site_touch(s, st);
	st->inuse_objects += w;
	st->inuse_bytes += w * (double)bytes;
	size_t j = live_home(s, e->bytes);
	while (s->live[j].id)
		j = (j + 1) & (s->cap_live - 1);
	/* its birth as the process read it: the batch's hand-over may be seconds later */
	s->live[j] = (struct sites_live){ e->bytes, (uint32_t)at, w * (double)bytes, w, extra[2] };
	s->nlive++;
	return;
refuse:
	s->refused++;
}

const struct sites_module *sites_module_of(const struct sites *s, uint64_t pc)
{
	for (size_t i = s->nmods; i-- > 0;)
		if (pc >= s->mods[i].start && pc < s->mods[i].end)
			return &s->mods[i];
	return NULL;
}

static void module_add(struct sites *s, const struct tally_ev *e, const __u64 *extra)
{
	const char *path = (const char *)&extra[2];
	for (size_t i = 0; i < s->nmods; i++) {
		const struct sites_module *m = &s->mods[i];
		if (m->bias == e->bytes && m->start == extra[0] && m->len == e->n && e->n &&
		    !memcmp(&s->names[m->path], path, e->n))
			return;
	}
	/* a module without a path is of no use to anyone */
	if (!e->n || extra[1] <= extra[0] || s->nnames + e->n > UINT32_MAX ||
	    grow((void **)&s->mods, &s->cap_mods, s->nmods + 1, sizeof(*s->mods), 16) ||
	    grow((void **)&s->names, &s->cap_names, s->nnames + e->n, 1, 16)) {
		s->refused++;
		return;
	}
	memcpy(&s->names[s->nnames], path, e->n);
	s->mods[s->nmods++] =
		(struct sites_module){ e->term == 1,	    e->bytes, extra[0], extra[1],
				       (uint32_t)s->nnames, e->n };
	s->nnames += e->n;
}

void sites_on_record(void *ctx, const struct tally_ev *e, const __u64 *extra)
{
	struct sites *s = ctx;

	if (e->type == TALLY_EV_SAMPLE) {
		sample_add(s, e, extra);
		return;
	}
	if (e->type == TALLY_EV_MODULE) {
		module_add(s, e, extra);
		return;
	}
	struct sites_live *l = live_find(s, e->bytes);
	if (!l || l->site == SITES_FREED) {
		/* not seen yet: the sampling thread's batch may come after the
		 * freeing thread's; its sample, when it comes, is then freed
		 * already. (Or sampled before the attach: the mark stays.) */
		if (!l && e->bytes && !live_fit(s)) {
			size_t j = live_home(s, e->bytes);
			while (s->live[j].id)
				j = (j + 1) & (s->cap_live - 1);
			s->live[j] = (struct sites_live){ e->bytes, SITES_FREED, 0, 0, e->n };
			s->nlive++;
			s->early++;
		}
		s->unknown_frees += !l;
		return;
	}
	struct site *st = &s->v[l->site];
	site_touch(s, st);
	life_add(st, e->n, l->objects);
	st->inuse_bytes -= l->bytes;
	st->inuse_objects -= l->objects;
	/* sums of doubles: a site whose samples are all freed is at zero */
	if (st->inuse_objects < 0.5)
		st->inuse_bytes = st->inuse_objects = 0;
	live_del(s, l);
	s->frees++;
}
