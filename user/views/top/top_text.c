// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* Batch frames of `tally top` (top_text.h). Every string in a frame was
 * sanitized by top_rows.c: nothing here can reach a terminal as a control. */
#include <errno.h>
#include <string.h>

#include "top_sites.h"
#include "top_text.h"
#include "internal.h"

/* names are never cut: a script reads all of it (a sanitized one is 124 bytes at most) */
#define NAME_MIN 8

/* The root's peak of live (a row's PEAK is at its own process's peak), a
 * line of its own that a script reads as "peak: live BYTES at S s". */
static void print_peak(FILE *out, const struct top_header *h)
{
	char b[64];

	top_fmt_peak(b, sizeof(b), h, true);
	if (!h->peak_known)
		fprintf(out, "peak: - (not known: only tally's allocator's records keep it)\n");
	else if (h->peak_exact)
		fprintf(out, "peak: %s\n", b);
	else
		fprintf(out,
			"peak: %s (~: not one moment: other threads moved live bytes while the "
			"batch that held it was written, so it is over or under by what they "
			"moved)\n",
			b);
}

static void print_header(FILE *out, const struct top_header *h)
{
	fprintf(out, "target: %s, pid %d, ", h->comm, (int)h->pid);
	if (h->ns_pid != h->pid)
		fprintf(out, "pid %d in its namespace, ", (int)h->ns_pid);
	if (h->container[0])
		fprintf(out, "container %s, ", h->container);
	fprintf(out, "%s, up %.1f s, ",
		h->injected ? "injected" :
		h->late	    ? "attached" :
			      "started by tally",
		h->uptime_s);
	if (!h->gone)
		fprintf(out, "running\n");
	else if (h->exit_code >= 0)
		fprintf(out, "target %s (status %d)\n",
			h->oom_kill ? "killed by the OOM killer" : "exited", h->exit_code);
	else
		fprintf(out, "target exited\n");
	if (h->events_s >= 0)
		fprintf(out, "events: %.1f/s, ", h->events_s);
	else
		fprintf(out, "events: -/s, ");
	fprintf(out, "%llu received, %llu lost (%llu record words), figures %s",
		(unsigned long long)h->received, (unsigned long long)h->lost_msgs,
		(unsigned long long)h->lost_words, h->exact ? "exact" : "NOT exact");
	/* which process, and why (its first reason in words) */
	if (!h->exact && h->why_code) {
		fprintf(out, ": pid %d (%s): %s [%s]", (int)h->why_pid, h->why_comm, h->why_text,
			h->why_code);
		if (h->why_more)
			fprintf(out, " +%u more reason%s", h->why_more, h->why_more > 1 ? "s" : "");
		if (h->why_procs)
			fprintf(out, "; %u more process%s not exact", h->why_procs,
				h->why_procs > 1 ? "es" : "");
	}
	fputc('\n', out);
	fprintf(out, "processes: %u listed, %u running\n", h->procs, h->running);
	print_peak(out, h);
}

static void print_identity(FILE *out, const struct top_identity *id, enum figures_allocator a,
			   const char *foreign)
{
	unsigned cells[TOP_TERMS], total = 0;

	if (a == FIGURES_ALLOC_NONE && foreign) {
		fprintf(out, "allocator: %s (not traced: tally traces its own and glibc's)\n",
			foreign);
		fprintf(out, "identity: - (its heap is not traced)\n");
		return;
	}
	fprintf(out, "allocator: %s\n", figures_allocator_name(a));
	if (a == FIGURES_ALLOC_NONE) {
		fprintf(out, "identity: - (no allocator figures yet)\n");
		return;
	}
	fprintf(out, "identity: mapped ");
	if (id->mapped_known)
		fprintf(out, "%lld =", (long long)id->mapped);
	else
		fprintf(out, "- =");
	for (unsigned i = 0; i < TOP_TERMS; i++) {
		fprintf(out, "%s %s ", i ? " +" : "", top_term_names[i]);
		if (id->known[i])
			fprintf(out, "%lld", (long long)id->term[i]);
		else
			fputc('-', out);
	}
	if (!id->mapped_known)
		fprintf(out, " (glibc: mapped and the terms shown - are unknown)\n");
	else
		fprintf(out, " (%s)\n", id->balanced ? "balanced" : "NOT balanced");
	if (!id->mapped_known)
		return;
	top_bar_cells(id, TOP_TEXT_BAR, cells);
	for (unsigned i = 0; i < TOP_TERMS; i++)
		total += cells[i];
	if (!total) {
		fprintf(out, "bar: - (nothing mapped)\n");
		return;
	}
	fprintf(out, "bar: [");
	for (unsigned i = 0; i < TOP_TERMS; i++)
		for (unsigned c = 0; c < cells[i]; c++)
			fputc(top_term_letters[i], out);
	fprintf(out, "]");
	for (unsigned i = 0; i < TOP_TERMS; i++)
		fprintf(out, "%s %c %s", i ? "," : "", top_term_letters[i], top_term_names[i]);
	fputc('\n', out);
}

