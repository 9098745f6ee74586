// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally diff` on two heap profiles (diff.h): pprof's gzip'd profile.proto,
 * as tally profile writes it (user/views/pprof.c) or any other program
 * does, read as untrusted input and turned into a document of a
 * snapshot's shape, which the rest of the diff reads as it reads a
 * snapshot: "sites" (each sample: its frames, its "group" and "pid"
 * labels, inuse_space, alloc_space and peak_space when it has one),
 * "groups" (the samples' sums by their group label), no "processes" (a
 * profile names none but by pid, which differs between runs) and "exact":
 * false (every figure is a sampled estimate).
 *
 * Bounds: the profile inflates to at most DIFF_PPROF_MAX_BYTES (a small
 * gzip can claim gigabytes; diff.c inflates it), the document written from
 * it stops at JREAD_MAX_BYTES (a location of many lines named by many
 * samples would multiply), a stack at DIFF_PPROF_MAX_FRAMES.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "../util/grow.h"
#include "../views/json.h"

#define DIFF_PPROF_MAX_FRAMES 4096

/*
 * profile.proto's fields read here, by number: Profile 1 sample_type
 * (ValueType: 1 type), 2 sample (Sample: 1 location_id, 2 value, 3 label:
 * 1 key, 2 str, 3 num), 3 mapping (1 id, 2 memory_start, 4 file_offset,
 * 5 filename), 4 location (1 id, 2 mapping_id, 3 address, 4 line: 1
 * function_id), 5 function (1 id, 2 name), 6 string_table. Others skipped.
 */
enum { WIRE_VARINT = 0, WIRE_I64 = 1, WIRE_LEN = 2, WIRE_I32 = 5 };

/* A field's bytes: a message, a string, a packed array. */
struct span {
	const uint8_t *p, *end;
};

struct pb_field {
	unsigned num, wire;
	uint64_t v;	  /* WIRE_VARINT, WIRE_I64, WIRE_I32 */
	struct span body; /* WIRE_LEN */
};

struct id_span {
	uint64_t id;
	struct span msg;
};

struct group_sum {
	struct span name;
	int64_t inuse, alloc;
	bool broken;
};

struct pprof_in {
	struct span *strs;
	size_t nstrs, cap_strs;
	struct span *samples;
	size_t nsamples, cap_samples;
	struct id_span *locs, *funcs, *maps; /* sorted by id once read */
	size_t nlocs, cap_locs, nfuncs, cap_funcs, nmaps, cap_maps;
	struct span types[8];
	size_t ntypes;
	int inuse_at, alloc_at, peak_at; /* the sample types' value indices; -1: none */
	struct group_sum *groups;
	size_t ngroups, cap_groups;
};

static int varint(struct span *s, uint64_t *out)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < 64; shift += 7) {
		if (s->p >= s->end)
			return -EINVAL;
		uint8_t b = *s->p++;
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*out = v;
			return 0;
		}
	}
	return -EINVAL; /* more than 10 bytes */
}

/* The next field of s: 1, 0 at its end, or -EINVAL. */
static int next_field(struct span *s, struct pb_field *f)
{
	uint64_t key, len;

	if (s->p >= s->end)
		return 0;
	if (varint(s, &key) || key >> 3 == 0 || key >> 3 > UINT32_MAX)
		return -EINVAL;
	f->num = (unsigned)(key >> 3);
	f->wire = key & 7;
	switch (f->wire) {
	case WIRE_VARINT:
		return varint(s, &f->v) ? -EINVAL : 1;
	case WIRE_I64:
	case WIRE_I32:
		len = f->wire == WIRE_I64 ? 8 : 4;
		if ((uint64_t)(s->end - s->p) < len)
			return -EINVAL;
		f->v = 0;
		memcpy(&f->v, s->p, len); /* little-endian, as x86 and arm64 are */
		s->p += len;
		return 1;
	case WIRE_LEN:
		if (varint(s, &len) || len > (uint64_t)(s->end - s->p))
			return -EINVAL;
		f->body.p = s->p;
		f->body.end = s->p + len;
		s->p += len;
		return 1;
	default:
		return -EINVAL; /* groups (3, 4) are not in profile.proto */
	}
}

static int push(void *arr, size_t *n, size_t *cap, size_t elem, const void *v)
{
	void **a = arr;

	if (grow(a, cap, *n + 1, elem, 64))
		return -ENOMEM;
	memcpy((char *)*a + *n * elem, v, elem);
	(*n)++;
	return 0;
}

