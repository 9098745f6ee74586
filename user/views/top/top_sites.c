// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The sites view's rows of `tally top` (top_sites.h): pure code, no I/O. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_sites.h"
#include "internal.h"
#include "../../util/text.h"

#define SEP " < "
#define SEP_LEN (sizeof(SEP) - 1)

/* A stack's text as it is written into its row; full once a frame was cut:
 * the frames after it are left out. */
struct stack_text {
	char *s;
	size_t size, len; /* len < size: s is always NUL-terminated */
	bool full;
};

/* A frame, sanitized, after the separator unless it is the first. One that
 * does not fit is cut by text_sanitize_terminal, which marks the cut with a "~" (and
 * never cuts an escape); when not even the separator and a "~" fit, the "~"
 * alone ends the text. */
static void frame_put(struct stack_text *t, const char *name)
{
	size_t room = t->size - t->len; /* with the NUL's byte */

	if (t->full)
		return;
	if (t->len) {
		if (room < SEP_LEN + 2) {
			if (room > 1) {
				t->s[t->len++] = '~';
				t->s[t->len] = 0;
			}
			t->full = true;
			return;
		}
		memcpy(t->s + t->len, SEP, SEP_LEN + 1);
		t->len += SEP_LEN;
		room -= SEP_LEN;
	}
	if (text_terminal_len(name) >= room)
		t->full = true;
	t->len += text_sanitize_terminal(t->s + t->len, room, name, SIZE_MAX);
}

/* A frame whose function is not known: "module+0xOFFSET" in its mapping's
 * file (its base name), or its address when it is in no named mapping. The
 * path is the target's: frame_put sanitizes it with the rest. */
static void unknown_put(struct stack_text *t, const struct prof *p, const struct prof_loc *l)
{
	const struct prof_mapping *m = l->mapping >= 0 ? &p->maps[l->mapping] : NULL;
	const char *base = m && m->file ? strrchr(m->file, '/') : NULL;
	char name[512];

	base = base && base[1] ? base + 1 : m ? m->file : NULL;
	if (base && *base)
		snprintf(name, sizeof(name), "%s+0x%" PRIx64, base, l->addr - m->start + m->offset);
	else
		snprintf(name, sizeof(name), "0x%" PRIx64, l->addr);
	frame_put(t, name);
}

/* The frames of location idx, innermost first: its functions, those inlined
 * there before the one they were inlined into, or where it is when no
 * function is known. 0, or -EINVAL for an index out of range. */
static int loc_put(struct stack_text *t, const struct prof *p, size_t idx)
{
	const struct prof_loc *l = p->locs && idx < p->nlocs ? &p->locs[idx] : NULL;
	bool named = false;

	if (!l || (l->nlines && !l->lines) || l->mapping < -1 ||
	    (l->mapping >= 0 && (!p->maps || (size_t)l->mapping >= p->nmaps)))
		return -EINVAL;
	for (size_t j = 0; j < l->nlines; j++) {
		const char *fn = l->lines[j].function;

		if (fn && *fn) {
			frame_put(t, fn);
			named = true;
		}
	}
	if (!named)
		unknown_put(t, p, l);
	return 0;
}

/* A site as it is ordered: its sample, and whether its process knows its
 * peak (a site of a process not listed, or of glibc mode, does not). */
struct site_ref {
	const struct prof_sample *s;
	bool peak_known;
};

static int site_row(struct top_site_row *r, const struct prof *p, const struct site_ref *ref)
{
	const struct prof_sample *s = ref->s;
	struct stack_text t = { r->stack, sizeof(r->stack), 0, false };
	int err = 0;

	r->stack[0] = 0;
	r->inuse = s->inuse_space;
	r->peak_known = ref->peak_known;
	r->peak = ref->peak_known ? s->peak_space : 0;
	r->objects = s->inuse_objects;
	r->allocated = s->alloc_space;
	/* a label of the profile's: only a pid a process can have is one */
	r->pid = s->pid > 0 && s->pid <= INT32_MAX ? (pid_t)s->pid : 0;
	if (s->group && s->group[0])
		text_sanitize_terminal(r->group, sizeof(r->group), s->group, SIZE_MAX);
	else
		strcpy(r->group, "-");
	if (s->nlocs && !s->locs)
		return -EINVAL;
	for (size_t i = 0; i < s->nlocs && !err && !t.full; i++)
		err = loc_put(&t, p, s->locs[i]);
	if (!s->nlocs)
		frame_put(&t, "[unknown]");
	return err;
}

/* Whether the process of a site's pid label is listed and knows its peak. */
static bool peak_known(const struct top_frame *f, int64_t pid)
{
	for (unsigned i = 0; i < f->nprocs; i++)
		if (f->procs[i].pid == pid)
			return f->procs[i].peak_known;
	return false;
}

