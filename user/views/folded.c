// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The folded stacks of flamegraph.pl, inferno and speedscope (pprof.h's
 * folded_write): "root;...;leaf BYTES", one line per distinct stack text,
 * sorted so that equal profiles give equal files.
 *
 * Frames are compared as text, not as locations: two call sites in one
 * function are one frame of a flame graph, so stacks equal as text are
 * summed. Only what is read is checked: the samples with bytes of the value
 * asked for (in use, or allocated), their locations and those locations'
 * mappings.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pprof.h"

/* One stack: its text and bytes. */
struct stack {
	char *text;
	int64_t bytes;
};

static bool known(const char *function)
{
	return function && *function;
}

/* A name, with what would break a folded line replaced: ';' separates frames,
 * a newline the lines; other controls (C0, DEL, C1) are for no one. Spaces
 * stay ("operator new(unsigned long)"): the count is after the line's last
 * space, as flamegraph.pl and speedscope read it. */
static void folded_name(FILE *f, const char *s)
{
	for (const unsigned char *c = (const unsigned char *)s; *c; c++) {
		if (*c == ';') {
			fputc(':', f);
		} else if (*c < ' ' || *c == 0x7f) {
			fputc('_', f);
		} else if (*c == 0xc2 && c[1] >= 0x80 && c[1] <= 0x9f) {
			fputc('_', f);
			c++;
		} else {
			fputc(*c, f);
		}
	}
}

/* A frame of unknown function: "module+0xOFFSET" in its mapping's file (its
 * base name), or its address when in no mapping with a name. */
static void folded_unknown(FILE *f, const struct prof *p, const struct prof_loc *l)
{
	const struct prof_mapping *m = l->mapping >= 0 ? &p->maps[l->mapping] : NULL;
	const char *base = m && m->file ? strrchr(m->file, '/') : NULL;

	base = base && base[1] ? base + 1 : m ? m->file : NULL;
	if (base && *base) {
		folded_name(f, base);
		fprintf(f, "+0x%" PRIx64, l->addr - m->start + m->offset);
	} else {
		fprintf(f, "0x%" PRIx64, l->addr);
	}
}

/* A location's frames, outermost first (its lines are innermost first):
 * 0, or -EINVAL for a mapping out of range. */
static int folded_location(FILE *f, const struct prof *p, size_t idx)
{
	const struct prof_loc *l = idx < p->nlocs ? &p->locs[idx] : NULL;
	bool named = false;

	if (!l || l->mapping < -1 || (l->mapping >= 0 && (size_t)l->mapping >= p->nmaps) ||
	    (l->nlines && !l->lines) || (l->mapping >= 0 && !p->maps))
		return -EINVAL;
	for (size_t j = l->nlines; j-- > 0;) {
		if (!known(l->lines[j].function))
			continue;
		if (ftell(f) > 0)
			fputc(';', f);
		folded_name(f, l->lines[j].function);
		named = true;
	}
	if (named)
		return 0;
	if (ftell(f) > 0)
		fputc(';', f);
	folded_unknown(f, p, l);
	return 0;
}

/* The text of s's stack, root first (its locations are leaf first), in a
 * malloc'd string: 0 or -errno (-EINVAL for an index out of range). */
static int folded_stack(const struct prof *p, const struct prof_sample *s, char **text)
{
	size_t len;
	FILE *f;
	int err = 0;

	if (s->nlocs && (!s->locs || !p->locs))
		return -EINVAL;
	*text = NULL;
	f = open_memstream(text, &len);
	if (!f)
		return -errno;
	for (size_t i = s->nlocs; i-- > 0 && !err;)
		err = folded_location(f, p, s->locs[i]);
	if (!s->nlocs)
		fputs("[unknown]", f);
	/* a memory stream's writes fail only for memory, said again by fclose */
	if (fclose(f) && !err)
		err = -ENOMEM;
	if (err) {
		free(*text);
		*text = NULL;
	}
	return err;
}

static int stack_cmp(const void *a, const void *b)
{
	return strcmp(((const struct stack *)a)->text, ((const struct stack *)b)->text);
}

/* Sorted stacks, equal ones summed; a sum that is not positive has no width
 * in a flame graph, and is left out. *lines: those written. */
static int folded_print(FILE *f, const struct stack *st, size_t n, size_t *lines)
{
	errno = 0;
	*lines = 0;
	for (size_t i = 0, j; i < n; i = j) {
		uint64_t sum = 0; /* unsigned: wraps, defined */

		for (j = i; j < n && !strcmp(st[j].text, st[i].text); j++)
			sum += (uint64_t)st[j].bytes;
		if ((int64_t)sum <= 0)
			continue;
		if (fprintf(f, "%s %" PRId64 "\n", st[i].text, (int64_t)sum) < 0)
			return errno ? -errno : -EIO;
		(*lines)++;
	}
	if (fflush(f) || ferror(f))
		return errno ? -errno : -EIO;
	return 0;
}

int folded_write(FILE *f, const struct prof *p, enum folded_value value, size_t *lines)
{
	struct stack *st;
	size_t n = 0, written = 0;
	int err = 0;

	if (lines)
		*lines = 0;
	if (!f || !p || (p->nsamples && !p->samples) ||
	    (value != FOLDED_INUSE && value != FOLDED_ALLOC && value != FOLDED_PEAK))
		return -EINVAL;
	st = calloc(p->nsamples ? p->nsamples : 1, sizeof(*st));
	if (!st)
		return -ENOMEM;
	for (size_t i = 0; i < p->nsamples; i++) {
		const struct prof_sample *s = &p->samples[i];
		int64_t bytes = value == FOLDED_ALLOC ? s->alloc_space :
				value == FOLDED_PEAK  ? s->peak_space :
							s->inuse_space;
		if (!bytes)
			continue;
		err = folded_stack(p, s, &st[n].text);
		if (err)
			goto out_free;
		st[n++].bytes = bytes;
	}
	qsort(st, n, sizeof(*st), stack_cmp);
	err = folded_print(f, st, n, &written);
	if (lines)
		*lines = written;
out_free:
	for (size_t i = 0; i < n; i++)
		free(st[i].text);
	free(st);
	return err;
}