/* A message's "id" (field 1), for locations, functions and mappings. */
static int push_id(struct id_span **arr, size_t *n, size_t *cap, struct span msg)
{
	struct id_span e = { 0, msg };
	struct pb_field f;
	int r;

	while ((r = next_field(&msg, &f)) == 1)
		if (f.num == 1 && f.wire == WIRE_VARINT)
			e.id = f.v;
	return r ? r : push(arr, n, cap, sizeof(e), &e);
}

static int top_field(struct pprof_in *in, const struct pb_field *f)
{
	if (f->wire != WIRE_LEN)
		return 0; /* the scalars: times, period, the default type */
	switch (f->num) {
	case 1:
		if (in->ntypes < sizeof(in->types) / sizeof(in->types[0]))
			in->types[in->ntypes++] = f->body;
		return 0;
	case 2:
		return push(&in->samples, &in->nsamples, &in->cap_samples, sizeof(f->body),
			    &f->body);
	case 3:
		return push_id(&in->maps, &in->nmaps, &in->cap_maps, f->body);
	case 4:
		return push_id(&in->locs, &in->nlocs, &in->cap_locs, f->body);
	case 5:
		return push_id(&in->funcs, &in->nfuncs, &in->cap_funcs, f->body);
	case 6:
		return push(&in->strs, &in->nstrs, &in->cap_strs, sizeof(f->body), &f->body);
	default:
		return 0;
	}
}

static int by_id(const void *x, const void *y)
{
	uint64_t a = ((const struct id_span *)x)->id, b = ((const struct id_span *)y)->id;

	return a < b ? -1 : a > b;
}

static const struct span *find_id(const struct id_span *arr, size_t n, uint64_t id)
{
	struct id_span key = { id, { NULL, NULL } };
	const struct id_span *e = n ? bsearch(&key, arr, n, sizeof(*arr), by_id) : NULL;

	return e ? &e->msg : NULL;
}

/* what an absent string reads as: empty, and never a NULL pointer */
static const uint8_t none;

static struct span str_at(const struct pprof_in *in, uint64_t i)
{
	if (i < in->nstrs)
		return in->strs[i];
	return (struct span){ &none, &none };
}

static bool str_is(struct span s, const char *text)
{
	size_t n = strlen(text);

	return (size_t)(s.end - s.p) == n && !memcmp(s.p, text, n);
}

/* Which values are inuse_space, alloc_space and peak_space (a ValueType's
 * field 1). */
static int find_types(struct pprof_in *in)
{
	in->inuse_at = in->alloc_at = in->peak_at = -1;
	for (size_t i = 0; i < in->ntypes; i++) {
		struct span m = in->types[i];
		struct pb_field f;
		int r;

		while ((r = next_field(&m, &f)) == 1) {
			if (f.num != 1 || f.wire != WIRE_VARINT)
				continue;
			if (str_is(str_at(in, f.v), "inuse_space"))
				in->inuse_at = (int)i;
			if (str_is(str_at(in, f.v), "alloc_space"))
				in->alloc_at = (int)i;
			if (str_is(str_at(in, f.v), "peak_space"))
				in->peak_at = (int)i;
		}
		if (r)
			return r;
	}
	return in->inuse_at < 0 && in->alloc_at < 0 ? -ENOMSG : 0;
}

static int read_profile(struct pprof_in *in, struct span pb)
{
	struct pb_field f;
	int r;

	while ((r = next_field(&pb, &f)) == 1) {
		r = top_field(in, &f);
		if (r)
			return r;
	}
	if (r)
		return r;
	/* an empty array is NULL, which neither qsort nor bsearch may be given */
	if (in->nlocs)
		qsort(in->locs, in->nlocs, sizeof(*in->locs), by_id);
	if (in->nfuncs)
		qsort(in->funcs, in->nfuncs, sizeof(*in->funcs), by_id);
	if (in->nmaps)
		qsort(in->maps, in->nmaps, sizeof(*in->maps), by_id);
	return find_types(in);
}

static void pprof_in_free(struct pprof_in *in)
{
	free(in->strs);
	free(in->samples);
	free(in->locs);
	free(in->funcs);
	free(in->maps);
	free(in->groups);
}

/* A message's varint field num (the last one), or 0. */
static uint64_t field_u64(struct span m, unsigned num)
{
	struct pb_field f;
	uint64_t v = 0;

	while (next_field(&m, &f) == 1)
		if (f.num == num && f.wire == WIRE_VARINT)
			v = f.v;
	return v;
}

/* A frame without a symbol: its mapping's file and the offset in it, the
 * same in every run (the address is not). */
