// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The streaming JSON writer (see json.h): punctuation and indentation follow
 * from a stack of open containers, strings are escaped and their UTF-8
 * checked byte by byte, numbers are formatted without regard to the locale.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "json.h"
#include "../util/text.h"

void json_init(struct json_writer *w, FILE *f, bool pretty)
{
	memset(w, 0, sizeof(*w));
	w->f = f;
	w->pretty = pretty;
}

int json_error(const struct json_writer *w)
{
	return w->err;
}

static void put(struct json_writer *w, const char *s, size_t n)
{
	if (w->err || !n)
		return;
	if (fwrite(s, 1, n, w->f) != n)
		w->err = -EIO;
}

static void put_str(struct json_writer *w, const char *s)
{
	put(w, s, strlen(s));
}

static void newline_indent(struct json_writer *w)
{
	if (!w->pretty)
		return;
	put(w, "\n", 1);
	for (unsigned i = 0; i < w->depth; i++)
		put(w, "  ", 2);
}

static bool fail(struct json_writer *w)
{
	w->err = -EINVAL;
	return false;
}

/*
 * Before a member's key or an array's element: the comma and the line. In
 * an object this runs for the key, and the value that follows needs nothing.
 */
static void separate(struct json_writer *w)
{
	if (w->stack[w->depth - 1].nonempty)
		put(w, ",", 1);
	w->stack[w->depth - 1].nonempty = true;
	newline_indent(w);
}

/* Whether a value may be written here; writes what must come before it. */
static bool value_begin(struct json_writer *w)
{
	if (w->err)
		return false;
	if (!w->depth) {
		if (w->root_done)
			return fail(w);
		w->root_done = true;
		return true;
	}
	if (w->stack[w->depth - 1].array) {
		separate(w);
	} else {
		if (!w->have_key)
			return fail(w);
		w->have_key = false;
	}
	return !w->err;
}

static void begin(struct json_writer *w, bool array)
{
	if (!w->err && w->depth == JSON_MAX_DEPTH)
		fail(w);
	if (!value_begin(w))
		return;
	w->stack[w->depth].array = array;
	w->stack[w->depth].nonempty = false;
	w->depth++;
	put(w, array ? "[" : "{", 1);
}

static void end(struct json_writer *w, bool array)
{
	if (w->err)
		return;
	if (!w->depth || w->stack[w->depth - 1].array != array || w->have_key) {
		fail(w);
		return;
	}
	w->depth--;
	/* an empty container stays on one line: {} and [] */
	if (w->stack[w->depth].nonempty)
		newline_indent(w);
	put(w, array ? "]" : "}", 1);
}

void json_begin_object(struct json_writer *w)
{
	begin(w, false);
}

void json_end_object(struct json_writer *w)
{
	end(w, false);
}

void json_begin_array(struct json_writer *w)
{
	begin(w, true);
}

void json_end_array(struct json_writer *w)
{
	end(w, true);
}

/* Two-character escapes; every other control byte, and DEL, becomes \u00XX. */
static const char *const short_escape[0x80] = {
	['"'] = "\\\"", ['\\'] = "\\\\", ['\b'] = "\\b", ['\f'] = "\\f",
	['\n'] = "\\n", ['\r'] = "\\r",	 ['\t'] = "\\t",
};

/* The escape for an ASCII byte, perhaps written to buf; NULL when it passes as is. */
static const char *escape(unsigned char c, char buf[7])
{
	static const char hex[] = "0123456789abcdef";

	if (short_escape[c])
		return short_escape[c];
	/* DEL is legal JSON, but like ESC it drives terminals: make it visible */
	if (c >= 0x20 && c != 0x7f)
		return NULL;
	memcpy(buf, "\\u00", 4);
	buf[4] = hex[c >> 4];
	buf[5] = hex[c & 0xf];
	buf[6] = '\0';
	return buf;
}

