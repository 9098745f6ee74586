// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The JSON reader (json_read.h): a recursive descent over the text, one
 * level of recursion per level of nesting (bounded), values into an arena.
 * An array's or object's elements are gathered in a growing scratch array
 * of its own level and copied into the arena at its end, so that the tree
 * holds each container as one block and nothing is reallocated in it.
 */
#include <errno.h>
#include <math.h>
#include <stdalign.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "json_read.h"
#include "text.h"

#define ARENA_CHUNK (64u << 10)

struct jread_arena {
	struct jread_arena *next;
	size_t used, cap;
	alignas(max_align_t) unsigned char data[];
};

struct parser {
	const unsigned char *start, *p, *end;
	struct jread_arena *arena;
	unsigned depth;
};

static void *arena_alloc(struct parser *ps, size_t n)
{
	struct jread_arena *a = ps->arena;
	size_t al = alignof(max_align_t);

	n = n ? (n + al - 1) / al * al : al;
	if (!a || a->cap - a->used < n) {
		size_t cap = n > ARENA_CHUNK ? n : ARENA_CHUNK;
		a = malloc(sizeof(*a) + cap);
		if (!a)
			return NULL;
		a->used = 0;
		a->cap = cap;
		a->next = ps->arena;
		ps->arena = a;
	}
	a->used += n;
	return a->data + a->used - n;
}

static void skip_ws(struct parser *ps)
{
	while (ps->p < ps->end &&
	       (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r'))
		ps->p++;
}

static int literal(struct parser *ps, const char *word, struct jread_value *v, enum jread_type type,
		   bool b)
{
	size_t n = strlen(word);

	if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, word, n))
		return -EINVAL;
	ps->p += n;
	v->type = type;
	v->b = b;
	return 0;
}

static size_t digits(struct parser *ps)
{
	const unsigned char *s = ps->p;

	while (ps->p < ps->end && *ps->p >= '0' && *ps->p <= '9')
		ps->p++;
	return (size_t)(ps->p - s);
}

/* The digits s[0 .. n) as an exact integer, negative when neg: false when it
 * does not fit in [-2^63, 2^64 - 1]. */
static bool exact_integer(const unsigned char *s, size_t n, bool neg, struct jread_value *v)
{
	uint64_t m = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned d = s[i] - '0';
		if (m > (UINT64_MAX - d) / 10)
			return false;
		m = m * 10 + d;
	}
	if (neg && m > (uint64_t)INT64_MAX + 1)
		return false;
	if (neg) {
		v->type = JREAD_INT;
		v->i = m == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)m;
	} else if (m > (uint64_t)INT64_MAX) {
		v->type = JREAD_UINT;
		v->u = m;
	} else {
		v->type = JREAD_INT;
		v->i = (int64_t)m;
	}
	return true;
}

/* RFC 8259's grammar, then the value: exact when it is an integer that
 * fits, else strtod's (tally sets no locale: '.' is the decimal point). */
static int number(struct parser *ps, struct jread_value *v)
{
	const unsigned char *s = ps->p, *int_digits;
	bool neg = false, whole = true;
	size_t nint;
	char buf[JREAD_MAX_NUMBER + 1];

	if (ps->p < ps->end && *ps->p == '-') {
		neg = true;
		ps->p++;
	}
	int_digits = ps->p;
	nint = digits(ps);
	if (!nint || (nint > 1 && *int_digits == '0'))
		return -EINVAL;
	if (ps->p < ps->end && *ps->p == '.') {
		ps->p++;
		whole = false;
		if (!digits(ps))
			return -EINVAL;
	}
	if (ps->p < ps->end && (*ps->p == 'e' || *ps->p == 'E')) {
		ps->p++;
		whole = false;
		if (ps->p < ps->end && (*ps->p == '+' || *ps->p == '-'))
			ps->p++;
		if (!digits(ps))
			return -EINVAL;
	}
	if (whole && exact_integer(int_digits, nint, neg, v))
		return 0;
	if ((size_t)(ps->p - s) > JREAD_MAX_NUMBER) {
		ps->p = s;
		return -E2BIG;
	}
	memcpy(buf, s, (size_t)(ps->p - s));
	buf[ps->p - s] = '\0';
	v->type = JREAD_DOUBLE;
	v->d = strtod(buf, NULL);
	if (!isfinite(v->d)) {
		ps->p = s;
		return -ERANGE;
	}
	return 0;
}

static int hex4(struct parser *ps, unsigned *out)
{
	unsigned v = 0;

	if (ps->end - ps->p < 4)
		return -EILSEQ;
	for (int i = 0; i < 4; i++) {
		unsigned c = *ps->p++, d;
		if (c >= '0' && c <= '9')
			d = c - '0';
		else if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f')
			d = (c | 0x20) - 'a' + 10;
		else
			return -EILSEQ;
		v = v << 4 | d;
	}
	*out = v;
	return 0;
}

/* After "\u": one code point, a surrogate pair as one; a lone surrogate is
 * refused (it has no UTF-8). Written as UTF-8 at out: its length. */