static int write_module_frame(struct json_writer *w, const struct pprof_in *in, struct span loc)
{
	const struct span *map = find_id(in->maps, in->nmaps, field_u64(loc, 2));
	struct span file = str_at(in, map ? field_u64(*map, 5) : 0);
	uint64_t off =
		field_u64(loc, 3) - (map ? field_u64(*map, 2) : 0) + (map ? field_u64(*map, 4) : 0);
	size_t n = (size_t)(file.end - file.p);
	char *mod = malloc(n + 24);

	if (!mod)
		return -ENOMEM;
	memcpy(mod, file.p, n);
	n += (size_t)snprintf(mod + n, 24, "+0x%llx", (unsigned long long)off);
	json_begin_object(w);
	json_kv_null(w, "function");
	json_key(w, "module");
	json_string_n(w, mod, n);
	json_end_object(w);
	free(mod);
	return 0;
}

/* A location's frames: each line's function (innermost first, as the
 * snapshot's), or its module when it has no line. */
static int write_location(struct json_writer *w, const struct pprof_in *in, struct span loc,
			  size_t *nframes)
{
	struct span m = loc, name;
	const struct span *fn;
	struct pb_field f;
	bool any = false;
	int r;

	while ((r = next_field(&m, &f)) == 1) {
		if (f.num != 4 || f.wire != WIRE_LEN)
			continue;
		if (++*nframes > DIFF_PPROF_MAX_FRAMES)
			return -E2BIG;
		fn = find_id(in->funcs, in->nfuncs, field_u64(f.body, 1));
		name = str_at(in, fn ? field_u64(*fn, 2) : 0);
		json_begin_object(w);
		json_key(w, "function");
		if (name.end > name.p)
			json_string_n(w, (const char *)name.p, (size_t)(name.end - name.p));
		else
			json_null(w);
		json_end_object(w);
		any = true;
	}
	if (r || any)
		return r;
	if (++*nframes > DIFF_PPROF_MAX_FRAMES)
		return -E2BIG;
	return write_module_frame(w, in, loc);
}

/* What a sample says besides its stack. */
struct sample_figs {
	struct span group;
	int64_t pid, inuse, alloc, peak;
	bool has_inuse, has_alloc, has_peak;
};

static void sample_value(struct sample_figs *sf, const struct pprof_in *in, size_t i, uint64_t v)
{
	if ((int)i == in->inuse_at) {
		sf->inuse = (int64_t)v;
		sf->has_inuse = true;
	}
	if ((int)i == in->alloc_at) {
		sf->alloc = (int64_t)v;
		sf->has_alloc = true;
	}
	if ((int)i == in->peak_at) {
		sf->peak = (int64_t)v;
		sf->has_peak = true;
	}
}

/* A sample's values (packed or not) and labels "group" and "pid". */
static int read_sample(const struct pprof_in *in, struct span m, struct sample_figs *sf)
{
	struct pb_field f, g;
	size_t nvalues = 0;
	int r;

	while ((r = next_field(&m, &f)) == 1) {
		if (f.num == 2 && f.wire == WIRE_VARINT)
			sample_value(sf, in, nvalues++, f.v);
		while (f.num == 2 && f.wire == WIRE_LEN && f.body.p < f.body.end) {
			if (varint(&f.body, &g.v))
				return -EINVAL;
			sample_value(sf, in, nvalues++, g.v);
		}
		if (f.num != 3 || f.wire != WIRE_LEN)
			continue;
		struct span key = str_at(in, field_u64(f.body, 1));
		if (str_is(key, "group"))
			sf->group = str_at(in, field_u64(f.body, 2));
		if (str_is(key, "pid"))
			sf->pid = (int64_t)field_u64(f.body, 3);
	}
	return r;
}

static int write_loc_id(struct json_writer *w, const struct pprof_in *in, uint64_t id,
			size_t *nframes, FILE *mem)
{
	const struct span *loc = find_id(in->locs, in->nlocs, id);
	int err = loc ? write_location(w, in, *loc, nframes) : -EINVAL;

	if (!err && ftell(mem) > (long)JREAD_MAX_BYTES)
		err = -E2BIG;
	return err;
}

/* Each location of a sample's stack (field 1, packed or not), in order. */
static int write_stack(struct json_writer *w, const struct pprof_in *in, struct span m, FILE *mem)
{
	struct pb_field f;
	size_t nframes = 0;
	uint64_t id;
	int r, err = 0;

	while ((r = next_field(&m, &f)) == 1) {
		if (f.num == 1 && f.wire == WIRE_VARINT)
			err = write_loc_id(w, in, f.v, &nframes, mem);
		while (!err && f.num == 1 && f.wire == WIRE_LEN && f.body.p < f.body.end)
			err = varint(&f.body, &id) ? -EINVAL :
						     write_loc_id(w, in, id, &nframes, mem);
		if (err)
			return err;
	}
	return r;
}

