// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The figures of `tally top` (top_rows.h): pure code, no I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_rows.h"

const char *const top_term_names[TOP_TERMS] = {
	"live",	    "rounding", "cache",      "span_free",
	"returned", "virgin",	"hysteresis", "segment_overhead",
};
/* one letter per term, for the bar where there is no color */
const char top_term_letters[TOP_TERMS] = { 'L', 'r', 'c', 'f', 'R', 'v', 'h', 'o' };

const char *const top_col_names[TOP_NCOLS] = {
	"name",	   "cpu",    "live",   "allocs",  "frees",
	"kernels", "device", "pinned", "rejects", "yields",
};
const char *const top_col_titles[TOP_NCOLS] = {
	"NAME",	   "CPU%",   "LIVE",   "ALLOC/s", "FREE/s",
	"KERNELS", "DEVICE", "PINNED", "REJECTS", "YIELDS",
};
/* not 'p' (pause), 'q', 's', 'r' or 't', which the live view keeps */
const char top_col_keys[TOP_NCOLS] = { 'n', 'c', 'l', 'a', 'f', 'k', 'd', 'i', 'e', 'y' };

size_t top_sanitize(char *out, size_t size, const char *in, size_t inlen)
{
	static const char hex[] = "0123456789abcdef";
	size_t o = 0;

	if (!size)
		return 0;
	for (size_t i = 0; i < inlen && in[i]; i++) {
		unsigned char c = (unsigned char)in[i];
		char e[4];
		size_t n;

		if (c == '\\') {
			/* so that "\x1b" in the output always means an escaped byte */
			e[0] = e[1] = '\\';
			n = 2;
		} else if (c >= 0x20 && c < 0x7f) {
			e[0] = (char)c;
			n = 1;
		} else {
			e[0] = '\\';
			e[1] = 'x';
			e[2] = hex[c >> 4];
			e[3] = hex[c & 15];
			n = 4;
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

void top_fmt_bytes(char *buf, size_t size, int64_t v)
{
	static const char units[] = "BKMGTPE";
	uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
	const char *sign = v < 0 ? "-" : "";
	unsigned u = 0;
	double d = (double)a;

	if (a < 1000) {
		snprintf(buf, size, "%s%lluB", sign, (unsigned long long)a);
		return;
	}
	while (d >= 999.95 && u < sizeof(units) - 2) {
		d /= 1024;
		u++;
	}
	snprintf(buf, size,
		 d < 9.995 ? "%s%.2f%c" :
		 d < 99.95 ? "%s%.1f%c" :
			     "%s%.0f%c",
		 sign, d, units[u]);
}

/* A group's lifetime counters from whichever source fed the figures: the
 * allocator's records, or glibc mode's probes (snapshot.c does the same). */
static void group_counts(const struct top_input *in, uint32_t g, uint64_t *allocs, uint64_t *frees,
			 int64_t *live)
{
	const struct tally_replay *rp = &in->m->rp;

	if (in->alloc == TOP_ALLOC_GLIBC && in->glibc) {
		*allocs = in->glibc->alloc_objs[g];
		*frees = in->glibc->dealloc_objs[g];
		*live = (int64_t)(in->glibc->alloc_bytes[g] - in->glibc->dealloc_bytes[g]);
		return;
	}
	*allocs = (uint64_t)rp->groups[g].alloc_objs;
	*frees = (uint64_t)rp->groups[g].dealloc_objs;
	*live = model_group_live(in->m, g);
}

void top_prev_take(struct top_prev *prev, const struct top_input *in)
{
	int64_t live;

	prev->valid = true;
	prev->t_ns = in->now_ns;
	prev->received = in->m->received;
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		prev->cpu_ns[g] = in->m->groups[g].cpu_ns;
		group_counts(in, g, &prev->allocs[g], &prev->frees[g], &live);
	}
}

/* Per second over dt_s; false when a counter went back (a change of source)
 * or no time passed. */
static bool rate(uint64_t now, uint64_t before, double dt_s, double *out)
{
	if (now < before || dt_s <= 0)
		return false;
	*out = (double)(now - before) / dt_s;
	return true;
}

static void build_identity(struct top_identity *id, const struct top_input *in)
{
	struct tally_stats st;

	memset(id, 0, sizeof(*id));
	if (in->alloc == TOP_ALLOC_TALLY) {
		model_stats(in->m, &st);
		uint64_t v[TALLY_STATS_COUNT];
		tally_stats_to_array(&st, v);
		/* the identity's eight terms follow mapped in the Stats' order */
		for (unsigned i = 0; i < TOP_TERMS; i++)
			id->term[i] = (int64_t)v[TALLY_STAT_live + i];
		for (unsigned i = 0; i < TOP_TERMS; i++)
			id->known[i] = true;
		id->mapped = (int64_t)st.mapped;
		id->mapped_known = true;
		id->balanced = tally_stats_balanced(&st);
	} else if (in->alloc == TOP_ALLOC_GLIBC && in->glibc) {
		/* glibc knows what its callers hold and its rounding; its arenas'
		 * other bytes have no name in the identity */
		id->term[0] = (int64_t)in->glibc->live;
		id->term[1] = (int64_t)in->glibc->rounding;
		id->known[0] = id->known[1] = true;
	}
}

static void build_header(struct top_header *h, const struct top_input *in,
			 const struct top_prev *prev)
{
	const struct model *m = in->m;
	double dt_s = prev->valid ? (double)(in->now_ns - prev->t_ns) / 1e9 : 0;

	memset(h, 0, sizeof(*h));
	top_sanitize(h->comm, sizeof(h->comm), in->comm ? in->comm : "", TALLY_COMM_LEN);
	h->pid = in->pid;
	h->late = in->late;
	h->alloc = in->alloc;
	h->uptime_s = in->now_ns > in->start_ns ? (double)(in->now_ns - in->start_ns) / 1e9 : 0;
	h->events_s = -1;
	if (prev->valid)
		rate(m->received, prev->received, dt_s, &h->events_s);
	h->received = m->received;
	h->lost_msgs = m->lost_msgs;
	h->lost_words = m->lost_words;
	h->exact = in->exact;
	h->gone = in->gone;
	h->exit_code = in->exit_code;
}

static void build_row(struct top_row *r, uint32_t g, const struct top_input *in,
		      const struct top_prev *prev, double dt_s, uint64_t allocs, uint64_t frees)
{
	const struct model_group *mg = &in->m->groups[g];
	struct model_instance mi;

	memset(r, 0, sizeof(*r));
	r->id = g;
	if (mg->name[0])
		top_sanitize(r->name, sizeof(r->name), mg->name, sizeof(mg->name));
	else
		snprintf(r->name, sizeof(r->name), "#%u", g);
	if (prev->valid) {
		double cpu_s = 0;
		r->rates_known = rate(mg->cpu_ns, prev->cpu_ns[g], dt_s, &cpu_s) &&
				 rate(allocs, prev->allocs[g], dt_s, &r->allocs_s) &&
				 rate(frees, prev->frees[g], dt_s, &r->frees_s);
		/* CPU ns per wall ns: cpu_s is ns of CPU a second */
		r->cpu_pct = cpu_s / 1e9 * 100;
	}
	model_instance(in->m, g, &mi);
	r->gpu_known =
		in->gpu_known || in->m->gpu.seen[GPU_SRC_CUPTI] || in->m->gpu.seen[GPU_SRC_DRIVER];
	r->kernels = mi.kernels_launched;
	r->device = mi.device_bytes_allocated;
	r->pinned = mi.host_pinned_bytes;
	r->rejects = mi.back_pressure_rejections;
	r->yields = mi.yield_count;
}

static int cmp_tid(const void *a, const void *b)
{
	const struct top_thread *x = a, *y = b;

	return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int build_threads(struct top_frame *f, const struct model *m)
{
	size_t n = 0;

	for (size_t i = 0; i < m->nthreads; i++)
		n += m->threads[i].alive;
	free(f->threads);
	f->threads = NULL;
	f->nthreads = 0;
	if (!n)
		return 0;
	f->threads = calloc(n, sizeof(*f->threads));
	if (!f->threads)
		return -ENOMEM;
	for (size_t i = 0; i < m->nthreads; i++) {
		const struct model_thread *t = &m->threads[i];
		struct top_thread *o = &f->threads[f->nthreads];
		uint32_t g;

		if (!t->alive)
			continue;
		g = model_thread_group(t);
		if (g >= TALLY_MAX_GROUPS)
			g = 0;
		o->tid = t->tid;
		o->group = g;
		top_sanitize(o->name, sizeof(o->name), t->comm, sizeof(t->comm));
		if (m->groups[g].name[0])
			top_sanitize(o->group_name, sizeof(o->group_name), m->groups[g].name,
				     sizeof(m->groups[g].name));
		else
			snprintf(o->group_name, sizeof(o->group_name), "#%u", g);
		f->nthreads++;
	}
	qsort(f->threads, f->nthreads, sizeof(*f->threads), cmp_tid);
	return 0;
}

int top_frame_build(struct top_frame *f, const struct top_input *in, struct top_prev *prev)
{
	double dt_s = prev->valid ? (double)(in->now_ns - prev->t_ns) / 1e9 : 0;

	build_header(&f->hdr, in, prev);
	build_identity(&f->id, in);
	f->nrows = 0;
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		const struct model_group *mg = &in->m->groups[g];
		uint64_t allocs, frees;
		int64_t live;

		group_counts(in, g, &allocs, &frees, &live);
		/* the snapshot's rule: once it has a name or was charged something */
		if (!mg->known && !allocs && !frees && !mg->os_yields)
			continue;
		build_row(&f->rows[f->nrows], g, in, prev, dt_s, allocs, frees);
		f->rows[f->nrows].live = live;
		f->nrows++;
	}
	top_prev_take(prev, in);
	return build_threads(f, in->m);
}

void top_frame_free(struct top_frame *f)
{
	if (!f)
		return;
	free(f->threads);
	f->threads = NULL;
	f->nthreads = 0;
}

static int cmp_u64(uint64_t a, uint64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_i64(int64_t a, int64_t b)
{
	return a < b ? -1 : a > b;
}

static int cmp_dbl(double a, double b)
{
	return a < b ? -1 : a > b;
}

/* Whether a row's figure in col is known: unknown ones sort last. */
static bool col_known(const struct top_row *r, enum top_col col)
{
	switch (col) {
	case TOP_COL_CPU:
	case TOP_COL_ALLOCS:
	case TOP_COL_FREES:
		return r->rates_known;
	case TOP_COL_KERNELS:
	case TOP_COL_DEVICE:
	case TOP_COL_PINNED:
		return r->gpu_known;
	default:
		return true;
	}
}

/* a before b: < 0; ascending order of the known figures */
static int cmp_col(const struct top_row *a, const struct top_row *b, enum top_col col)
{
	switch (col) {
	case TOP_COL_NAME:
		return strcmp(a->name, b->name);
	case TOP_COL_CPU:
		return cmp_dbl(a->cpu_pct, b->cpu_pct);
	case TOP_COL_LIVE:
		return cmp_i64(a->live, b->live);
	case TOP_COL_ALLOCS:
		return cmp_dbl(a->allocs_s, b->allocs_s);
	case TOP_COL_FREES:
		return cmp_dbl(a->frees_s, b->frees_s);
	case TOP_COL_KERNELS:
		return cmp_u64(a->kernels, b->kernels);
	case TOP_COL_DEVICE:
		return cmp_i64(a->device, b->device);
	case TOP_COL_PINNED:
		return cmp_i64(a->pinned, b->pinned);
	case TOP_COL_REJECTS:
		return cmp_u64(a->rejects, b->rejects);
	case TOP_COL_YIELDS:
		return cmp_u64(a->yields, b->yields);
	default:
		return 0;
	}
}

static bool goes_before(const struct top_row *a, const struct top_row *b, enum top_col col,
			bool desc)
{
	bool ka = col_known(a, col), kb = col_known(b, col);

	if (ka != kb)
		return ka;
	if (!ka)
		return false;
	int c = cmp_col(a, b, col);
	return desc ? c > 0 : c < 0;
}

void top_sort(struct top_row *rows, unsigned n, enum top_col col, bool desc)
{
	/* insertion sort: stable, and n is at most 256 */
	for (unsigned i = 1; i < n; i++) {
		struct top_row r = rows[i];
		unsigned j = i;

		while (j > 0 && goes_before(&r, &rows[j - 1], col, desc)) {
			rows[j] = rows[j - 1];
			j--;
		}
		rows[j] = r;
	}
}

bool top_col_default_desc(enum top_col col)
{
	return col != TOP_COL_NAME;
}

int top_col_parse(const char *name, enum top_col *out)
{
	for (unsigned c = 0; c < TOP_NCOLS; c++) {
		if (!strcmp(name, top_col_names[c])) {
			*out = (enum top_col)c;
			return 0;
		}
	}
	return -EINVAL;
}

int top_col_of_key(int ch)
{
	for (unsigned c = 0; c < TOP_NCOLS; c++)
		if (ch == top_col_keys[c])
			return (int)c;
	return -1;
}

void top_bar_cells(const struct top_identity *id, unsigned width, unsigned cells[TOP_TERMS])
{
	unsigned __int128 sum = 0, rem[TOP_TERMS];
	unsigned given = 0;

	memset(cells, 0, TOP_TERMS * sizeof(cells[0]));
	if (!id->mapped_known || !width)
		return;
	/* over the sum of the terms, not mapped: the bar stays whole while a
	 * batch in flight leaves the identity briefly unbalanced */
	for (unsigned i = 0; i < TOP_TERMS; i++)
		if (id->known[i] && id->term[i] > 0)
			sum += (uint64_t)id->term[i];
	if (!sum)
		return;
	for (unsigned i = 0; i < TOP_TERMS; i++) {
		unsigned __int128 t = id->known[i] && id->term[i] > 0 ? (uint64_t)id->term[i] : 0;
		unsigned __int128 x = t * width;

		cells[i] = (unsigned)(x / sum);
		rem[i] = x % sum;
		given += cells[i];
	}
	/* the cells left go to the largest remainders, lowest term first on a tie */
	while (given < width) {
		unsigned best = 0;
		for (unsigned i = 1; i < TOP_TERMS; i++)
			if (rem[i] > rem[best])
				best = i;
		cells[best]++;
		rem[best] = 0;
		given++;
	}
}

void top_order_pick(struct top_order *o, enum top_col col)
{
	if (o->col == col) {
		o->desc = !o->desc;
		return;
	}
	o->col = col;
	o->desc = top_col_default_desc(col);
}

void top_order_step(struct top_order *o, int step)
{
	int c = ((int)o->col + step % TOP_NCOLS + TOP_NCOLS) % TOP_NCOLS;

	o->col = (enum top_col)c;
	o->desc = top_col_default_desc(o->col);
}
