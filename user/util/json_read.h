/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A JSON reader for untrusted input (RFC 8259, strictly): `tally diff` reads
 * documents it did not write in this run, and a file handed to it may be
 * anything. The whole text becomes a tree of values in one arena, freed at
 * once. What it bounds, so that no input can crash it or make it take
 * memory out of proportion:
 *
 * - the input's size (JREAD_MAX_BYTES), the nesting (JREAD_MAX_DEPTH: the
 *   parser recurses once per level), a number's length (JREAD_MAX_NUMBER);
 * - integers are exact over [-2^63, 2^64 - 1] (JREAD_INT, or JREAD_UINT above
 *   INT64_MAX: the snapshot's counters are u64); any other number is a
 *   double, and one past the double's range is refused (-ERANGE), never
 *   taken as infinity;
 * - strings are valid UTF-8 once decoded (text_utf8_len's rule: no overlong
 *   forms, no surrogates), escapes decoded, \u0000 kept as a NUL byte (each
 *   string carries its length and is NUL-terminated after it), a lone or
 *   reversed surrogate escape refused; a raw control byte is refused.
 *
 * Errors are negative errnos (docs/STYLE.md rule 9): -EINVAL bad syntax or
 * trailing bytes, -EILSEQ bad UTF-8 or escape, -ERANGE a number out of
 * range, -E2BIG past a bound, -ENOMEM; with the byte offset where the text
 * went wrong, for a one-line message.
 */
#ifndef TALLY_JSON_READ_H
#define TALLY_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JREAD_MAX_BYTES (64u << 20)
#define JREAD_MAX_DEPTH 64
#define JREAD_MAX_NUMBER 1024 /* characters: longer than any double needs */

enum jread_type {
	JREAD_NULL,
	JREAD_BOOL,
	JREAD_INT,    /* i: exact, INT64_MIN..INT64_MAX */
	JREAD_UINT,   /* u: exact, above INT64_MAX */
	JREAD_DOUBLE, /* d: finite */
	JREAD_STRING,
	JREAD_ARRAY,
	JREAD_OBJECT,
};

struct jread_member;

struct jread_value {
	enum jread_type type;
	union {
		bool b;
		int64_t i;
		uint64_t u;
		double d;
		struct {
			const char *s; /* NUL-terminated after len; may hold NUL */
			size_t len;
		} str;
		struct {
			const struct jread_value *v;
			size_t n;
		} arr;
		struct {
			const struct jread_member *m; /* in the text's order */
			size_t n;
		} obj;
	};
};

struct jread_member {
	const char *key; /* as a string value: NUL-terminated, may hold NUL */
	size_t key_len;
	struct jread_value value;
};

struct jread_arena;

struct jread_doc {
	struct jread_value root;
	struct jread_arena *arena; /* every value, member and string of the tree */
};

/*
 * buf[0 .. len) parsed into doc: 0, or a negative errno (above) with *err_at
 * (when not NULL) the offset of the byte where it went wrong and doc empty.
 * buf need not be NUL-terminated; a NUL outside a string is an error.
 */
int jread_parse(const char *buf, size_t len, struct jread_doc *doc, size_t *err_at);
/* NULL-safe; doc is empty after. */
void jread_free(struct jread_doc *doc);

/* obj's first member named key (a key with a NUL never matches), or NULL
 * when obj is NULL, not an object, or has none. */
const struct jread_value *jread_get(const struct jread_value *obj, const char *key);
/* v as a whole number that fits, into *out: false for NULL, another type,
 * or out of range. */
bool jread_i64(const struct jread_value *v, int64_t *out);
bool jread_u64(const struct jread_value *v, uint64_t *out);
/* v as a number (an integer converted), into *out: false for another type. */
bool jread_number(const struct jread_value *v, double *out);
/* v's text when v is a string without NUL, else NULL. */
const char *jread_str(const struct jread_value *v);
/* v when it is an array (or object), else NULL: a caller's one check. */
const struct jread_value *jread_array(const struct jread_value *v);
const struct jread_value *jread_object(const struct jread_value *v);
/* The error's words for a message ("nested too deep"). */
const char *jread_strerror(int err);

#endif /* TALLY_JSON_READ_H */
