// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * pprof's profile.proto, hand-encoded as Go's runtime/pprof does it, then
 * gzip'd (pprof.h; the folded text is folded.c's).
 *
 * The encoder appends to one growing buffer whose error, once set, stays set
 * and turns later writes into no-ops: a message is dozens of small writes,
 * and checking each would bury the format. The error is read once, at the
 * end. A length-delimited field is written as its key and its body, and the
 * body's length is slid in before it once known (a memmove of the body, which
 * is small: one sample, location, mapping or function).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#define ZLIB_CONST
#include <zlib.h>

#include "../../alloc/common/hash.h"
#include "../util/grow.h"
#include "pprof.h"

#define WIRE_VARINT 0
#define WIRE_LEN 2
#define GZIP_WINDOW_BITS 31 /* 15, and 16 for a gzip header and trailer */

/* profile.proto's field numbers */
enum {
	PROFILE_SAMPLE_TYPE = 1,
	PROFILE_SAMPLE = 2,
	PROFILE_MAPPING = 3,
	PROFILE_LOCATION = 4,
	PROFILE_FUNCTION = 5,
	PROFILE_STRING_TABLE = 6,
	PROFILE_TIME_NANOS = 9,
	PROFILE_DURATION_NANOS = 10,
	PROFILE_PERIOD_TYPE = 11,
	PROFILE_PERIOD = 12,
	PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3 };
enum {
	MAPPING_ID = 1,
	MAPPING_MEMORY_START = 2,
	MAPPING_MEMORY_LIMIT = 3,
	MAPPING_FILE_OFFSET = 4,
	MAPPING_FILENAME = 5,
	MAPPING_BUILD_ID = 6,
	MAPPING_HAS_FUNCTIONS = 7,
	MAPPING_HAS_FILENAMES = 8,
	MAPPING_HAS_LINE_NUMBERS = 9,
	/* 10, has_inline_frames: false, left out */
};
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_ADDRESS = 3, LOCATION_LINE = 4 };
enum { LINE_FUNCTION_ID = 1, LINE_LINE = 2 };
enum { FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3, FUNCTION_FILENAME = 4 };

/* The sample types, in the order of a sample's values (pprof.h's contract). */
static const char *const SAMPLE_TYPES[][2] = {
	{ "alloc_objects", "count" },
	{ "alloc_space", "bytes" },
	{ "inuse_objects", "count" },
	{ "inuse_space", "bytes" },
	/* at each process's peak of live (docs/DESIGN.md §11) */
	{ "peak_objects", "count" },
	{ "peak_space", "bytes" },
};
#define NTYPES (sizeof(SAMPLE_TYPES) / sizeof(SAMPLE_TYPES[0]))

/* A growing byte buffer; err (-ENOMEM), once set, stays, and writes do nothing. */
struct buf {
	uint8_t *p;
	size_t len, cap;
	int err;
};

/* Open addressing, at most half full; a slot holds an entry's index + 1 (0:
 * empty) and its hash, so that growing needs not the entries. */
struct slot {
	uint32_t idx;
	uint32_t hash;
};

struct table {
	struct slot *slots;
	size_t mask; /* slots - 1, a power of two less one */
	size_t n;    /* slots in use */
};

/* A Function: the string indices of its name and file, its id its index + 1. */
struct func {
	uint32_t name, file;
};

struct enc {
	struct buf out;
	const char **strs; /* the string table: borrowed from the caller, or literals */
	size_t nstrs, cap_strs;
	struct table str_tab;
	struct func *funcs;
	size_t nfuncs, cap_funcs;
	struct table func_tab;
};

static bool buf_reserve(struct buf *b, size_t n)
{
	if (b->err)
		return false;
	if (n > SIZE_MAX - b->len || grow((void **)&b->p, &b->cap, b->len + n, 1, 4096)) {
		b->err = -ENOMEM;
		return false;
	}
	return true;
}

static void buf_put(struct buf *b, const void *s, size_t n)
{
	if (n && buf_reserve(b, n)) {
		memcpy(b->p + b->len, s, n);
		b->len += n;
	}
}

static size_t varint_encode(uint8_t out[10], uint64_t v)
{
	size_t n = 0;

	for (; v >= 0x80; v >>= 7)
		out[n++] = (uint8_t)(v | 0x80);
	out[n++] = (uint8_t)v;
	return n;
}

static void pb_varint(struct buf *b, uint64_t v)
{
	uint8_t tmp[10];

	buf_put(b, tmp, varint_encode(tmp, v));
}

static void pb_key(struct buf *b, unsigned int field, unsigned int wire)
{
	pb_varint(b, (uint64_t)field << 3 | wire);
}

