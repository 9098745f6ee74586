// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Prometheus text exposition (prom.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"
#include "../util/text.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */
#define STR(x) STR_(x)
#define STR_(x) #x

void prom_escape(FILE *f, const char *str, size_t n, bool quote)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < n;) {
		size_t len = text_utf8_len(s + i, n - i);
		unsigned char c = s[i];

		if (c == '\\') {
			fputs("\\\\", f);
		} else if (c == '\n') {
			fputs("\\n", f);
		} else if (c == '"' && quote) {
			fputs("\\\"", f);
		} else if (!len || c < 0x20 || c == 0x7f || (c == 0xc2 && s[i + 1] < 0xa0)) {
			/* not UTF-8, or a C0/C1 control (terminal escapes): one
			 * replacement for the byte, or for the control character */
			fputs(REPLACEMENT, f);
			i += len ? len : 1;
			continue;
		} else {
			fwrite(s + i, 1, len, f);
			i += len;
			continue;
		}
		i++;
	}
}

/* # HELP and # TYPE of one family. */
void prom_family(FILE *f, const char *name, const char *type, const char *help)
{
	fprintf(f, "# HELP %s ", name);
	prom_escape(f, help, strlen(help), false);
	fprintf(f, "\n# TYPE %s %s\n", name, type);
}

static void sample_u64(FILE *f, const char *name, uint64_t v)
{
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void sample_i64(FILE *f, const char *name, int64_t v)
{
	fprintf(f, "%s %" PRId64 "\n", name, v);
}

static void group_labels(FILE *f, const char *name, const struct figures_group *fg)
{
	fprintf(f, "%s{id=\"%u\",group=\"", name, fg->id);
	if (fg->name)
		prom_escape(f, fg->name, strnlen(fg->name, TALLY_GROUP_NAME_MAX), true);
	fputs("\"} ", f);
}

/* Nanoseconds as exact decimal seconds: no rounding through a double. */
void prom_seconds(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u, ns % 1000000000u);
}

const struct prom_family_def prom_group_families[PROM_GF_N] = {
	[PROM_GF_LIVE] = { "tally_group_live_bytes", "gauge",
			   "Bytes requested by the group's allocations and not yet freed" },
	[PROM_GF_PEAK] = { "tally_group_peak_live_bytes", "gauge",
			   "The group's live bytes at its process's peak of live (the highest since "
			   "tally started or attached)" },
	[PROM_GF_CPU] = { "tally_group_cpu_seconds_total", "counter",
			  "CPU time charged to the group (the innermost current group of a running "
			  "thread)" },
	[PROM_GF_ALLOC_BYTES] = { "tally_group_allocated_bytes_total", "counter",
				  "Bytes requested by allocations charged to the group" },
	[PROM_GF_DEALLOC_BYTES] = { "tally_group_deallocated_bytes_total", "counter",
				    "Bytes freed of allocations charged to the group" },
	[PROM_GF_ALLOCS] = { "tally_group_allocations_total", "counter",
			     "Allocations charged to the group" },
	[PROM_GF_FREES] = { "tally_group_frees_total", "counter",
			    "Frees of allocations charged to the group" },
};

void prom_group_value(FILE *f, unsigned k, const struct figures_group *fg)
{
	const uint64_t counts[] = {
		[PROM_GF_ALLOC_BYTES] = fg->alloc_bytes,
		[PROM_GF_DEALLOC_BYTES] = fg->dealloc_bytes,
		[PROM_GF_ALLOCS] = fg->alloc_objs,
		[PROM_GF_FREES] = fg->dealloc_objs,
	};

	if (k == PROM_GF_LIVE)
		fprintf(f, "%" PRId64 "\n", fg->live_bytes);
	else if (k == PROM_GF_PEAK)
		fprintf(f, "%" PRId64 "\n", fg->peak_live);
	else if (k == PROM_GF_CPU)
		prom_seconds(f, fg->cpu_ns);
	else
		fprintf(f, "%" PRIu64 "\n", counts[k]);
}

static void instance_value(FILE *f, const struct figures_instance *in, unsigned i)
{
	uint64_t v = figures_instance_get(in, i);

	if (figures_instance_fields[i].is_signed)
		fprintf(f, "%" PRId64 "\n", (int64_t)v);
	else
		fprintf(f, "%" PRIu64 "\n", v);
}

