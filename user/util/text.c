// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Untrusted text: the UTF-8 check and the terminal's policy (text.h). */
#include <string.h>

#include "text.h"

size_t text_utf8_len(const unsigned char *s, size_t n)
{
	unsigned char lo = 0x80, hi = 0xbf;
	size_t len;

	if (s[0] < 0x80) {
		return 1;
	} else if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2; /* 0xc0, 0xc1: overlong */
	} else if (s[0] >= 0xe0 && s[0] <= 0xef) {
		len = 3;
		if (s[0] == 0xe0)
			lo = 0xa0; /* below: overlong */
		else if (s[0] == 0xed)
			hi = 0x9f; /* above: surrogates U+D800..DFFF */
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4;
		if (s[0] == 0xf0)
			lo = 0x90; /* below: overlong */
		else if (s[0] == 0xf4)
			hi = 0x8f; /* above: past U+10FFFF */
	} else {
		return 0; /* a continuation byte, or 0xf5..0xff */
	}
	if (n < len || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if (s[i] < 0x80 || s[i] > 0xbf)
			return 0;
	return len;
}

/* The bytes c takes on a terminal: 1 as it is, 2 for a backslash doubled,
 * 4 for "\xNN". */
static size_t terminal_width(unsigned char c)
{
	return c == '\\' ? 2 : c >= 0x20 && c < 0x7f ? 1 : 4;
}

size_t text_terminal_len(const char *s)
{
	size_t n = 0;

	for (; *s; s++)
		n += terminal_width((unsigned char)*s);
	return n;
}

size_t text_sanitize_terminal(char *out, size_t size, const char *in, size_t inlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!size)
		return 0;
	for (size_t i = 0; i < inlen && in[i]; i++) {
		unsigned char c = (unsigned char)in[i];
		size_t n = terminal_width(c);
		char e[4];

		if (n == 2) {
			/* so that "\x1b" in the output always means an escaped byte */
			e[0] = e[1] = '\\';
		} else if (n == 1) {
			e[0] = (char)c;
		} else {
			e[0] = '\\';
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
		}
		if (o + n >= size) {
			if (o + 1 < size)
				out[o++] = '~';
			break;
		}
		memcpy(out + o, e, n);
		o += n;
	}
	out[o] = 0;
	return o;
}