static void write_string(struct json_writer *w, const char *str, size_t n)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t run = 0; /* bytes before s[i] that pass unchanged, not yet written */
	size_t i = 0;
	char buf[7];

	put(w, "\"", 1);
	while (i < n) {
		const char *esc = NULL;
		size_t len = 1;

		if (s[i] < 0x80) {
			esc = escape(s[i], buf);
		} else {
			len = text_utf8_len(s + i, n - i);
			if (!len) {
				esc = "\xef\xbf\xbd"; /* U+FFFD for this one byte */
				len = 1;
			}
		}
		if (esc) {
			put(w, str + i - run, run);
			put_str(w, esc);
			run = 0;
		} else {
			run += len;
		}
		i += len;
	}
	put(w, str + n - run, run);
	put(w, "\"", 1);
}

void json_key(struct json_writer *w, const char *key)
{
	if (w->err)
		return;
	if (!key || !w->depth || w->stack[w->depth - 1].array || w->have_key) {
		fail(w);
		return;
	}
	separate(w);
	write_string(w, key, strlen(key));
	put(w, w->pretty ? ": " : ":", w->pretty ? 2 : 1);
	w->have_key = true;
}

void json_string_n(struct json_writer *w, const char *s, size_t n)
{
	if (!w->err && !s && n)
		fail(w);
	if (value_begin(w))
		write_string(w, s, n);
}

void json_string(struct json_writer *w, const char *s)
{
	if (!w->err && !s)
		fail(w);
	if (value_begin(w))
		write_string(w, s, strlen(s));
}

void json_u64(struct json_writer *w, uint64_t v)
{
	char buf[24];

	if (value_begin(w))
		put(w, buf, (size_t)snprintf(buf, sizeof(buf), "%" PRIu64, v));
}

void json_i64(struct json_writer *w, int64_t v)
{
	char buf[24];

	if (value_begin(w))
		put(w, buf, (size_t)snprintf(buf, sizeof(buf), "%" PRId64, v));
}

/*
 * %g writes only a sign, digits, the locale's decimal point (which may be
 * ',' or a multibyte character) and an exponent; whatever is none of those
 * is the decimal point, and all its bytes become one '.'. The round-trip check reads with
 * strtod in the same locale, so it sees the same decimal point.
 */
void json_double(struct json_writer *w, double v)
{
	char raw[64], out[32];
	size_t n = 0;

	if (!isfinite(v)) {
		json_null(w);
		return;
	}
	if (!value_begin(w))
		return;
	/*
	 * Any decimal of up to 15 digits survives the trip through a double, so
	 * %.15g gives back what was meant (0.1, not 0.10000000000000001); 17
	 * digits tell every double apart.
	 */
	for (int prec = 15; prec <= 17; prec++) {
		snprintf(raw, sizeof(raw), "%.*g", prec, v);
		if (strtod(raw, NULL) == v)
			break;
	}
	for (const char *p = raw; *p && n < sizeof(out); p++) {
		if ((*p >= '0' && *p <= '9') || *p == '-' || *p == '+' || *p == 'e')
			out[n++] = *p;
		else if (n && out[n - 1] != '.')
			out[n++] = '.';
	}
	put(w, out, n);
}

void json_bool(struct json_writer *w, bool v)
{
	if (value_begin(w))
		put_str(w, v ? "true" : "false");
}

void json_null(struct json_writer *w)
{
	if (value_begin(w))
		put(w, "null", 4);
}

void json_kv_u64(struct json_writer *w, const char *key, uint64_t v)
{
	json_key(w, key);
	json_u64(w, v);
}

void json_kv_i64(struct json_writer *w, const char *key, int64_t v)
{
	json_key(w, key);
	json_i64(w, v);
}

void json_kv_str(struct json_writer *w, const char *key, const char *s)
{
	json_key(w, key);
	if (s)
		json_string(w, s);
	else
		json_null(w);
}

void json_kv_bool(struct json_writer *w, const char *key, bool v)
{
	json_key(w, key);
	json_bool(w, v);
}

void json_kv_double(struct json_writer *w, const char *key, double v)
{
	json_key(w, key);
	json_double(w, v);
}

void json_kv_null(struct json_writer *w, const char *key)
{
	json_key(w, key);
	json_null(w);
}

int json_finish(struct json_writer *w)
{
	if (w->err)
		return w->err;
	if (w->depth || !w->root_done) {
		fail(w);
		return w->err;
	}
	put(w, "\n", 1);
	if (!w->err && (fflush(w->f) || ferror(w->f)))
		w->err = -EIO;
	return w->err;
}