static void cell_rate(char *buf, size_t size, bool known, double v)
{
	if (known)
		snprintf(buf, size, "%.1f", v);
	else
		snprintf(buf, size, "-");
}

static void cell_i64(char *buf, size_t size, bool known, int64_t v)
{
	if (known)
		snprintf(buf, size, "%lld", (long long)v);
	else
		snprintf(buf, size, "-");
}

/* widths: from CPU% to YIELDS */
static const int col_w[TOP_NCOLS] = { 0, 7, 12, 12, 11, 11, 9, 12, 12, 9, 9 };

static int id_w(const struct top_frame *f)
{
	return f->mode == TOP_MODE_PROCS ? 7 : 4;
}

static void print_titles(FILE *out, const struct top_frame *f, int nw)
{
	fprintf(out, "%*s ", id_w(f), top_id_title(f->mode));
	fprintf(out, "%-*s", nw, top_col_titles[TOP_COL_NAME]);
	for (unsigned c = TOP_COL_CPU; c < TOP_NCOLS; c++)
		fprintf(out, " %*s", col_w[c], top_col_titles[c]);
	fputc('\n', out);
}

/* The process x group view: each process under a line of its own, its rows
 * (in the frame's order) named by their group alone. */
static void print_proc_line(FILE *out, const struct top_proc *p)
{
	fprintf(out, "process %d %s: ", (int)p->pid, p->comm);
	if (!p->gone)
		fprintf(out, "running");
	else if (p->exit_code >= 0)
		fprintf(out, "%s (status %d)", p->oom_kill ? "killed by the OOM killer" : "exited",
			p->exit_code);
	else
		fprintf(out, "exited");
	/* last, as it may hold anything printable: ", cmd: postgres: bench ... idle" */
	if (p->cmdline[0])
		fprintf(out, ", cmd: %s", p->cmdline);
	fputc('\n', out);
}

static void print_row(FILE *out, const struct top_frame *f, const struct top_row *r, int nw)
{
	const int *w = col_w;
	char v[TOP_NCOLS][32];

	cell_rate(v[TOP_COL_CPU], sizeof(v[0]), r->rates_known, r->cpu_pct);
	cell_i64(v[TOP_COL_LIVE], sizeof(v[0]), true, r->live);
	cell_i64(v[TOP_COL_PEAK], sizeof(v[0]), r->peak_known, r->peak);
	cell_rate(v[TOP_COL_ALLOCS], sizeof(v[0]), r->rates_known, r->allocs_s);
	cell_rate(v[TOP_COL_FREES], sizeof(v[0]), r->rates_known, r->frees_s);
	cell_i64(v[TOP_COL_KERNELS], sizeof(v[0]), r->gpu_known, (int64_t)r->kernels);
	cell_i64(v[TOP_COL_DEVICE], sizeof(v[0]), r->gpu_known, r->device);
	cell_i64(v[TOP_COL_PINNED], sizeof(v[0]), r->gpu_known, r->pinned);
	cell_i64(v[TOP_COL_REJECTS], sizeof(v[0]), true, (int64_t)r->rejects);
	cell_i64(v[TOP_COL_YIELDS], sizeof(v[0]), true, (int64_t)r->yields);
	fprintf(out, "%*u ", id_w(f), r->id);
	fprintf(out, "%-*s", nw, r->name + r->group_at);
	for (unsigned c = TOP_COL_CPU; c < TOP_NCOLS; c++)
		fprintf(out, " %*s", w[c], v[c]);
	fputc('\n', out);
}