static void group_add(int64_t *sum, bool has, int64_t v, bool *broken)
{
	if (!has || __builtin_add_overflow(*sum, v, sum))
		*broken = true;
}

/* The sample's figures added to its group's (a new one when it has none). */
static int add_to_group(struct pprof_in *in, const struct sample_figs *sf)
{
	struct group_sum *g = NULL, fresh = { sf->group, 0, 0, false };

	for (size_t i = 0; i < in->ngroups && !g; i++)
		if (in->groups[i].name.end - in->groups[i].name.p == sf->group.end - sf->group.p &&
		    !memcmp(in->groups[i].name.p, sf->group.p,
			    (size_t)(sf->group.end - sf->group.p)))
			g = &in->groups[i];
	if (!g) {
		if (push(&in->groups, &in->ngroups, &in->cap_groups, sizeof(fresh), &fresh))
			return -ENOMEM;
		g = &in->groups[in->ngroups - 1];
	}
	group_add(&g->inuse, sf->has_inuse, sf->inuse, &g->broken);
	group_add(&g->alloc, sf->has_alloc, sf->alloc, &g->broken);
	return 0;
}

/* s as a JSON string, or empty when s is */
static void string_span(struct json_writer *w, struct span s, const char *empty)
{
	if (s.end > s.p)
		json_string_n(w, (const char *)s.p, (size_t)(s.end - s.p));
	else
		json_string(w, empty);
}

static void kv_fig(struct json_writer *w, const char *key, bool has, int64_t v)
{
	if (has)
		json_kv_i64(w, key, v);
	else
		json_kv_null(w, key);
}

static int write_site(struct json_writer *w, struct pprof_in *in, struct span m, FILE *mem)
{
	struct sample_figs sf = { .group = { &none, &none } };
	int err = read_sample(in, m, &sf);

	if (err)
		return err;
	json_begin_object(w);
	json_key(w, "frames");
	json_begin_array(w);
	err = write_stack(w, in, m, mem);
	json_end_array(w);
	json_key(w, "group");
	string_span(w, sf.group, "root");
	json_kv_i64(w, "pid", sf.pid);
	kv_fig(w, "inuse_bytes", sf.has_inuse, sf.inuse);
	kv_fig(w, "alloc_bytes", sf.has_alloc, sf.alloc);
	kv_fig(w, "peak_bytes", sf.has_peak, sf.peak);
	json_end_object(w);
	return err ? err : add_to_group(in, &sf);
}

static void write_groups(struct json_writer *w, const struct pprof_in *in)
{
	json_key(w, "groups");
	json_begin_array(w);
	for (size_t i = 0; i < in->ngroups; i++) {
		const struct group_sum *g = &in->groups[i];
		json_begin_object(w);
		json_key(w, "name");
		string_span(w, g->name, "root");
		kv_fig(w, "live_bytes", !g->broken, g->inuse);
		kv_fig(w, "allocated_bytes", !g->broken, g->alloc);
		json_end_object(w);
	}
	json_end_array(w);
}

static int write_doc(struct json_writer *w, struct pprof_in *in, FILE *mem)
{
	int err = 0;

	json_begin_object(w);
	json_kv_str(w, "kind", "profile");
	json_key(w, "target");
	json_begin_object(w);
	json_kv_null(w, "comm");
	json_kv_null(w, "pid");
	json_end_object(w);
	json_kv_bool(w, "exact", false);
	json_key(w, "inexact_why");
	json_begin_array(w);
	json_string(w, "a heap profile: every figure is a sampled estimate");
	json_end_array(w);
	json_key(w, "processes");
	json_begin_array(w);
	json_end_array(w);
	json_key(w, "sites");
	json_begin_array(w);
	for (size_t i = 0; i < in->nsamples && !err; i++)
		err = write_site(w, in, in->samples[i], mem);
	json_end_array(w);
	write_groups(w, in);
	json_end_object(w);
	return err;
}

int diff_pprof_decode(const uint8_t *pb, size_t n, char **json, size_t *len)
{
	struct pprof_in in = { 0 };
	struct span all = { pb, pb + n };
	struct json_writer w;
	FILE *mem;
	int err = read_profile(&in, all);

	*json = NULL;
	*len = 0;
	if (err) {
		pprof_in_free(&in);
		return err;
	}
	mem = open_memstream(json, len);
	if (!mem) {
		pprof_in_free(&in);
		return -ENOMEM;
	}
	json_init(&w, mem, false);
	err = write_doc(&w, &in, mem);
	if (!err)
		err = json_finish(&w);
	if (fclose(mem) && !err)
		err = -ENOMEM;
	pprof_in_free(&in);
	if (err) {
		free(*json);
		*json = NULL;
		*len = 0;
	}
	return err;
}