static void render_groups(FILE *f, const struct figures_process *p)
{
	char name[128], help[256];

	for (unsigned k = 0; k < PROM_GF_N; k++) {
		/* a peak where a replay keeps one (libtally_alloc), none else */
		if (k == PROM_GF_PEAK && !p->peak.known)
			continue;
		prom_family(f, prom_group_families[k].name, prom_group_families[k].type,
			    prom_group_families[k].help);
		for (unsigned g = 0; g < p->ngroups; g++) {
			group_labels(f, prom_group_families[k].name, &p->groups[g]);
			prom_group_value(f, k, &p->groups[g]);
		}
	}
	/* per-group GPU families only once a GPU source spoke */
	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++) {
		const struct figures_instance_field *fi = &figures_instance_fields[i];
		if (fi->kind == FIGURES_GPU && !p->gpu_spoke)
			continue;
		snprintf(name, sizeof(name), "tally_group_%s", fi->metric);
		snprintf(help, sizeof(help), "%s, in the group", fi->help);
		prom_family(f, name, fi->prom_type, help);
		for (unsigned g = 0; g < p->ngroups; g++) {
			group_labels(f, name, &p->groups[g]);
			instance_value(f, &p->groups[g].instance, i);
		}
	}
}

const char *const prom_stat_help[TALLY_STATS_COUNT] = {
#define STAT_HELP(field, metric, unit, help) help,
	TALLY_STATS_X(STAT_HELP)
#undef STAT_HELP
};

const char *const prom_stat_metric[TALLY_STATS_COUNT] = {
#define STAT_METRIC(field, metric, unit, help) "tally_stats_" metric,
	TALLY_STATS_X(STAT_METRIC)
#undef STAT_METRIC
};

static void render_stats(FILE *f, const struct figures_stats *fs)
{
	for (unsigned i = 0; i < TALLY_STATS_COUNT; i++) {
		if (!(fs->known & (1u << i)))
			continue;
		prom_family(f, prom_stat_metric[i], "gauge", prom_stat_help[i]);
		/* signed: after lost records a rebuilt term can be negative */
		sample_i64(f, prom_stat_metric[i], fs->v[i]);
	}
	if (!fs->identity)
		return;
	prom_family(f, "tally_stats_accounted_bytes", "gauge",
		    "The sum of the eight terms that account for every mapped byte");
	sample_i64(f, "tally_stats_accounted_bytes", fs->accounted);
	prom_family(f, "tally_stats_balanced", "gauge",
		    "1 when the accounted bytes equal the mapped bytes (the identity holds)");
	sample_u64(f, "tally_stats_balanced", fs->balanced);
	prom_family(f, "tally_stats_predicted_resident_bytes", "gauge",
		    "Mapped bytes minus virgin and returned: what should be resident");
	sample_i64(f, "tally_stats_predicted_resident_bytes", fs->predicted_resident);
	if (fs->have_resident) {
		prom_family(f, "tally_stats_measured_resident_bytes", "gauge",
			    "Resident bytes of the allocator's mappings, measured");
		sample_u64(f, "tally_stats_measured_resident_bytes", fs->resident);
	}
}

static void render_process(FILE *f, const struct figures_instance *in)
{
	char name[128];

	for (unsigned i = 0; i < FIGURES_INSTANCE_COUNT; i++) {
		const struct figures_instance_field *fi = &figures_instance_fields[i];
		snprintf(name, sizeof(name), "tally_%s", fi->metric);
		prom_family(f, name, fi->prom_type, fi->help);
		fprintf(f, "%s ", name);
		instance_value(f, in, i);
	}
}

/* Whether the GPU figures are exact (a driver loaded before the attach:
 * they count from it), and the driver's own device memory figure (NVML). */
static void render_gpu_extra(FILE *f, const struct figures_process *p)
{
	if (!p->gpu_attached)
		return;
	prom_family(f, "tally_gpu_exact", "gauge",
		    "1 when the GPU figures are exact; 0 when they count from the attach (the "
		    "driver was loaded before it) or records were lost");
	sample_u64(f, "tally_gpu_exact", p->instance_exact);
	if (!p->have_device_memory_used)
		return;
	prom_family(f, "tally_device_memory_used_bytes", "gauge",
		    "Device memory the CUDA driver itself reports for the traced processes "
		    "(NVML): the driver's figure, not rebuilt by tally");
	sample_u64(f, "tally_device_memory_used_bytes", p->device_memory_used);
}

/* The last labels of an info sample, where the process lives, and its 1;
 * an empty value is no label: a process outside any container. */
static void place_labels(FILE *f, const struct figures_target *t)
{
	fputs("\",cgroup=\"", f);
	if (t->cgroup)
		prom_escape(f, t->cgroup, strlen(t->cgroup), true);
	fputs("\",container=\"", f);
	if (t->container)
		prom_escape(f, t->container, strlen(t->container), true);
	fputs("\"} 1\n", f);
}

/* The command line as ps shows it (cut at 255 bytes): on the info series
 * alone, where every PostgreSQL backend's comm is "postgres". */
static void cmdline_label(FILE *f, const struct figures_target *t)
{
	const char *c = t->cmdline ? t->cmdline : "";

	fputs("\",cmdline=\"", f);
	prom_escape(f, c, strnlen(c, SOURCES_CMDLINE_MAX), true);
}

