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

static int site_row(struct top_site_row *r, const struct prof *p, const struct prof_sample *s)
{
	struct stack_text t = { r->stack, sizeof(r->stack), 0, false };
	int err = 0;

	r->stack[0] = 0;
	r->inuse = s->inuse_space;
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

/* Most bytes in use first, then most allocated, then the profile's order
 * (the samples of one array: their addresses are that order). */
static int by_inuse(const void *a, const void *b)
{
	const struct prof_sample *x = *(const struct prof_sample *const *)a;
	const struct prof_sample *y = *(const struct prof_sample *const *)b;

	if (x->inuse_space != y->inuse_space)
		return x->inuse_space > y->inuse_space ? -1 : 1;
	if (x->alloc_space != y->alloc_space)
		return x->alloc_space > y->alloc_space ? -1 : 1;
	return (x > y) - (x < y);
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

int top_sites_build(struct top_frame *f, const struct prof *p)
{
	const struct prof_sample **order = NULL;
	unsigned n;
	int err = 0;

	f->nsites = 0;
	f->sites_total = 0;
	f->sites_period = 0;
	f->sites_err = 0;
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
		order[i] = &p->samples[i];
	qsort(order, p->nsamples, sizeof(*order), by_inuse);
	for (unsigned i = 0; i < n && !err; i++)
		err = site_row(&f->sites[i], p, order[i]);
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
