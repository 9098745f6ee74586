// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * `tally diff`'s renderings (diff.h): a text table for people, JSON for
 * scripts. Every name came from a document anyone may have written: on a
 * terminal it goes through text_sanitize_terminal, in JSON through the
 * writer's escapes (docs/STYLE.md rule 10). A figure a side lacks is "-"
 * in text and null in JSON, never 0.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "diff.h"
#include "../util/text.h"
#include "../views/json.h"

#define NAME_W 26
#define FRAMES_SHOWN 6

static const char *side_word(bool in_b, bool in_a)
{
	return in_b && in_a ? "both" : in_b ? "before" : "after";
}

/* bytes as people read them: "512 B", "1.50 MiB"; signed ("+1.00 MiB",
 * "-3 B", "0 B") for a delta */
static const char *fmt_bytes(char *buf, size_t size, int64_t v, bool sign)
{
	static const char *const units[] = { "KiB", "MiB", "GiB", "TiB", "PiB", "EiB" };
	uint64_t m = v < 0 ? -(uint64_t)v : (uint64_t)v;
	const char *sg = v < 0 ? "-" : sign && v > 0 ? "+" : "";
	double x = (double)m;
	int u = -1;

	if (m < 1024) {
		snprintf(buf, size, "%s%" PRIu64 " B", sg, m);
		return buf;
	}
	while (x >= 1024 && u < 5) {
		x /= 1024;
		u++;
	}
	snprintf(buf, size, "%s%.2f %s", sg, x, units[u]);
	return buf;
}

static const char *fmt_ns(char *buf, size_t size, int64_t v, bool sign)
{
	snprintf(buf, size, sign ? "%+.3f s" : "%.3f s", (double)v / 1e9);
	return buf;
}

static const char *fmt_count(char *buf, size_t size, int64_t v, bool sign)
{
	snprintf(buf, size, sign ? "%+" PRId64 : "%" PRId64, v);
	return buf;
}

typedef const char *(*fmt_fn)(char *buf, size_t size, int64_t v, bool sign);

/* The before, after and delta cells of f, "-" where absent. */
static void fig_cells(FILE *f, const struct diff_fig *fig, bool in_b, bool in_a, fmt_fn fmt,
		      bool with_delta)
{
	char buf[48];
	int64_t d;

	fprintf(f, " %12s", in_b && fig->has_b ? fmt(buf, sizeof(buf), fig->b, false) : "-");
	fprintf(f, " %12s", in_a && fig->has_a ? fmt(buf, sizeof(buf), fig->a, false) : "-");
	if (with_delta)
		fprintf(f, " %12s",
			diff_delta(fig, in_b, in_a, &d) ? fmt(buf, sizeof(buf), d, true) : "-");
}

static void row_name(FILE *f, const char *name, unsigned rank)
{
	char clean[NAME_W * 4 + 8], full[NAME_W * 4 + 32];

	text_sanitize_terminal(clean, NAME_W + 1, name, strlen(name));
	if (rank)
		snprintf(full, sizeof(full), "%s #%u", clean, rank + 1);
	else
		snprintf(full, sizeof(full), "%s", clean);
	fprintf(f, "  %-*s", NAME_W, full);
}

static void table_head(FILE *f, const char *title)
{
	fprintf(f, "\n%-*s %12s %12s %12s %12s %12s %12s %12s %12s\n", NAME_W + 2, title,
		"live before", "live after", "delta", "peak before", "peak after", "cpu before",
		"cpu after", "cpu delta");
}