static void render_info(FILE *f, const struct figures_target *t)
{
	const char *alloc = figures_target_allocator(t);
	const char *cuda = figures_cuda_name(t->cuda);

	prom_family(
		f, "tally_info", "gauge",
		"The traced process, its command line, cgroup v2 path and container id; the value is "
		"always 1");
	fprintf(f, "tally_info{pid=\"%u\",comm=\"", (unsigned)t->pid);
	prom_escape(f, t->comm, strnlen(t->comm, TALLY_COMM_LEN), true);
	cmdline_label(f, t);
	fputs("\",allocator=\"", f);
	prom_escape(f, alloc, strlen(alloc), true);
	fputs("\",cuda=\"", f);
	prom_escape(f, cuda, strlen(cuda), true);
	place_labels(f, t);
}

/* A process's labels: pid and comm; the rest summed as comm="other". */
static void proc_labels(FILE *f, const char *name, const struct figures_process *p)
{
	fprintf(f, "%s{pid=\"", name);
	if (p) {
		fprintf(f, "%u\",comm=\"", (unsigned)p->target.pid);
		prom_escape(f, p->target.comm, strnlen(p->target.comm, TALLY_COMM_LEN), true);
	} else {
		fputs("\",comm=\"other", f);
	}
	fputs("\"} ", f);
}

/* The figures of the processes past the cap, summed. */
struct proc_sum {
	int64_t live, mapped, peak;
	uint64_t cpu_ns;
	bool exact;
};

static void proc_sum_of(struct proc_sum *o, const struct figures_process *p)
{
	memset(o, 0, sizeof(*o));
	if (p->stats.known & (1u << TALLY_STAT_live))
		o->live = p->stats.v[TALLY_STAT_live];
	if (p->stats.known & (1u << TALLY_STAT_mapped))
		o->mapped = p->stats.v[TALLY_STAT_mapped];
	if (p->peak.known)
		o->peak = p->peak.v[TALLY_STAT_live];
	for (unsigned g = 0; g < p->ngroups; g++)
		o->cpu_ns += p->groups[g].cpu_ns;
	o->exact = p->exact;
}

static const struct {
	const char *name, *type, *help;
} proc_families[] = {
	{ "tally_process_live_bytes", "gauge",
	  "Bytes the process's allocations requested and did not free (per process: the " STR(
		  PROM_MAX_PROCESSES) " largest, the rest summed as comm=\"other\")" },
	{ "tally_process_mapped_bytes", "gauge", "Bytes the process's allocator has mapped" },
	{ "tally_process_peak_live_bytes", "gauge",
	  "The process's highest live bytes since tally started or attached (comm=\"other\": the "
	  "highest of theirs)" },
	{ "tally_process_cpu_seconds_total", "counter", "CPU time of the process" },
	{ "tally_process_exact", "gauge", "1 when the process's figures are exact" },
};

static void proc_value(FILE *f, unsigned k, const struct proc_sum *v)
{
	if (k == 0)
		fprintf(f, "%" PRId64 "\n", v->live);
	else if (k == 1)
		fprintf(f, "%" PRId64 "\n", v->mapped);
	else if (k == 2)
		fprintf(f, "%" PRId64 "\n", v->peak);
	else if (k == 3)
		prom_seconds(f, v->cpu_ns);
	else
		fprintf(f, "%d\n", v->exact);
}

static int cmp_live(const void *a, const void *b)
{
	const struct figures_process *x = *(const struct figures_process *const *)a;
	const struct figures_process *y = *(const struct figures_process *const *)b;
	int64_t lx = x->stats.v[TALLY_STAT_live], ly = y->stats.v[TALLY_STAT_live];

	return lx > ly ? -1 : lx < ly;
}

/* Per process, the root and every process still running: the
 * PROM_MAX_PROCESSES with the most live bytes by pid and comm, the others
 * summed into one series (comm="other"), so that a scrape stays bounded
 * however many processes the tree has. */
/* Where each listed process lives, as tally_info says it for the root. */
static void render_process_info(FILE *f, const struct figures_process *const *ps, unsigned n)
{
	prom_family(
		f, "tally_process_info", "gauge",
		"A process of the traced tree: its command line, parent, allocator, cgroup v2 path "
		"and container id; the value is always 1");
	for (unsigned i = 0; i < n; i++) {
		const struct figures_target *t = &ps[i]->target;
		const char *alloc = figures_target_allocator(t);
		fprintf(f, "tally_process_info{pid=\"%u\",comm=\"", (unsigned)t->pid);
		prom_escape(f, t->comm, strnlen(t->comm, TALLY_COMM_LEN), true);
		cmdline_label(f, t);
		fprintf(f, "\",ppid=\"%d\",allocator=\"%s", (int)t->ppid, alloc);
		place_labels(f, t);
	}
}

