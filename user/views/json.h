/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A streaming JSON writer to a FILE *: the CLI prints snapshot documents with
 * it and writes Chrome trace files incrementally, so nothing is built in
 * memory. Strings from traced processes are untrusted (docs/STYLE.md rule 10): every
 * string is escaped per RFC 8259 and invalid UTF-8 becomes U+FFFD, so the
 * output is always valid UTF-8 JSON whatever the input bytes.
 *
 * Errors are sticky, like ferror(): a caller writes a whole document and
 * checks once, with json_finish(). After the first error every call does
 * nothing, so a broken document is cut short rather than continued wrongly.
 */
#ifndef TALLY_JSON_H
#define TALLY_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define JSON_MAX_DEPTH 32

/* Public so callers can keep one on the stack; touch it only through json_*(). */
struct json_writer {
	FILE *f;
	bool pretty;	/* 2-space indentation, one member or element per line */
	bool have_key;	/* a key is written and its value is due */
	bool root_done; /* the single top-level value has begun */
	int err;	/* 0, or the first negative errno; sticky */
	unsigned depth; /* open containers, 0..JSON_MAX_DEPTH */
	struct {
		bool array;    /* else an object */
		bool nonempty; /* a member or element is written: the next needs a comma */
	} stack[JSON_MAX_DEPTH];
};

void json_init(struct json_writer *w, FILE *f, bool pretty);

void json_begin_object(struct json_writer *w);
void json_end_object(struct json_writer *w);
void json_begin_array(struct json_writer *w);
void json_end_array(struct json_writer *w);

/* Inside an object only; the next value is this member's. */
void json_key(struct json_writer *w, const char *key);

void json_string(struct json_writer *w, const char *s);
/* n bytes, which may include NUL (written as \u0000). */
void json_string_n(struct json_writer *w, const char *s, size_t n);
void json_u64(struct json_writer *w, uint64_t v);
void json_i64(struct json_writer *w, int64_t v);
/*
 * The fewest of 15, 16 or 17 significant digits that read back as the same
 * double (0.1, not 0.10000000000000001); NaN and infinities as null.
 */
void json_double(struct json_writer *w, double v);
void json_bool(struct json_writer *w, bool v);
void json_null(struct json_writer *w);

void json_kv_u64(struct json_writer *w, const char *key, uint64_t v);
void json_kv_i64(struct json_writer *w, const char *key, int64_t v);
/* s NULL: null (a name or path that is not known) */
void json_kv_str(struct json_writer *w, const char *key, const char *s);
void json_kv_bool(struct json_writer *w, const char *key, bool v);
void json_kv_double(struct json_writer *w, const char *key, double v);
void json_kv_null(struct json_writer *w, const char *key);

/*
 * 0, -EIO after a failed write, or -EINVAL after misuse: a value without a
 * key in an object, a key outside an object or twice, the end of a container
 * that is not the innermost open one, nesting past JSON_MAX_DEPTH, a second
 * top-level value, a NULL string.
 */
int json_error(const struct json_writer *w);

/*
 * Ends the document: -EINVAL unless exactly one top-level value was written
 * and every container is closed; otherwise writes a newline and flushes, and
 * returns json_error() (-EIO when the flush fails). Does not close the FILE.
 */
int json_finish(struct json_writer *w);

#endif /* TALLY_JSON_H */
