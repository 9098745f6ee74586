// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The figures of `tally top` (top_frame.h): pure code, no I/O. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "top_frame.h"
#include "internal.h"
#include "../../util/text.h"

/* the identity's eight terms follow mapped in the Stats' order */
const char *const *const top_term_names = &figures_stat_names[TALLY_STAT_live];
_Static_assert(TALLY_STAT_segment_overhead - TALLY_STAT_live + 1 == TOP_TERMS, "eight terms");
/* one letter per term, for the bar where there is no color */
const char top_term_letters[TOP_TERMS] = { 'L', 'r', 'c', 'f', 'R', 'v', 'h', 'o' };

const char *const top_col_names[TOP_NCOLS] = {
	"name",	   "cpu",    "live",   "peak",	  "allocs", "frees",
	"kernels", "device", "pinned", "rejects", "yields",
};
const char *const top_col_titles[TOP_NCOLS] = {
	"NAME",	   "CPU%",   "LIVE",   "PEAK",	  "ALLOC/s", "FREE/s",
	"KERNELS", "DEVICE", "PINNED", "REJECTS", "YIELDS",
};
/* not 'p' (pause), 'q', 's', 'r', 't', 'v' or 'h', which the live view
 * keeps: the peak is 'm', the maximum */
const char top_col_keys[TOP_NCOLS] = { 'n', 'c', 'l', 'm', 'a', 'f', 'k', 'd', 'i', 'e', 'y' };

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