static void table_row(FILE *f, const struct diff_row *r)
{
	row_name(f, r->name, r->rank);
	fig_cells(f, &r->figs[DIFF_LIVE], r->in_b, r->in_a, fmt_bytes, true);
	fig_cells(f, &r->figs[DIFF_PEAK], r->in_b, r->in_a, fmt_bytes, false);
	fig_cells(f, &r->figs[DIFF_CPU], r->in_b, r->in_a, fmt_ns, true);
	if (r->groups) {
		char pb[24] = "-", pa[24] = "-";
		if (r->pid_b >= 0)
			snprintf(pb, sizeof(pb), "%" PRId64, r->pid_b);
		if (r->pid_a >= 0)
			snprintf(pa, sizeof(pa), "%" PRId64, r->pid_a);
		fprintf(f, "  pid %s -> %s", pb, pa);
	}
	if (!r->in_b || !r->in_a)
		fprintf(f, "  (%s only)", side_word(r->in_b, r->in_a));
	fputc('\n', f);
}

static bool nonzero(const struct diff_fig *fig)
{
	return (fig->has_b && fig->b) || (fig->has_a && fig->a);
}

/* The instance figures (GPU, SDK, OS) of rows, those not 0 on either side:
 * a line for the row ("group train", "process worker #2"), one for each
 * figure under it. */
static void instance_rows(FILE *f, const char *what, const struct diff_rows *rows, bool *head)
{
	char clean[NAME_W * 4 + 8];

	for (size_t i = 0; i < rows->n; i++) {
		const struct diff_row *r = &rows->v[i];
		bool named = false;
		for (unsigned k = 0; k < FIGURES_INSTANCE_COUNT; k++) {
			const struct figures_instance_field *fd = &figures_instance_fields[k];
			if (!nonzero(&r->inst[k]))
				continue;
			if (!*head)
				fprintf(f, "\n%-*s %12s %12s %12s\n", NAME_W + 2,
					"GPU and SDK figures (not 0)", "before", "after", "delta");
			*head = true;
			if (!named) {
				text_sanitize_terminal(clean, sizeof(clean), r->name,
						       strlen(r->name));
				fprintf(f, "  %s %s", what, clean);
				if (r->rank)
					fprintf(f, " #%u", r->rank + 1);
				fputc('\n', f);
			}
			named = true;
			fprintf(f, "    %-*s", NAME_W - 2, fd->name);
			fig_cells(f, &r->inst[k], r->in_b, r->in_a,
				  !strcmp(fd->unit, "bytes") ? fmt_bytes : fmt_count, true);
			fputc('\n', f);
		}
	}
}

static void site_line(FILE *f, const struct diff_site *st)
{
	char label[512], clean[256], buf[48];
	const struct jread_value *fr = st->frames;
	int64_t d;

	fprintf(f, "  %12s",
		diff_delta(&st->live, st->in_b, st->in_a, &d) ?
			fmt_bytes(buf, sizeof(buf), d, true) :
			"-");
	fig_cells(f, &st->live, st->in_b, st->in_a, fmt_bytes, false);
	text_sanitize_terminal(clean, 24, st->group, strlen(st->group));
	fprintf(f, "  %-16s ", clean);
	for (size_t i = 0; i < fr->arr.n && i < FRAMES_SHOWN; i++) {
		const char *l = diff_frame_label(&fr->arr.v[i], label, sizeof(label));
		text_sanitize_terminal(clean, 64, l, strlen(l));
		fprintf(f, "%s%s", i ? " < " : "", clean);
	}
	if (fr->arr.n > FRAMES_SHOWN)
		fputs(" < ...", f);
	if (!st->in_b || !st->in_a)
		fprintf(f, "  (%s only)", side_word(st->in_b, st->in_a));
	fputc('\n', f);
}

static void sites_text(FILE *f, const struct diff *d)
{
	size_t n = d->top && d->top < d->sites.n ? d->top : d->sites.n;
	bool one_sided = false;

	fprintf(f, "\nsites by |live delta|: %zu of %zu (sampled: estimates)\n", n, d->sites.n);
	if (!n)
		return;
	fprintf(f, "  %12s %12s %12s  %-16s %s\n", "delta", "live before", "live after", "group",
		"stack, innermost first");
	for (size_t i = 0; i < n; i++) {
		site_line(f, &d->sites.v[i]);
		one_sided |= !d->sites.v[i].in_b || !d->sites.v[i].in_a;
	}
	if (one_sided)
		fputs("  (a snapshot lists only its largest sites: a site on one side only may lie "
		      "beyond the other's list)\n",
		      f);
}