/* A scalar field (int64 as its two's complement); zero, proto3's default, is
 * left out, as Go's runtime leaves it out. */
static void pb_uint(struct buf *b, unsigned int field, uint64_t v)
{
	if (v) {
		pb_key(b, field, WIRE_VARINT);
		pb_varint(b, v);
	}
}

/* The start of a length-delimited field (a message, or a packed array): the
 * offset of its body, for pb_close. */
static size_t pb_open(struct buf *b, unsigned int field)
{
	pb_key(b, field, WIRE_LEN);
	return b->len;
}

static void pb_close(struct buf *b, size_t start)
{
	uint8_t tmp[10];
	size_t body = b->len - start, n = varint_encode(tmp, body);

	if (!buf_reserve(b, n))
		return;
	memmove(b->p + start + n, b->p + start, body);
	memcpy(b->p + start, tmp, n);
	b->len += n;
}

/* The slot of the entry equal to key, or the empty slot where it belongs. */
static struct slot *table_find(const struct table *t, uint32_t hash,
			       bool (*eq)(const struct enc *, uint32_t, const void *),
			       const struct enc *e, const void *key)
{
	for (size_t i = hash & t->mask;; i = (i + 1) & t->mask) {
		struct slot *s = &t->slots[i];

		if (!s->idx || (s->hash == hash && eq(e, s->idx - 1, key)))
			return s;
	}
}

/* Room for one more entry. */
static int table_reserve(struct table *t)
{
	size_t cap = t->slots ? (t->mask + 1) * 2 : 1024;
	struct slot *slots;

	if (t->slots && (t->n + 1) * 2 <= t->mask + 1)
		return 0;
	slots = calloc(cap, sizeof(*slots));
	if (!slots)
		return -ENOMEM;
	for (size_t i = 0; t->slots && i <= t->mask; i++) {
		size_t j = t->slots[i].hash & (cap - 1);

		if (!t->slots[i].idx)
			continue;
		while (slots[j].idx)
			j = (j + 1) & (cap - 1);
		slots[j] = t->slots[i];
	}
	free(t->slots);
	t->slots = slots;
	t->mask = cap - 1;
	return 0;
}

static bool str_eq(const struct enc *e, uint32_t idx, const void *key)
{
	return !strcmp(e->strs[idx], key);
}

/* The string table index of s (added when new); 0, the index of "", for NULL. */
static uint64_t str_index(struct enc *e, const char *s)
{
	uint32_t hash;
	struct slot *slot;

	if (!s || e->out.err)
		return 0;
	hash = hash_fnv1a32_str(s);
	if (grow((void **)&e->strs, &e->cap_strs, e->nstrs + 1, sizeof(*e->strs), 256) ||
	    table_reserve(&e->str_tab) || e->nstrs >= UINT32_MAX - 1) {
		e->out.err = -ENOMEM;
		return 0;
	}
	slot = table_find(&e->str_tab, hash, str_eq, e, s);
	if (!slot->idx) {
		e->strs[e->nstrs++] = s;
		*slot = (struct slot){ .idx = (uint32_t)e->nstrs, .hash = hash };
		e->str_tab.n++;
	}
	return slot->idx - 1;
}

static bool func_eq(const struct enc *e, uint32_t idx, const void *key)
{
	const struct func *k = key;

	return e->funcs[idx].name == k->name && e->funcs[idx].file == k->file;
}

/* The id of line's function, one per (name, file) (added when new). */
static uint64_t func_id(struct enc *e, const struct prof_line *line)
{
	struct func k = { (uint32_t)str_index(e, line->function),
			  (uint32_t)str_index(e, line->file) };
	uint32_t hash = hash_knuth32(k.name) ^ (k.file * 0x85ebca77u);
	struct slot *slot;

	if (e->out.err)
		return 0;
	if (grow((void **)&e->funcs, &e->cap_funcs, e->nfuncs + 1, sizeof(*e->funcs), 256) ||
	    table_reserve(&e->func_tab) || e->nfuncs >= UINT32_MAX - 1) {
		e->out.err = -ENOMEM;
		return 0;
	}
	slot = table_find(&e->func_tab, hash, func_eq, e, &k);
	if (!slot->idx) {
		e->funcs[e->nfuncs++] = k;
		*slot = (struct slot){ .idx = (uint32_t)e->nfuncs, .hash = hash };
		e->func_tab.n++;
	}
	return slot->idx;
}

static bool known(const char *function)
{
	return function && *function;
}

