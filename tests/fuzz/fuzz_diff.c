// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: `tally diff`'s matching and renderings
 * (user/cmd/diff_match.c, diff_out.c) on two documents anyone may have
 * written. The input is BEFORE, a NUL byte, AFTER; both must be JSON (the
 * reader is fuzzed on its own, fuzz_json_read) for the diff to run. Besides
 * crashes, hangs and leaks, it checks that the diff's JSON reads back (the
 * JSON reader takes it, an object with "groups", "processes" and "sites"
 * arrays, no more sites than --top asks) and that its text is written.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../user/cmd/diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_json(const char *buf, size_t len, unsigned top)
{
	const struct jread_value *sites;
	struct jread_doc doc;

	if (jread_parse(buf, len, &doc, NULL))
		abort();
	sites = jread_array(jread_get(&doc.root, "sites"));
	if (!sites || !jread_array(jread_get(&doc.root, "groups")) ||
	    !jread_array(jread_get(&doc.root, "processes")) || (top && sites->arr.n > top))
		abort();
	jread_free(&doc);
}

static void run(const struct jread_doc *b, const struct jread_doc *a, unsigned top)
{
	struct diff d = { .b = { "before", &b->root }, .a = { "after", &a->root }, .top = top };
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (diff_build(&d)) {
		diff_free(&d);
		return; /* -ENOMEM */
	}
	f = open_memstream(&buf, &len);
	if (!f || diff_print_text(f, &d))
		abort();
	fclose(f);
	free(buf);
	buf = NULL;
	f = open_memstream(&buf, &len);
	if (!f || diff_print_json(f, &d))
		abort();
	fclose(f);
	check_json(buf, len, top);
	free(buf);
	diff_free(&d);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *nul = memchr(data, 0, size);
	struct jread_doc b, a;

	if (!nul)
		return 0;
	if (jread_parse((const char *)data, (size_t)(nul - data), &b, NULL))
		return 0;
	if (!jread_parse((const char *)nul + 1, size - (size_t)(nul - data) - 1, &a, NULL)) {
		run(&b, &a, (unsigned)(size % 4)); /* --top 0 (all) to 3 */
		jread_free(&a);
	}
	jread_free(&b);
	return 0;
}