static void side_text(FILE *f, const char *word, const struct diff_side *s)
{
	const struct jread_value *t = jread_get(s->root, "target");
	const char *comm = jread_str(jread_get(t, "comm"));
	const struct jread_value *why = jread_array(jread_get(s->root, "inexact_why"));
	const struct jread_value *exact = jread_get(s->root, "exact");
	char clean[512];
	int64_t pid = -1;

	jread_i64(jread_get(t, "pid"), &pid);
	text_sanitize_terminal(clean, sizeof(clean), s->path, strlen(s->path));
	fprintf(f, "%-7s%s: ", word, clean);
	if (diff_is_profile(s)) {
		fputs("a heap profile\n", f);
	} else {
		text_sanitize_terminal(clean, 64, comm ? comm : "?", strlen(comm ? comm : "?"));
		fprintf(f, "%s, pid %" PRId64 "\n", clean, pid);
	}
	if (exact && exact->type == JREAD_BOOL && !exact->b) {
		const char *w = why && why->arr.n ? jread_str(&why->arr.v[0]) : NULL;
		text_sanitize_terminal(clean, sizeof(clean), w ? w : "no reason given",
				       strlen(w ? w : "no reason given"));
		fprintf(f, "       its figures are flagged (not exact): %s\n", clean);
	}
}

int diff_print_text(FILE *f, const struct diff *d)
{
	bool head = false;

	side_text(f, "before", &d->b);
	side_text(f, "after", &d->a);
	/* a profile's groups are its samples' sums, over every process */
	table_head(f, diff_is_profile(&d->b) ? "groups (every process)" : "groups (root process)");
	for (size_t i = 0; i < d->groups.n; i++)
		table_row(f, &d->groups.v[i]);
	if (d->procs.n)
		table_head(f, "processes (comm #rank)");
	for (size_t i = 0; i < d->procs.n; i++)
		table_row(f, &d->procs.v[i]);
	if (d->tree_cpu.has_b || d->tree_cpu.has_a || d->tree_peak.has_b || d->tree_peak.has_a) {
		fprintf(f, "  %-*s", NAME_W, "(the tree, over its life)");
		fprintf(f, " %12s %12s %12s", "", "", "");
		fig_cells(f, &d->tree_peak, true, true, fmt_bytes, false);
		fig_cells(f, &d->tree_cpu, true, true, fmt_ns, true);
		fputc('\n', f);
	}
	instance_rows(f, "group", &d->groups, &head);
	instance_rows(f, "process", &d->procs, &head);
	sites_text(f, d);
	return fflush(f) || ferror(f) ? -EIO : 0;
}

/* "NAME_before", "NAME_after", "NAME_delta" (live's: "delta"; NAME "":
 * "before", "after", "delta"), null where absent */
static void fig_json(struct json_writer *w, const char *name, const struct diff_fig *fig, bool in_b,
		     bool in_a)
{
	const char *sep = *name ? "_" : "";
	char kb[64], ka[64], kd[64];
	int64_t d;

	snprintf(kb, sizeof(kb), "%s%sbefore", name, sep);
	snprintf(ka, sizeof(ka), "%s%safter", name, sep);
	snprintf(kd, sizeof(kd), "%s%sdelta", strcmp(name, "live") ? name : "",
		 strcmp(name, "live") ? sep : "");
	if (in_b && fig->has_b)
		json_kv_i64(w, kb, fig->b);
	else
		json_kv_null(w, kb);
	if (in_a && fig->has_a)
		json_kv_i64(w, ka, fig->a);
	else
		json_kv_null(w, ka);
	if (diff_delta(fig, in_b, in_a, &d))
		json_kv_i64(w, kd, d);
	else
		json_kv_null(w, kd);
}

static void rows_json(struct json_writer *w, const char *key, const struct diff_rows *rows);