static void print_rows(FILE *out, const struct top_frame *f)
{
	int nw = NAME_MIN;

	for (unsigned i = 0; i < f->nrows; i++) {
		int len = (int)strlen(f->rows[i].name + f->rows[i].group_at);
		if (len > nw)
			nw = len;
	}
	print_titles(out, f, nw);
	if (f->mode != TOP_MODE_PROC_GROUPS) {
		for (unsigned i = 0; i < f->nrows; i++)
			print_row(out, f, &f->rows[i], nw);
		return;
	}
	for (unsigned k = 0; k < f->nprocs; k++) {
		print_proc_line(out, &f->procs[k]);
		for (unsigned i = 0; i < f->nrows; i++)
			if (f->rows[i].pid == f->procs[k].pid)
				print_row(out, f, &f->rows[i], nw);
	}
}

/* The sites view: a line that counts them, and a row per site, its stack
 * last and whole (but for TOP_STACK_MAX) so that a script reads all of it. */
static void print_sites(FILE *out, const struct top_frame *f)
{
	const char *empty;
	char line[128];
	int gw = NAME_MIN;

	empty = top_sites_empty(f, line, sizeof(line));
	if (empty) {
		fprintf(out, "%s\n", empty);
		return;
	}
	fprintf(out, "sites: %u of %zu, most bytes in use %sfirst", f->nsites, f->sites_total,
		f->sites_by_peak ? "at the peak " : "");
	if (f->sites_period)
		fprintf(out, " (estimates: a sample every %llu bytes on average)",
			(unsigned long long)f->sites_period);
	fputc('\n', out);
	for (unsigned i = 0; i < f->nsites; i++) {
		int len = (int)strlen(f->sites[i].group);
		if (len > gw)
			gw = len;
	}
	fprintf(out, "%12s %12s %10s %12s %-*s %7s %s\n", "IN USE", "PEAK", "OBJECTS", "ALLOCATED",
		gw, "GROUP", "PID", "STACK");
	for (unsigned i = 0; i < f->nsites; i++) {
		const struct top_site_row *r = &f->sites[i];
		char pid[16], peak[24];

		cell_i64(pid, sizeof(pid), r->pid > 0, r->pid);
		cell_i64(peak, sizeof(peak), r->peak_known, r->peak);
		fprintf(out, "%12lld %12s %10lld %12lld %-*s %7s %s\n", (long long)r->inuse, peak,
			(long long)r->objects, (long long)r->allocated, gw, r->group, pid,
			r->stack);
	}
}

static void print_threads(FILE *out, const struct top_frame *f)
{
	int nw = 16;

	for (size_t i = 0; i < f->nthreads; i++) {
		int len = (int)strlen(f->threads[i].name);
		if (len > nw)
			nw = len;
	}
	fprintf(out, "threads: %zu\n", f->nthreads);
	fprintf(out, "%8s %-*s %s\n", "TID", nw, "NAME", "GROUP");
	for (size_t i = 0; i < f->nthreads; i++) {
		const struct top_thread *t = &f->threads[i];

		fprintf(out, "%8u %-*s %u %s\n", t->tid, nw, t->name, t->group, t->group_name);
	}
}

int top_text_frame(FILE *out, const struct top_frame *f, unsigned long k, bool threads)
{
	errno = 0; /* what a failed write leaves is then this frame's */
	fprintf(out, "--- frame %lu ---\n", k);
	print_header(out, &f->hdr);
	print_identity(out, &f->id, f->hdr.alloc, f->hdr.foreign_alloc);
	if (f->mode == TOP_MODE_SITES)
		print_sites(out, f);
	else
		print_rows(out, f);
	if (threads)
		print_threads(out, f);
	fputc('\n', out);
	if (fflush(out) || ferror(out))
		return errno ? -errno : -EIO;
	return 0;
}