void top_fmt_peak(char *buf, size_t size, const struct top_header *h, bool whole)
{
	char b[24]; /* an int64_t in digits */

	if (!h->peak_known) {
		snprintf(buf, size, "-");
		return;
	}
	if (whole)
		snprintf(b, sizeof(b), "%lld", (long long)h->peak_live);
	else
		top_fmt_bytes(b, sizeof(b), h->peak_live);
	snprintf(buf, size, whole ? "live %s%s at %.1f s%s" : "%s%s at %.1fs%s",
		 h->peak_exact ? "" : "~", b, h->peak_at_s,
		 h->peak_since_attach ? " since attach" : "");
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

/* The identity's eight terms follow mapped in the Stats' order; a term the
 * figures do not know (glibc mode knows live and rounding) is shown as "-". */
static void identity_of(struct top_identity *id, const struct figures_stats *fs)
{
	memset(id, 0, sizeof(*id));
	for (unsigned i = 0; i < TOP_TERMS; i++) {
		id->known[i] = fs->known & (1u << (TALLY_STAT_live + i));
		id->term[i] = id->known[i] ? fs->v[TALLY_STAT_live + i] : 0;
	}
	id->mapped_known = fs->known & (1u << TALLY_STAT_mapped);
	id->mapped = id->mapped_known ? fs->v[TALLY_STAT_mapped] : 0;
	id->balanced = fs->balanced;
}

/* The identity of the processes the frame sums: the root's alone, or the sum
 * over those whose allocator is tally's (a sum of balanced figures is
 * balanced, docs/DESIGN.md §2). */
static void build_identity(struct top_identity *id, const struct figures *fig)
{
	struct figures_stats sum = fig->procs[0].stats;
	unsigned n = sum.identity;

	for (unsigned i = 1; i < fig->nprocs; i++) {
		const struct figures_stats *fs = &fig->procs[i].stats;
		if (fig->procs[i].target.gone || !fs->identity)
			continue;
		if (!n++) {
			sum = *fs;
			continue;
		}
		for (unsigned k = 0; k < TALLY_STATS_COUNT; k++)
			sum.v[k] += fs->v[k];
		sum.accounted += fs->accounted;
	}
	if (n > 1)
		sum.balanced = sum.accounted == sum.v[TALLY_STAT_mapped];
	identity_of(id, &sum);
}

/* The root's peak of live, and when, as uptime_s counts. */
static void header_peak(struct top_header *h, const struct figures_process *p)
{
	const struct figures_peak *pk = &p->peak;

	h->peak_known = pk->known;
	if (!pk->known)
		return;
	h->peak_exact = pk->exact;
	h->peak_since_attach = pk->since_attach;
	h->peak_live = pk->v[TALLY_STAT_live];
	h->peak_at_s = pk->at_ns > p->start_ns ? (double)(pk->at_ns - p->start_ns) / 1e9 : 0;
}

/* The header's reason: the first process not exact says its first one. */
static void header_why(struct top_header *h, const struct figures_process *q)
{
	if (q->exact || !q->nwhy)
		return;
	if (h->why_code) {
		h->why_procs++;
		return;
	}
	h->why_pid = q->target.pid;
	text_sanitize_terminal(h->why_comm, sizeof(h->why_comm),
			       q->target.comm ? q->target.comm : "", TALLY_COMM_LEN);
	h->why_code = figures_why_codes[q->why_code[0]];
	h->why_text = q->why[0];
	h->why_more = q->nwhy - 1;
}

static void build_header(struct top_header *h, const struct figures *fig,
			 const struct top_prev *prev)
{
	const struct figures_process *p = &fig->procs[0];
	const struct figures_target *t = &p->target;
	double dt_s = prev->valid ? (double)(p->now_ns - prev->t_ns) / 1e9 : 0;

	memset(h, 0, sizeof(*h));
	text_sanitize_terminal(h->comm, sizeof(h->comm), t->comm ? t->comm : "", TALLY_COMM_LEN);
	h->pid = t->pid;
	h->ns_pid = t->ns_pid;
	if (t->container)
		snprintf(h->container, sizeof(h->container), "%s", t->container);
	h->late = t->late;
	h->injected = t->injected;
	h->alloc = t->allocator;
	h->foreign_alloc = t->foreign_alloc;
	h->uptime_s = p->now_ns > p->start_ns ? (double)(p->now_ns - p->start_ns) / 1e9 : 0;
	h->events_s = -1;
	/* the tree's: a master that only waits receives nothing while its
	 * workers' batches come by the thousand */
	if (prev->valid)
		rate(fig->tree.life.received, prev->received, dt_s, &h->events_s);
	h->received = fig->tree.life.received;
	h->lost_msgs = p->events.lost;
	h->lost_words = p->events.lost_record_words;
	h->exact = p->exact;
	h->gone = t->gone;
	h->exit_code = t->signal ? 128 + t->signal : t->exit_code;
	h->oom_kill = p->oom.killed;
	header_peak(h, p);
	for (unsigned i = 0; i < fig->nprocs; i++) {
		const struct figures_process *q = &fig->procs[i];
		if (!top_proc_listed(fig, i, prev))
			continue;
		h->procs++;
		h->running += !q->target.gone;
		h->exact &= q->exact;
		header_why(h, q);
		if (q->stats.identity)
			h->alloc = FIGURES_ALLOC_TALLY;
	}
}

static int cmp_prev(const void *a, const void *b)
{
	const struct top_prev_row *x = a, *y = b;

	return x->key < y->key ? -1 : x->key > y->key;
}

/* The frame's counters as the base of the next frame's rates. */
static void prev_from_pairs(struct top_prev *prev, const struct figures *fig,
			    const struct top_frame *f)
{
	prev->valid = true;
	prev->t_ns = fig->procs[0].now_ns;
	prev->received = fig->tree.life.received;
	prev->full = f->npairs > TOP_PREV_MAX;
	prev->n = f->npairs < TOP_PREV_MAX ? f->npairs : TOP_PREV_MAX;
	memcpy(prev->rows, f->pairs, prev->n * sizeof(prev->rows[0]));
	qsort(prev->rows, prev->n, sizeof(prev->rows[0]), cmp_prev);
}

void top_prev_take(struct top_prev *prev, const struct figures *fig, enum top_mode mode)
{
	struct top_frame f = { 0 };

	if (!top_rows_collect(&f, fig, prev, 0, mode))
		prev_from_pairs(prev, fig, &f);
	top_frame_free(&f);
}

static int build_threads(struct top_frame *f, const struct figures_process *p)
{
	free(f->threads);
	f->threads = NULL;
	f->nthreads = 0;
	if (!p->nthreads)
		return 0;
	f->threads = calloc(p->nthreads, sizeof(*f->threads));
	if (!f->threads)
		return -ENOMEM;
	for (size_t i = 0; i < p->nthreads; i++) {
		const struct figures_thread *t = &p->threads[i];
		const struct figures_group *fg = figures_group_of(p, t->group);
		struct top_thread *o = &f->threads[i];

		o->tid = t->tid;
		o->group = t->group;
		text_sanitize_terminal(o->name, sizeof(o->name), t->comm, TALLY_COMM_LEN);
		if (fg && fg->name)
			text_sanitize_terminal(o->group_name, sizeof(o->group_name), fg->name,
					       TALLY_GROUP_NAME_MAX);
		else
			snprintf(o->group_name, sizeof(o->group_name), "#%u", t->group);
	}
	f->nthreads = p->nthreads;
	return 0;
}

int top_frame_build(struct top_frame *f, const struct figures *fig, struct top_prev *prev,
		    enum top_mode mode)
{
	const struct figures_process *p = &fig->procs[0];
	double dt_s = prev->valid ? (double)(p->now_ns - prev->t_ns) / 1e9 : 0;
	int err;

	build_header(&f->hdr, fig, prev);
	build_identity(&f->id, fig);
	err = top_rows_collect(f, fig, prev, dt_s, mode);
	prev_from_pairs(prev, fig, f);
	return build_threads(f, p) ? -ENOMEM : err;
}

void top_frame_free(struct top_frame *f)
{
	if (!f)
		return;
	free(f->threads);
	free(f->rows);
	free(f->procs);
	free(f->pairs);
	free(f->sites);
	f->sites = NULL;
	f->nsites = f->capsites = 0;
	f->threads = NULL;
	f->rows = NULL;
	f->procs = NULL;
	f->pairs = NULL;
	f->nthreads = 0;
	f->nrows = f->caprows = f->nprocs = f->capprocs = f->npairs = f->cappairs = 0;
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
	case TOP_COL_PEAK:
		return r->peak_known;
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
	case TOP_COL_PEAK:
		return cmp_i64(a->peak, b->peak);
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