static void row_json(struct json_writer *w, const struct diff_row *r)
{
	json_begin_object(w);
	json_kv_str(w, r->groups ? "comm" : "name", r->name);
	json_kv_u64(w, "rank", r->rank);
	json_kv_str(w, "in", side_word(r->in_b, r->in_a));
	if (r->groups) {
		json_kv_i64(w, "pid_before", r->pid_b);
		json_kv_i64(w, "pid_after", r->pid_a);
	}
	for (unsigned i = 0; i < DIFF_NFIGS; i++)
		if (i != DIFF_MAPPED || r->groups)
			fig_json(w, diff_fig_names[i], &r->figs[i], r->in_b, r->in_a);
	json_key(w, "instance");
	json_begin_object(w);
	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++) {
		json_key(w, figures_instance_fields[i].name);
		json_begin_object(w);
		fig_json(w, "", &r->inst[i], r->in_b, r->in_a);
		json_end_object(w);
	}
	json_end_object(w);
	if (r->groups)
		rows_json(w, "groups", r->groups);
	json_end_object(w);
}

static void rows_json(struct json_writer *w, const char *key, const struct diff_rows *rows)
{
	json_key(w, key);
	json_begin_array(w);
	for (size_t i = 0; i < rows->n; i++)
		row_json(w, &rows->v[i]);
	json_end_array(w);
}

static void site_json(struct json_writer *w, const struct diff_site *st)
{
	char label[512];

	json_begin_object(w);
	json_key(w, "frames");
	json_begin_array(w);
	for (size_t i = 0; i < st->frames->arr.n; i++)
		json_string(w, diff_frame_label(&st->frames->arr.v[i], label, sizeof(label)));
	json_end_array(w);
	json_kv_str(w, "group", st->group);
	json_kv_str(w, "in", side_word(st->in_b, st->in_a));
	fig_json(w, "live", &st->live, st->in_b, st->in_a);
	fig_json(w, "alloc", &st->alloc, st->in_b, st->in_a);
	fig_json(w, "peak", &st->peak, st->in_b, st->in_a);
	json_end_object(w);
}

static void side_json(struct json_writer *w, const char *key, const struct diff_side *s)
{
	const struct jread_value *t = jread_get(s->root, "target");
	const struct jread_value *exact = jread_get(s->root, "exact");
	int64_t pid;

	json_key(w, key);
	json_begin_object(w);
	json_kv_str(w, "file", s->path);
	json_kv_str(w, "kind", diff_is_profile(s) ? "profile" : "snapshot");
	json_kv_str(w, "comm", jread_str(jread_get(t, "comm")));
	if (jread_i64(jread_get(t, "pid"), &pid))
		json_kv_i64(w, "pid", pid);
	else
		json_kv_null(w, "pid");
	if (exact && exact->type == JREAD_BOOL)
		json_kv_bool(w, "exact", exact->b);
	else
		json_kv_null(w, "exact");
	json_end_object(w);
}

int diff_print_json(FILE *f, const struct diff *d)
{
	size_t n = d->top && d->top < d->sites.n ? d->top : d->sites.n;
	struct json_writer w;

	json_init(&w, f, true);
	json_begin_object(&w);
	side_json(&w, "before", &d->b);
	side_json(&w, "after", &d->a);
	rows_json(&w, "groups", &d->groups);
	rows_json(&w, "processes", &d->procs);
	json_key(&w, "tree");
	json_begin_object(&w);
	fig_json(&w, "peak", &d->tree_peak, true, true);
	fig_json(&w, "cpu_ns", &d->tree_cpu, true, true);
	json_end_object(&w);
	json_kv_u64(&w, "sites_matched", d->sites.n);
	json_key(&w, "sites");
	json_begin_array(&w);
	for (size_t i = 0; i < n; i++)
		site_json(&w, &d->sites.v[i]);
	json_end_array(&w);
	json_end_object(&w);
	return json_finish(&w);
}
