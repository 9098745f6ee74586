// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libFuzzer target: tally diff's reader of pprof profiles
 * (user/cmd/diff_pprof.c) on profile.proto as inflated (the gzip layer is
 * zlib's). The input is the protobuf. Besides crashes, hangs and leaks, it
 * checks the reader's contract: a refusal is one of the errors diff.h
 * lists and leaves nothing allocated; what it takes becomes a document
 * the JSON reader takes, an object with "sites" and "groups" arrays and
 * "exact": false, whose every site has a "frames" array.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../../user/cmd/diff.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const struct jread_value *sites, *groups, *exact;
	struct jread_doc doc;
	char *json = (char *)1;
	size_t len = 1;
	int err = diff_pprof_decode(data, size, &json, &len);

	if (err) {
		if ((err != -EINVAL && err != -ENOMSG && err != -E2BIG && err != -ENOMEM) || json ||
		    len)
			abort();
		return 0;
	}
	if (jread_parse(json, len, &doc, NULL))
		abort();
	sites = jread_array(jread_get(&doc.root, "sites"));
	groups = jread_array(jread_get(&doc.root, "groups"));
	exact = jread_get(&doc.root, "exact");
	if (!sites || !groups || !exact || exact->type != JREAD_BOOL || exact->b)
		abort();
	for (size_t i = 0; i < sites->arr.n; i++)
		if (!jread_array(jread_get(&sites->arr.v[i], "frames")))
			abort();
	jread_free(&doc);
	free(json);
	return 0;
}