/* Every index in range, every array there: 0 or -EINVAL. */
static int prof_check(const struct prof *p)
{
	if (!p || (p->nmaps && !p->maps) || (p->nlocs && !p->locs) || (p->nsamples && !p->samples))
		return -EINVAL;
	for (size_t i = 0; i < p->nlocs; i++) {
		const struct prof_loc *l = &p->locs[i];

		if (l->mapping < -1 || (l->mapping >= 0 && (size_t)l->mapping >= p->nmaps) ||
		    (l->nlines && !l->lines))
			return -EINVAL;
	}
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];

		if (s->nlocs && !s->locs)
			return -EINVAL;
		for (size_t j = 0; j < s->nlocs; j++)
			if (s->locs[j] >= p->nlocs)
				return -EINVAL;
	}
	return 0;
}

static void encode_value_type(struct enc *e, unsigned int field, const char *type, const char *unit)
{
	size_t m = pb_open(&e->out, field);

	pb_uint(&e->out, VALUE_TYPE_TYPE, str_index(e, type));
	pb_uint(&e->out, VALUE_TYPE_UNIT, str_index(e, unit));
	pb_close(&e->out, m);
}

static void encode_label(struct enc *e, const char *key, const char *str, int64_t num)
{
	size_t m = pb_open(&e->out, SAMPLE_LABEL);

	pb_uint(&e->out, LABEL_KEY, str_index(e, key));
	pb_uint(&e->out, LABEL_STR, str_index(e, str));
	pb_uint(&e->out, LABEL_NUM, (uint64_t)num);
	pb_close(&e->out, m);
}

static void encode_sample(struct enc *e, const struct prof *p, size_t k)
{
	const struct prof_sample *s = &p->samples[k];
	const char *comm = p->comm ? p->comm[k] : NULL;
	const char *container = p->container ? p->container[k] : NULL;
	int64_t v[NTYPES] = { s->alloc_objects, s->alloc_space,	 s->inuse_objects,
			      s->inuse_space,	s->peak_objects, s->peak_space };
	struct buf *b = &e->out;
	size_t m = pb_open(b, PROFILE_SAMPLE), packed;

	packed = pb_open(b, SAMPLE_LOCATION_ID);
	for (size_t i = 0; i < s->nlocs; i++)
		pb_varint(b, s->locs[i] + 1);
	pb_close(b, packed);
	packed = pb_open(b, SAMPLE_VALUE);
	for (size_t i = 0; i < NTYPES; i++)
		pb_varint(b, (uint64_t)v[i]);
	pb_close(b, packed);
	if (s->group)
		encode_label(e, "group", s->group, 0);
	if (s->pid)
		encode_label(e, "pid", NULL, s->pid);
	if (comm && *comm)
		encode_label(e, "comm", comm, 0);
	if (container && *container)
		encode_label(e, "container", container, 0);
	pb_close(b, m);
}

static void encode_mapping(struct enc *e, const struct prof_mapping *map, size_t i)
{
	struct buf *b = &e->out;
	size_t m = pb_open(b, PROFILE_MAPPING);

	pb_uint(b, MAPPING_ID, i + 1);
	pb_uint(b, MAPPING_MEMORY_START, map->start);
	pb_uint(b, MAPPING_MEMORY_LIMIT, map->limit);
	pb_uint(b, MAPPING_FILE_OFFSET, map->offset);
	pb_uint(b, MAPPING_FILENAME, str_index(e, map->file));
	pb_uint(b, MAPPING_BUILD_ID, str_index(e, map->build_id));
	pb_uint(b, MAPPING_HAS_FUNCTIONS, map->has_functions);
	pb_uint(b, MAPPING_HAS_FILENAMES, map->has_filenames);
	pb_uint(b, MAPPING_HAS_LINE_NUMBERS, map->has_lines);
	pb_close(b, m);
}

/* Lines of an unknown function are left out: a location without any shows
 * as its mapping and address in pprof. */
static void encode_location(struct enc *e, const struct prof_loc *l, size_t i)
{
	struct buf *b = &e->out;
	size_t m = pb_open(b, PROFILE_LOCATION), line;

	pb_uint(b, LOCATION_ID, i + 1);
	pb_uint(b, LOCATION_MAPPING_ID, (uint64_t)(l->mapping + 1)); /* -1: 0, none */
	pb_uint(b, LOCATION_ADDRESS, l->addr);
	for (size_t j = 0; j < l->nlines; j++) {
		if (!known(l->lines[j].function))
			continue;
		line = pb_open(b, LOCATION_LINE);
		pb_uint(b, LINE_FUNCTION_ID, func_id(e, &l->lines[j]));
		pb_uint(b, LINE_LINE, (uint64_t)l->lines[j].line);
		pb_close(b, line);
	}
	pb_close(b, m);
}