/* Most bytes in use first, then most allocated, then the profile's order
 * (the samples of one array: their addresses are that order). */
static int by_inuse(const void *a, const void *b)
{
	const struct prof_sample *x = ((const struct site_ref *)a)->s;
	const struct prof_sample *y = ((const struct site_ref *)b)->s;

	if (x->inuse_space != y->inuse_space)
		return x->inuse_space > y->inuse_space ? -1 : 1;
	if (x->alloc_space != y->alloc_space)
		return x->alloc_space > y->alloc_space ? -1 : 1;
	return (x > y) - (x < y);
}

/* Most bytes in use at the peak first, those whose peak is not known last,
 * then as by_inuse: what held memory at the peak, freed since or not. */
static int by_peak(const void *a, const void *b)
{
	const struct site_ref *x = a, *y = b;

	if (x->peak_known != y->peak_known)
		return x->peak_known ? -1 : 1;
	if (x->peak_known && x->s->peak_space != y->s->peak_space)
		return x->s->peak_space > y->s->peak_space ? -1 : 1;
	return by_inuse(a, b);
}

static int sites_reserve(struct top_frame *f, unsigned n)
{
	struct top_site_row *v;

	if (f->capsites >= n)
		return 0;
	v = realloc(f->sites, n * sizeof(*v));
	if (!v)
		return -ENOMEM;
	f->sites = v;
	f->capsites = n;
	return 0;
}

int top_sites_build(struct top_frame *f, const struct prof *p, bool by_peak_first)
{
	struct site_ref *order = NULL;
	unsigned n;
	int err = 0;

	f->nsites = 0;
	f->sites_total = 0;
	f->sites_period = 0;
	f->sites_err = 0;
	f->sites_by_peak = by_peak_first;
	f->sites_state = p ? TOP_SITES_SHOWN : TOP_SITES_OFF;
	if (!p || !p->nsamples)
		return 0;
	if (!p->samples) {
		err = -EINVAL;
		goto out;
	}
	/* ordered here, whatever the profile's order: only the first rows are kept */
	n = p->nsamples < TOP_SITES_MAX ? (unsigned)p->nsamples : TOP_SITES_MAX;
	order = malloc(p->nsamples * sizeof(*order));
	if (!order || sites_reserve(f, n)) {
		err = -ENOMEM;
		goto out;
	}
	for (size_t i = 0; i < p->nsamples; i++)
		order[i] = (struct site_ref){ &p->samples[i], peak_known(f, p->samples[i].pid) };
	qsort(order, p->nsamples, sizeof(*order), by_peak_first ? by_peak : by_inuse);
	for (unsigned i = 0; i < n && !err; i++)
		err = site_row(&f->sites[i], p, &order[i]);
	if (!err) {
		f->nsites = n;
		f->sites_total = p->nsamples;
		f->sites_period = p->period;
	}
out:
	free(order);
	if (err)
		top_sites_failed(f, err);
	return err;
}

/* a before b in the order of top_sites_sort */
static bool site_before(const struct top_site_row *a, const struct top_site_row *b,
			bool by_peak_first)
{
	if (by_peak_first && a->peak_known != b->peak_known)
		return a->peak_known;
	if (by_peak_first && a->peak != b->peak)
		return a->peak > b->peak;
	if (a->inuse != b->inuse)
		return a->inuse > b->inuse;
	return a->allocated > b->allocated;
}

void top_sites_sort(struct top_frame *f, bool by_peak_first)
{
	f->sites_by_peak = by_peak_first;
	/* insertion sort: stable, so that ties keep the profile's order as
	 * built, and n is at most TOP_SITES_MAX */
	for (unsigned i = 1; i < f->nsites; i++) {
		struct top_site_row r = f->sites[i];
		unsigned j = i;

		while (j > 0 && site_before(&r, &f->sites[j - 1], by_peak_first)) {
			f->sites[j] = f->sites[j - 1];
			j--;
		}
		f->sites[j] = r;
	}
}

void top_sites_failed(struct top_frame *f, int err)
{
	f->nsites = 0;
	f->sites_total = 0;
	f->sites_state = TOP_SITES_FAILED;
	f->sites_err = err;
}

const char *top_sites_empty(const struct top_frame *f, char *buf, size_t size)
{
	switch (f->sites_state) {
	case TOP_SITES_OFF:
		snprintf(buf, size, "no sites: sampling is off (--no-sample)");
		return buf;
	case TOP_SITES_FAILED:
		snprintf(buf, size, "no sites: cannot build the heap profile: %s",
			 strerror(-f->sites_err));
		return buf;
	default:
		if (f->nsites)
			return NULL;
		snprintf(buf, size, "no sites sampled yet");
		return buf;
	}
}