static int render_processes(FILE *f, const struct figures *fig)
{
	const struct figures_process **ps = calloc(fig->nprocs, sizeof(*ps));
	struct proc_sum other = { .exact = true }, one;
	unsigned n = 0;

	if (!ps)
		return -ENOMEM;
	for (unsigned i = 0; i < fig->nprocs; i++)
		if (!i || !fig->procs[i].target.gone)
			ps[n++] = &fig->procs[i];
	qsort(ps, n, sizeof(*ps), cmp_live);
	for (unsigned i = PROM_MAX_PROCESSES; i < n; i++) {
		proc_sum_of(&one, ps[i]);
		other.live += one.live;
		other.mapped += one.mapped;
		other.peak = one.peak > other.peak ? one.peak : other.peak;
		other.cpu_ns += one.cpu_ns;
		other.exact &= one.exact;
	}
	for (unsigned k = 0; k < sizeof(proc_families) / sizeof(proc_families[0]); k++) {
		prom_family(f, proc_families[k].name, proc_families[k].type, proc_families[k].help);
		for (unsigned i = 0; i < n && i < PROM_MAX_PROCESSES; i++) {
			proc_sum_of(&one, ps[i]);
			proc_labels(f, proc_families[k].name, ps[i]);
			proc_value(f, k, &one);
		}
		if (n > PROM_MAX_PROCESSES) {
			proc_labels(f, proc_families[k].name, NULL);
			proc_value(f, k, &other);
		}
	}
	render_process_info(f, ps, n < PROM_MAX_PROCESSES ? n : PROM_MAX_PROCESSES);
	prom_family(f, "tally_processes", "gauge",
		    "Processes of the traced tree running (the root counted also once it ended)");
	sample_u64(f, "tally_processes", n);
	free(ps);
	return 0;
}

/* Whether the tree's figures are exact, and if not why: the processes
 * not exact by reason, one series per code of the fixed set (README), so
 * that the labels stay bounded however many processes there are. */
static void render_exact(FILE *f, const struct figures *fig)
{
	uint64_t n[FIGURES_WHY_COUNT] = { 0 };
	bool exact = !fig->folded_inexact;

	for (unsigned i = 0; i < fig->nprocs; i++) {
		exact &= fig->procs[i].exact;
		for (unsigned k = 0; k < fig->procs[i].nwhy; k++)
			n[fig->procs[i].why_code[k]]++;
	}
	prom_family(f, "tally_exact", "gauge",
		    "1 when every process of the tree has exact figures; 0: "
		    "tally_inexact_processes says why not");
	sample_u64(f, "tally_exact", exact);
	prom_family(f, "tally_inexact_processes", "gauge",
		    "Processes of the tree whose figures are not exact, by reason (a fixed set of "
		    "codes; a process may have several)");
	for (unsigned c = 0; c < FIGURES_WHY_COUNT; c++)
		fprintf(f, "tally_inexact_processes{reason=\"%s\"} %llu\n", figures_why_codes[c],
			(unsigned long long)n[c]);
}

int prom_render(FILE *f, const struct figures *fig)
{
	struct figures_process sum;
	const struct figures_process *p = &sum;

	/* the unlabelled families are the tree's: the root's in a tree of one */
	if (figures_sum(fig, &sum))
		return -ENOMEM;
	render_info(f, &p->target);
	prom_family(f, "tally_target_running", "gauge",
		    "1 while the traced process runs; 0 once it exited (its final figures)");
	sample_u64(f, "tally_target_running", !p->target.gone);
	render_exact(f, fig);
	prom_family(f, "tally_events_received_total", "counter",
		    "Messages received from every process of the tree, its heaps' shared rings "
		    "included");
	sample_u64(f, "tally_events_received_total", fig->tree.life.received);
	prom_family(f, "tally_events_in_place_total", "counter",
		    "Batches read in place from the heaps' shared rings (of those received)");
	sample_u64(f, "tally_events_in_place_total", fig->tree.life.in_place);
	prom_family(f, "tally_events_lost_total", "counter",
		    "Ring buffer messages lost because the ring was full");
	sample_u64(f, "tally_events_lost_total", p->events.lost);
	prom_family(f, "tally_events_lost_record_words_total", "counter",
		    "Words of allocator records inside the lost messages");
	sample_u64(f, "tally_events_lost_record_words_total", p->events.lost_record_words);
	render_stats(f, &p->stats);
	render_process(f, &p->instance);
	render_gpu_extra(f, p);
	render_groups(f, p);
	int err = render_processes(f, fig);
	figures_process_free(&sum);
	if (err)
		return err;
	return ferror(f) ? -EIO : 0;
}
