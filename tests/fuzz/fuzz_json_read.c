// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: the JSON reader for untrusted input
 * (user/util/json_read.c), which `tally diff` runs on files anyone may hand
 * it. The input is the text. Besides crashes, hangs and leaks, it checks the
 * reader's contract on what it takes:
 *
 * - every string is valid UTF-8 of its stated length, NUL-terminated after it;
 * - the tree written back by tally's JSON writer (user/views/json.c, which
 *   escapes what it must) reads back as the same tree: the same types, the
 *   same strings byte for byte, the same integers, doubles that compare
 *   equal (the writer gives the fewest digits that read back the same; a
 *   double with an integer's value may come back as that integer);
 * - a refusal has a negative errno the header lists and an offset within
 *   the input.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../user/util/json_read.h"
#include "../../user/util/text.h"
#include "../../user/views/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_string(const char *s, size_t len)
{
	if (s[len] != '\0')
		abort();
	for (size_t i = 0; i < len;) {
		size_t k = text_utf8_len((const unsigned char *)s + i, len - i);
		if (!k)
			abort();
		i += k;
	}
}

static void write_value(struct json_writer *w, const struct jread_value *v)
{
	switch (v->type) {
	case JREAD_NULL:
		json_null(w);
		break;
	case JREAD_BOOL:
		json_bool(w, v->b);
		break;
	case JREAD_INT:
		json_i64(w, v->i);
		break;
	case JREAD_UINT:
		json_u64(w, v->u);
		break;
	case JREAD_DOUBLE:
		json_double(w, v->d);
		break;
	case JREAD_STRING:
		check_string(v->str.s, v->str.len);
		json_string_n(w, v->str.s, v->str.len);
		break;
	case JREAD_ARRAY:
		json_begin_array(w);
		for (size_t i = 0; i < v->arr.n; i++)
			write_value(w, &v->arr.v[i]);
		json_end_array(w);
		break;
	case JREAD_OBJECT:
		json_begin_object(w);
		for (size_t i = 0; i < v->obj.n; i++) {
			const struct jread_member *m = &v->obj.m[i];
			check_string(m->key, m->key_len);
			/* the writer's keys are C strings: a key with a NUL is
			 * written cut, and compared so below */
			json_key(w, m->key);
			write_value(w, &m->value);
		}
		json_end_object(w);
		break;
	default:
		abort();
	}
}

static long double as_number(const struct jread_value *v)
{
	return v->type == JREAD_INT  ? (long double)v->i :
	       v->type == JREAD_UINT ? (long double)v->u :
				       (long double)v->d;
}

static bool is_number(const struct jread_value *v)
{
	return v->type == JREAD_INT || v->type == JREAD_UINT || v->type == JREAD_DOUBLE;
}

static bool same(const struct jread_value *a, const struct jread_value *b)
{
	if (is_number(a) && is_number(b))
		return as_number(a) == as_number(b);
	if (a->type != b->type)
		return false;
	switch (a->type) {
	case JREAD_BOOL:
		return a->b == b->b;
	case JREAD_STRING:
		return a->str.len == b->str.len && !memcmp(a->str.s, b->str.s, a->str.len);
	case JREAD_ARRAY:
		if (a->arr.n != b->arr.n)
			return false;
		for (size_t i = 0; i < a->arr.n; i++)
			if (!same(&a->arr.v[i], &b->arr.v[i]))
				return false;
		return true;
	case JREAD_OBJECT:
		if (a->obj.n != b->obj.n)
			return false;
		for (size_t i = 0; i < a->obj.n; i++)
			if (strcmp(a->obj.m[i].key, b->obj.m[i].key) ||
			    !same(&a->obj.m[i].value, &b->obj.m[i].value))
				return false;
		return true;
	default:
		return true;
	}
}

static unsigned depth_of(const struct jread_value *v)
{
	unsigned d = 0, k;

	if (v->type == JREAD_ARRAY)
		for (size_t i = 0; i < v->arr.n; i++)
			if ((k = depth_of(&v->arr.v[i])) > d)
				d = k;
	if (v->type == JREAD_OBJECT)
		for (size_t i = 0; i < v->obj.n; i++)
			if ((k = depth_of(&v->obj.m[i].value)) > d)
				d = k;
	return d + (v->type == JREAD_ARRAY || v->type == JREAD_OBJECT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct jread_doc doc, again;
	struct json_writer w;
	char *buf = NULL;
	size_t len = 0, at = SIZE_MAX;
	FILE *mem;
	int err = jread_parse((const char *)data, size, &doc, &at);

	if (err) {
		if ((err != -EINVAL && err != -EILSEQ && err != -ERANGE && err != -E2BIG &&
		     err != -ENOMEM) ||
		    at > size || doc.arena)
			abort();
		return 0;
	}
	/* the writer nests 32 deep (JSON_MAX_DEPTH): deeper trees are only walked */
	if (depth_of(&doc.root) > JSON_MAX_DEPTH) {
		jread_free(&doc);
		return 0;
	}
	mem = open_memstream(&buf, &len);
	if (!mem)
		abort();
	json_init(&w, mem, false);
	write_value(&w, &doc.root);
	if (json_finish(&w) || fclose(mem))
		abort();
	if (jread_parse(buf, len, &again, NULL) || !same(&doc.root, &again.root))
		abort();
	jread_free(&again);
	jread_free(&doc);
	free(buf);
	return 0;
}