static int unicode_escape(struct parser *ps, unsigned char *out, size_t *len)
{
	unsigned c, lo;
	int err = hex4(ps, &c);

	if (err)
		return err;
	if (c >= 0xdc00 && c <= 0xdfff)
		return -EILSEQ;
	if (c >= 0xd800 && c <= 0xdbff) {
		if (ps->end - ps->p < 2 || ps->p[0] != '\\' || ps->p[1] != 'u')
			return -EILSEQ;
		ps->p += 2;
		err = hex4(ps, &lo);
		if (err || lo < 0xdc00 || lo > 0xdfff)
			return -EILSEQ;
		c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
	}
	if (c < 0x80) {
		out[0] = (unsigned char)c;
		*len = 1;
	} else if (c < 0x800) {
		out[0] = (unsigned char)(0xc0 | c >> 6);
		out[1] = (unsigned char)(0x80 | (c & 0x3f));
		*len = 2;
	} else if (c < 0x10000) {
		out[0] = (unsigned char)(0xe0 | c >> 12);
		out[1] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		out[2] = (unsigned char)(0x80 | (c & 0x3f));
		*len = 3;
	} else {
		out[0] = (unsigned char)(0xf0 | c >> 18);
		out[1] = (unsigned char)(0x80 | (c >> 12 & 0x3f));
		out[2] = (unsigned char)(0x80 | (c >> 6 & 0x3f));
		out[3] = (unsigned char)(0x80 | (c & 0x3f));
		*len = 4;
	}
	return 0;
}

static int escape(struct parser *ps, unsigned char *out, size_t *len)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *hit;

	if (ps->p >= ps->end)
		return -EILSEQ;
	if (*ps->p == 'u') {
		ps->p++;
		return unicode_escape(ps, out, len);
	}
	hit = *ps->p ? strchr(from, *ps->p) : NULL;
	if (!hit)
		return -EILSEQ;
	ps->p++;
	out[0] = (unsigned char)to[hit - from];
	*len = 1;
	return 0;
}

/* After the opening quote. The decoded text is never longer than the
 * quoted one (an escape of 6 or 12 characters gives at most 4 bytes). */
static int string(struct parser *ps, const char **s, size_t *len)
{
	const unsigned char *q = ps->p;
	unsigned char *out;
	size_t n = 0;

	while (q < ps->end && *q != '"')
		q += *q == '\\' && q + 1 < ps->end ? 2 : 1;
	if (q >= ps->end)
		return -EINVAL;
	out = arena_alloc(ps, (size_t)(q - ps->p) + 1);
	if (!out)
		return -ENOMEM;
	while (*ps->p != '"') {
		size_t k;
		int err;

		if (*ps->p < 0x20)
			return -EINVAL;
		if (*ps->p == '\\') {
			ps->p++;
			err = escape(ps, out + n, &k);
			if (err)
				return err;
			n += k;
			continue;
		}
		k = text_utf8_len(ps->p, (size_t)(ps->end - ps->p));
		if (!k)
			return -EILSEQ;
		memcpy(out + n, ps->p, k);
		ps->p += k;
		n += k;
	}
	ps->p++;
	out[n] = '\0';
	*s = (const char *)out;
	*len = n;
	return 0;
}

static int value(struct parser *ps, struct jread_value *v);

/* Elements of elem bytes gathered in *scratch (of *cap) are copied into the
 * arena as one block. */
static int seal(struct parser *ps, void *scratch, size_t n, size_t elem, const void **out)
{
	void *block = NULL;

	if (n) {
		block = arena_alloc(ps, n * elem);
		if (!block)
			return -ENOMEM;
		memcpy(block, scratch, n * elem);
	}
	*out = block;
	return 0;
}

/* ',' and the next element, or the closing bracket: 1 at the end, 0 for
 * more, or an error. */
static int next_or_end(struct parser *ps, size_t n, unsigned char close)
{
	skip_ws(ps);
	if (ps->p >= ps->end)
		return -EINVAL;
	if (*ps->p == close) {
		ps->p++;
		return 1;
	}
	if (n && *ps->p++ != ',')
		return -EINVAL;
	skip_ws(ps);
	return 0;
}

static int array(struct parser *ps, struct jread_value *v)
{
	struct jread_value *items = NULL;
	size_t n = 0, cap = 0;
	int err;

	while (!(err = next_or_end(ps, n, ']'))) {
		if (n && ps->p < ps->end && *ps->p == ']')
			err = -EINVAL; /* a trailing comma */
		if (!err)
			err = grow((void **)&items, &cap, n + 1, sizeof(*items), 8);
		if (!err)
			err = value(ps, &items[n++]);
		if (err)
			break;
	}
	if (err == 1) {
		v->type = JREAD_ARRAY;
		v->arr.n = n;
		err = seal(ps, items, n, sizeof(*items), (const void **)&v->arr.v);
	}
	free(items);
	return err;
}

static int member(struct parser *ps, struct jread_member *m)
{
	int err;

	if (ps->p >= ps->end || *ps->p != '"')
		return -EINVAL;
	ps->p++;
	err = string(ps, &m->key, &m->key_len);
	if (err)
		return err;
	skip_ws(ps);
	if (ps->p >= ps->end || *ps->p != ':')
		return -EINVAL;
	ps->p++;
	skip_ws(ps);
	return value(ps, &m->value);
}

