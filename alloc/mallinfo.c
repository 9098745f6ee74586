// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * glibc's malloc extensions, answered from the allocator's own figures:
 * mallinfo2 and mallinfo, malloc_stats, malloc_info, malloc_trim, mallopt.
 * Without them a preloaded program reached glibc's, which describe glibc's
 * arena, idle under this allocator: mallinfo2 said 0 bytes in use for a
 * program holding 1 MB, a misleading figure, not an error.
 *
 * The identity's terms map on glibc's fields: uordblks the bytes in use
 * (live + rounding, as glibc counts whole chunks), fordblks the free ones
 * (cache, span_free, returned, virgin, hysteresis), arena everything mapped
 * (the large blocks too: hblkhd stays 0, hblks counts them), keepcost what
 * malloc_trim could give back now (hysteresis). arena - uordblks - fordblks
 * is the metadata (segment_overhead).
 */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include "api.h"

static struct mallinfo2 info_from(const struct tally_stats *s)
{
	return (struct mallinfo2){
		.arena = s->mapped,
		.hblks = s->large_count,
		.uordblks = s->live + s->rounding,
		.fordblks = s->cache + s->span_free + s->returned + s->virgin + s->hysteresis,
		.keepcost = s->hysteresis,
	};
}

static struct mallinfo2 info_now(void)
{
	struct tally_stats s = { 0 };
	tally_alloc_stats(&s);
	return info_from(&s);
}

TALLY_API struct mallinfo2 TA(mallinfo2)(void)
{
	return info_now();
}

/* The old form's fields are ints: clamped, as they wrap in glibc's. */
static int clamp(size_t v)
{
	return v > INT_MAX ? INT_MAX : (int)v;
}

TALLY_API struct mallinfo TA(mallinfo)(void)
{
	struct mallinfo2 m = info_now();
	return (struct mallinfo){ .arena = clamp(m.arena),
				  .hblks = clamp(m.hblks),
				  .uordblks = clamp(m.uordblks),
				  .fordblks = clamp(m.fordblks),
				  .keepcost = clamp(m.keepcost) };
}

/* glibc's layout (a program or a person may parse it), to stderr. */
TALLY_API void TA(malloc_stats)(void)
{
	struct mallinfo2 m = info_now();
	fprintf(stderr, "Arena 0:\nsystem bytes     = %10zu\nin use bytes     = %10zu\n", m.arena,
		m.uordblks);
	fprintf(stderr, "Total (incl. mmap):\nsystem bytes     = %10zu\nin use bytes     = %10zu\n",
		m.arena, m.uordblks);
	fprintf(stderr, "max mmap regions = %10zu\nmax mmap bytes   = %10zu\n", m.hblks, (size_t)0);
}

/* glibc's document (version 1), one heap; options other than 0: EINVAL,
 * returned as glibc does. */
TALLY_API int TA(malloc_info)(int options, FILE *fp)
{
	if (options != 0 || !fp)
		return EINVAL;
	struct tally_stats s = { 0 };
	tally_alloc_stats(&s);
	struct mallinfo2 m = info_from(&s);
	fprintf(fp,
		"<malloc version=\"1\">\n<heap nr=\"0\">\n<sizes>\n</sizes>\n"
		"<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
		"<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n"
		"<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n"
		"</heap>\n<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
		"<total type=\"rest\" count=\"0\" size=\"%zu\"/>\n"
		"<total type=\"mmap\" count=\"%zu\" size=\"0\"/>\n"
		"<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%zu\"/>\n"
		"<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n"
		"</malloc>\n",
		m.fordblks, m.arena, m.arena, m.arena, m.arena, m.fordblks, m.hblks, m.arena,
		m.arena, m.arena, m.arena);
	return 0;
}

/* Everything idle goes back now, as the purger would after its delay; 1
 * when some memory was released (glibc's answer), 0 otherwise. */
TALLY_API int TA(malloc_trim)(size_t pad)
{
	(void)pad;
	struct tally_stats before = { 0 }, after = { 0 };
	tally_alloc_stats(&before);
	tally_alloc_collect(1);
	tally_alloc_stats(&after);
	return after.mapped < before.mapped || after.returned > before.returned;
}

/* The allocator keeps its own policy (classes, the purge delay): every
 * parameter glibc knows is accepted and changes nothing, as jemalloc's and
 * mimalloc's mallopt do; glibc's one range check (M_MXFAST) is kept. */
TALLY_API int TA(mallopt)(int param, int value)
{
	if (param == M_MXFAST && (value < 0 || (size_t)value > 80 * sizeof(size_t) / 4))
		return 0;
	return 1;
}