static void encode_function(struct enc *e, size_t i)
{
	struct buf *b = &e->out;
	size_t m = pb_open(b, PROFILE_FUNCTION);

	pb_uint(b, FUNCTION_ID, i + 1);
	pb_uint(b, FUNCTION_NAME, e->funcs[i].name);
	pb_uint(b, FUNCTION_SYSTEM_NAME, e->funcs[i].name);
	pb_uint(b, FUNCTION_FILENAME, e->funcs[i].file);
	pb_close(b, m);
}

/* The fields in Go's runtime order: the string table last, once every string
 * has its index. */
static void encode_profile(struct enc *e, const struct prof *p)
{
	struct buf *b = &e->out;

	str_index(e, ""); /* index 0, as profile.proto requires */
	for (size_t i = 0; i < NTYPES; i++)
		encode_value_type(e, PROFILE_SAMPLE_TYPE, SAMPLE_TYPES[i][0], SAMPLE_TYPES[i][1]);
	for (size_t i = 0; i < p->nsamples; i++)
		encode_sample(e, p, i);
	for (size_t i = 0; i < p->nmaps; i++)
		encode_mapping(e, &p->maps[i], i);
	for (size_t i = 0; i < p->nlocs; i++)
		encode_location(e, &p->locs[i], i);
	for (size_t i = 0; i < e->nfuncs; i++)
		encode_function(e, i);
	pb_uint(b, PROFILE_TIME_NANOS, (uint64_t)p->time_nanos);
	pb_uint(b, PROFILE_DURATION_NANOS, (uint64_t)p->duration_nanos);
	encode_value_type(e, PROFILE_PERIOD_TYPE, "space", "bytes");
	pb_uint(b, PROFILE_PERIOD, p->period);
	pb_uint(b, PROFILE_DEFAULT_SAMPLE_TYPE, str_index(e, p->default_type));
	for (size_t i = 0; i < e->nstrs; i++) {
		size_t n = strlen(e->strs[i]);

		pb_key(b, PROFILE_STRING_TABLE, WIRE_LEN);
		pb_varint(b, n);
		buf_put(b, e->strs[i], n);
	}
}

static void enc_free(struct enc *e)
{
	free(e->out.p);
	free(e->strs);
	free(e->str_tab.slots);
	free(e->funcs);
	free(e->func_tab.slots);
}

/* in, gzip-compressed in one pass into a malloc'd buffer of deflateBound's
 * size (enough by zlib's contract), at Go's level: BestSpeed. */
static int gzip(const uint8_t *in, size_t n, uint8_t **out, size_t *len)
{
	z_stream zs = { 0 };
	uint8_t *buf = NULL;
	uLong cap;
	int err, zerr;

	if (n > UINT_MAX)
		return -EFBIG;
	zerr = deflateInit2(&zs, Z_BEST_SPEED, Z_DEFLATED, GZIP_WINDOW_BITS, 8, Z_DEFAULT_STRATEGY);
	if (zerr != Z_OK)
		return zerr == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
	cap = deflateBound(&zs, (uLong)n);
	if (cap > UINT_MAX) {
		err = -EFBIG;
		goto out_end;
	}
	buf = malloc(cap);
	if (!buf) {
		err = -ENOMEM;
		goto out_end;
	}
	zs.next_in = in;
	zs.avail_in = (uInt)n;
	zs.next_out = buf;
	zs.avail_out = (uInt)cap;
	zerr = deflate(&zs, Z_FINISH);
	if (zerr != Z_STREAM_END) {
		err = zerr == Z_MEM_ERROR ? -ENOMEM : -EIO;
		free(buf);
		goto out_end;
	}
	*out = buf;
	*len = zs.total_out;
	err = 0;
out_end:
	deflateEnd(&zs);
	return err;
}

int pprof_encode(const struct prof *p, uint8_t **out, size_t *len)
{
	struct enc e = { 0 };
	int err = prof_check(p);

	if (err || !out || !len)
		return err ? err : -EINVAL;
	encode_profile(&e, p);
	err = e.out.err;
	if (!err)
		err = gzip(e.out.p, e.out.len, out, len);
	enc_free(&e);
	return err;
}

/* f flushed, and its error: 0 or -errno (-EIO when errno says nothing). */
static int stream_flush(FILE *f)
{
	if (fflush(f) || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

int pprof_write(FILE *f, const struct prof *p)
{
	uint8_t *buf = NULL;
	size_t len = 0;
	int err;

	if (!f)
		return -EINVAL;
	err = pprof_encode(p, &buf, &len);
	if (err)
		return err;
	errno = 0;
	if (fwrite(buf, 1, len, f) != len)
		err = errno ? -errno : -EIO;
	else
		err = stream_flush(f);
	free(buf);
	return err;
}