static int object(struct parser *ps, struct jread_value *v)
{
	struct jread_member *ms = NULL;
	size_t n = 0, cap = 0;
	int err;

	while (!(err = next_or_end(ps, n, '}'))) {
		err = grow((void **)&ms, &cap, n + 1, sizeof(*ms), 8);
		if (!err)
			err = member(ps, &ms[n++]);
		if (err)
			break;
	}
	if (err == 1) {
		v->type = JREAD_OBJECT;
		v->obj.n = n;
		err = seal(ps, ms, n, sizeof(*ms), (const void **)&v->obj.m);
	}
	free(ms);
	return err;
}

static int value(struct parser *ps, struct jread_value *v)
{
	int err;

	if (ps->p >= ps->end)
		return -EINVAL;
	switch (*ps->p) {
	case '{':
	case '[':
		if (ps->depth >= JREAD_MAX_DEPTH)
			return -E2BIG;
		ps->depth++;
		err = *ps->p++ == '{' ? object(ps, v) : array(ps, v);
		ps->depth--;
		return err;
	case '"':
		ps->p++;
		v->type = JREAD_STRING;
		return string(ps, &v->str.s, &v->str.len);
	case 't':
		return literal(ps, "true", v, JREAD_BOOL, true);
	case 'f':
		return literal(ps, "false", v, JREAD_BOOL, false);
	case 'n':
		return literal(ps, "null", v, JREAD_NULL, false);
	default:
		return number(ps, v);
	}
}

static void arena_free(struct jread_arena *a)
{
	while (a) {
		struct jread_arena *next = a->next;
		free(a);
		a = next;
	}
}

int jread_parse(const char *buf, size_t len, struct jread_doc *doc, size_t *err_at)
{
	struct parser ps = { (const unsigned char *)buf, (const unsigned char *)buf,
			     (const unsigned char *)buf + len, NULL, 0 };
	int err = len > JREAD_MAX_BYTES ? -E2BIG : 0;

	memset(doc, 0, sizeof(*doc));
	if (!err) {
		skip_ws(&ps);
		err = value(&ps, &doc->root);
	}
	if (!err) {
		skip_ws(&ps);
		if (ps.p != ps.end)
			err = -EINVAL; /* a second value, or bytes after the first */
	}
	if (err) {
		arena_free(ps.arena);
		memset(doc, 0, sizeof(*doc));
		if (err_at)
			*err_at =
				len > JREAD_MAX_BYTES ? JREAD_MAX_BYTES : (size_t)(ps.p - ps.start);
		return err;
	}
	doc->arena = ps.arena;
	return 0;
}

void jread_free(struct jread_doc *doc)
{
	if (!doc)
		return;
	arena_free(doc->arena);
	memset(doc, 0, sizeof(*doc));
}

const struct jread_value *jread_get(const struct jread_value *obj, const char *key)
{
	size_t n = strlen(key);

	if (!obj || obj->type != JREAD_OBJECT)
		return NULL;
	for (size_t i = 0; i < obj->obj.n; i++)
		if (obj->obj.m[i].key_len == n && !memcmp(obj->obj.m[i].key, key, n))
			return &obj->obj.m[i].value;
	return NULL;
}

bool jread_i64(const struct jread_value *v, int64_t *out)
{
	if (!v || v->type != JREAD_INT)
		return false;
	*out = v->i;
	return true;
}

bool jread_u64(const struct jread_value *v, uint64_t *out)
{
	if (!v || (v->type != JREAD_UINT && (v->type != JREAD_INT || v->i < 0)))
		return false;
	*out = v->type == JREAD_UINT ? v->u : (uint64_t)v->i;
	return true;
}

bool jread_number(const struct jread_value *v, double *out)
{
	if (!v)
		return false;
	if (v->type == JREAD_INT)
		*out = (double)v->i;
	else if (v->type == JREAD_UINT)
		*out = (double)v->u;
	else if (v->type == JREAD_DOUBLE)
		*out = v->d;
	else
		return false;
	return true;
}

const char *jread_str(const struct jread_value *v)
{
	if (!v || v->type != JREAD_STRING || strlen(v->str.s) != v->str.len)
		return NULL;
	return v->str.s;
}

const struct jread_value *jread_array(const struct jread_value *v)
{
	return v && v->type == JREAD_ARRAY ? v : NULL;
}

const struct jread_value *jread_object(const struct jread_value *v)
{
	return v && v->type == JREAD_OBJECT ? v : NULL;
}

const char *jread_strerror(int err)
{
	switch (err) {
	case -EINVAL:
		return "not valid JSON";
	case -EILSEQ:
		return "a string with invalid UTF-8 or a bad escape";
	case -ERANGE:
		return "a number out of range";
	case -E2BIG:
		return "past a bound (size, nesting or a number's length)";
	case -ENOMEM:
		return "out of memory";
	default:
		return "unreadable";
	}
}
