/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Untrusted text (docs/STYLE.md rule 10): thread, group and kernel names,
 * command lines, paths, all written by the target. What each sink lets
 * through, and why they differ:
 *
 * - JSON (views/json.c) and Prometheus (views/prom.c) carry valid UTF-8 as
 *   it is: their readers are parsers, and a name in any script is still the
 *   name. Both take a sequence only when text_utf8_len says it is valid
 *   (RFC 3629), so that what they write is valid UTF-8 whatever the target
 *   wrote; each then applies its own escaping. JSON: RFC 8259's escapes,
 *   every other C0 control and DEL as \u00XX, an invalid byte as U+FFFD.
 *   Prometheus: a label value's \\, \n and \" escapes, and U+FFFD for an
 *   invalid byte and for a C0 or C1 control or DEL (terminal escapes, which
 *   a person reading the exposition with curl would run).
 * - A terminal (tally top, the snapshot's text) gets text_sanitize_terminal:
 *   printable ASCII only, everything else as "\xNN", valid UTF-8 included,
 *   because the views align columns by bytes, and C1 controls and bidi
 *   overrides (U+202E) are valid UTF-8 too.
 */
#ifndef TALLY_TEXT_H
#define TALLY_TEXT_H

#include <stddef.h>

/*
 * The length of the valid UTF-8 sequence at s (of n > 0 bytes): 1 for an
 * ASCII byte (NUL and controls included), 2 to 4 for a multibyte sequence
 * that is valid per RFC 3629 (no overlong forms, no surrogates U+D800..DFFF,
 * nothing past U+10FFFF), or 0 when the byte at s starts none. A caller
 * replaces an invalid byte on its own and goes on at the next, so a
 * truncated sequence never swallows the byte after it.
 */
size_t text_utf8_len(const unsigned char *s, size_t n);

/*
 * in[0 .. inlen), up to a NUL, into out as printable ASCII: bytes 0x20..0x7e
 * as they are, except '\' as "\\"; every other byte as "\xNN". Non-ASCII is
 * escaped too, valid UTF-8 included: the views align columns by bytes, and
 * C1 controls and bidi overrides are UTF-8 as well. An escape is never cut:
 * when out is too small, the text ends before it, with "~" when room is left.
 * Returns the length written (out is always NUL-terminated when size > 0).
 */
size_t text_sanitize_terminal(char *out, size_t size, const char *in, size_t inlen);
/* The length of the NUL-terminated s as text_sanitize_terminal writes it
 * when out has room for all of it (the NUL not counted). */
size_t text_terminal_len(const char *s);

#endif /* TALLY_TEXT_H */
