// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The exposition of `tally serve --all` (prom_all.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "prom.h"
#include "prom_all.h"

const char *const prom_all_fail_names[PROM_ALL_FAIL_COUNT] = { "permission", "busy", "gone",
							       "limit", "other" };

/* One running process of some followed tree. */
struct ent {
	const struct figures_process *p;
};

static int64_t stat_of(const struct figures_process *p, unsigned i)
{
	return (p->stats.known & (1u << i)) ? p->stats.v[i] : 0;
}

static int by_live(const void *a, const void *b)
{
	const struct figures_process *x = ((const struct ent *)a)->p;
	const struct figures_process *y = ((const struct ent *)b)->p;
	int64_t lx = stat_of(x, TALLY_STAT_live), ly = stat_of(y, TALLY_STAT_live);

	if (lx != ly)
		return lx > ly ? -1 : 1;
	return (x->target.pid > y->target.pid) - (x->target.pid < y->target.pid);
}

static void str_label(FILE *f, const char *key, const char *v, size_t max)
{
	fprintf(f, "%s=\"", key);
	if (v)
		prom_escape(f, v, strnlen(v, max), true);
	fputc('"', f);
}

/* pid, comm and container: what tells one process's series from another's. */
static void lead(FILE *f, const char *name, const struct figures_process *p)
{
	fprintf(f, "%s{pid=\"%u\",", name, (unsigned)p->target.pid);
	str_label(f, "comm", p->target.comm, TALLY_COMM_LEN);
	fputc(',', f);
	str_label(f, "container", p->target.container, 256);
}

static void info(FILE *f, const struct ent *e, unsigned n)
{
	prom_family(f, "tally_process_info", "gauge",
		    "A followed process: its command line, parent, allocator, cgroup v2 path and "
		    "container id; the value is always 1");
	for (unsigned i = 0; i < n; i++) {
		const struct figures_target *t = &e[i].p->target;
		lead(f, "tally_process_info", e[i].p);
		fputc(',', f);
		str_label(f, "cmdline", t->cmdline, SOURCES_CMDLINE_MAX);
		fprintf(f, ",ppid=\"%d\",", (int)t->ppid);
		str_label(f, "allocator", figures_target_allocator(t), 64);
		fputc(',', f);
		str_label(f, "cgroup", t->cgroup, 4096);
		fputs("} 1\n", f);
	}
}

static uint64_t cpu_of(const struct figures_process *p)
{
	uint64_t ns = 0;

	for (unsigned g = 0; g < p->ngroups; g++)
		ns += p->groups[g].cpu_ns;
	return ns;
}

/* The per-process families: the top, then the rest summed (gauges only). */
static void processes(FILE *f, const struct ent *e, unsigned n, unsigned top)
{
	static const struct prom_family_def fam[] = {
		{ "tally_process_live_bytes", "gauge",
		  "Bytes the process's allocations requested and did not free (the --top "
		  "processes with the most; the rest summed as comm=\"other\")" },
		{ "tally_process_mapped_bytes", "gauge",
		  "Bytes the process's allocator has mapped (comm=\"other\": the rest summed)" },
		{ "tally_process_peak_live_bytes", "gauge",
		  "The process's highest live bytes since tally followed it" },
		{ "tally_process_cpu_seconds_total", "counter", "CPU time of the process" },
		{ "tally_process_exact", "gauge", "1 when the process's figures are exact" },
	};
	unsigned shown = n < top ? n : top;
	int64_t other[2] = { 0, 0 };

	for (unsigned i = shown; i < n; i++) {
		other[0] += stat_of(e[i].p, TALLY_STAT_live);
		other[1] += stat_of(e[i].p, TALLY_STAT_mapped);
	}
	for (unsigned k = 0; k < sizeof(fam) / sizeof(fam[0]); k++) {
		prom_family(f, fam[k].name, fam[k].type, fam[k].help);
		for (unsigned i = 0; i < shown; i++) {
			const struct figures_process *p = e[i].p;
			lead(f, fam[k].name, p);
			fputs("} ", f);
			if (k < 2)
				fprintf(f, "%" PRId64 "\n",
					stat_of(p, k ? TALLY_STAT_mapped : TALLY_STAT_live));
			else if (k == 2)
				fprintf(f, "%" PRId64 "\n",
					p->peak.known ? p->peak.v[TALLY_STAT_live] : 0);
			else if (k == 3)
				prom_seconds(f, cpu_of(p));
			else
				fprintf(f, "%d\n", p->exact);
		}
		if (k < 2 && n > shown)
			fprintf(f, "%s{pid=\"\",comm=\"other\",container=\"\"} %" PRId64 "\n",
				fam[k].name, other[k]);
	}
}

/* Each Stats term and each group's figures, per listed process. */
static void stats_and_groups(FILE *f, const struct ent *e, unsigned n)
{
	for (unsigned s = 0; s < TALLY_STATS_COUNT; s++) {
		bool any = false;
		for (unsigned i = 0; i < n && !any; i++)
			any = e[i].p->stats.known & (1u << s);
		if (!any)
			continue;
		prom_family(f, prom_stat_metric[s], "gauge", prom_stat_help[s]);
		for (unsigned i = 0; i < n; i++) {
			if (!(e[i].p->stats.known & (1u << s)))
				continue;
			lead(f, prom_stat_metric[s], e[i].p);
			fprintf(f, "} %" PRId64 "\n", e[i].p->stats.v[s]);
		}
	}
	for (unsigned k = 0; k < PROM_GF_N; k++) {
		prom_family(f, prom_group_families[k].name, prom_group_families[k].type,
			    prom_group_families[k].help);
		for (unsigned i = 0; i < n; i++) {
			const struct figures_process *p = e[i].p;
			if (k == PROM_GF_PEAK && !p->peak.known)
				continue;
			for (unsigned g = 0; g < p->ngroups; g++) {
				lead(f, prom_group_families[k].name, p);
				fprintf(f, ",id=\"%u\",", p->groups[g].id);
				str_label(f, "group", p->groups[g].name, TALLY_GROUP_NAME_MAX);
				fputs("} ", f);
				prom_group_value(f, k, &p->groups[g]);
			}
		}
	}
}

static int by_container(const void *a, const void *b)
{
	const char *x = ((const struct ent *)a)->p->target.container;
	const char *y = ((const struct ent *)b)->p->target.container;

	return strcmp(x ? x : "", y ? y : "");
}

/* Sums per container (container="": the host's processes), over every
 * followed process. e is sorted anew. */
static void containers(FILE *f, struct ent *e, unsigned n)
{
	static const char *const name[] = { "tally_container_live_bytes",
					    "tally_container_mapped_bytes",
					    "tally_container_processes" };
	static const char *const help[] = {
		"Live bytes of the followed processes of the container, summed (container=\"\": "
		"those outside any)",
		"Mapped bytes of the followed processes of the container, summed",
		"Followed processes running in the container",
	};

	qsort(e, n, sizeof(*e), by_container);
	for (unsigned k = 0; k < 3; k++) {
		prom_family(f, name[k], "gauge", help[k]);
		for (unsigned i = 0; i < n;) {
			int64_t v = 0;
			unsigned j = i;
			for (; j < n && !by_container(&e[i], &e[j]); j++)
				v += k == 2 ? 1 :
					      stat_of(e[j].p,
						      k ? TALLY_STAT_mapped : TALLY_STAT_live);
			fprintf(f, "%s{", name[k]);
			str_label(f, "container", e[i].p->target.container, 256);
			fprintf(f, "} %" PRId64 "\n", v);
			i = j;
		}
	}
}

static void gauge(FILE *f, const char *name, const char *help, uint64_t v)
{
	prom_family(f, name, "gauge", help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void counter(FILE *f, const char *name, const char *help, uint64_t v)
{
	prom_family(f, name, "counter", help);
	fprintf(f, "%s %" PRIu64 "\n", name, v);
}

static void health(FILE *f, const struct prom_all_health *h, unsigned nprocs)
{
	gauge(f, "tally_agent_start_time_seconds",
	      "When the agent started, seconds since the epoch", h->start_time);
	gauge(f, "tally_agent_sessions",
	      "Processes the agent follows as roots (each with its tree)", h->sessions);
	gauge(f, "tally_agent_processes", "Processes followed, roots and their descendants",
	      nprocs);
	counter(f, "tally_agent_attaches_total", "Roots the agent attached to", h->attached);
	counter(f, "tally_agent_ends_total", "Roots that ended while followed", h->ended);
	prom_family(
		f, "tally_agent_attach_failures_total", "counter",
		"Processes the agent did not follow, by reason: permission, busy (another "
		"tally traces it), gone (it ended during the attach), limit (--max-procs), other");
	for (unsigned r = 0; r < PROM_ALL_FAIL_COUNT; r++)
		fprintf(f, "tally_agent_attach_failures_total{reason=\"%s\"} %" PRIu64 "\n",
			prom_all_fail_names[r], h->fail[r]);
	counter(f, "tally_agent_events_lost_total",
		"Ring messages lost because a ring was full, over every session", h->lost);
	counter(f, "tally_agent_events_lost_record_words_total",
		"Words of allocator records inside the lost messages", h->lost_words);
	counter(f, "tally_agent_ticks_skipped_total",
		"A session's figures not renewed at a tick: its cut was torn (the last ones kept)",
		h->torn);
	counter(f, "tally_agent_cpu_lost_total",
		"CPU intervals, and processes, the agent could not charge (a map full): the CPU "
		"figures are short by them",
		h->cpu_lost);
	gauge(f, "tally_agent_scanned_processes", "Processes the last look over /proc saw",
	      h->scanned);
	prom_family(f, "tally_agent_scan_seconds", "gauge",
		    "How long the last look over /proc took");
	fputs("tally_agent_scan_seconds ", f);
	prom_seconds(f, h->scan_ns);
	gauge(f, "tally_agent_resident_bytes", "The agent's own resident memory", h->resident);
	prom_family(f, "tally_agent_cpu_seconds_total", "counter", "The agent's own CPU time");
	fputs("tally_agent_cpu_seconds_total ", f);
	prom_seconds(f, h->cpu_ns);
}

/* Every running process of every tree: a tree's root always (its final
 * figures until the session ends), the others while they run. */
static struct ent *entries(const struct figures *const *figs, unsigned nf, unsigned *n)
{
	unsigned total = 0;
	struct ent *e;

	for (unsigned i = 0; i < nf; i++)
		total += figs[i]->nprocs;
	e = calloc(total ? total : 1, sizeof(*e));
	if (!e)
		return NULL;
	*n = 0;
	for (unsigned i = 0; i < nf; i++)
		for (unsigned j = 0; j < figs[i]->nprocs; j++)
			if (!j || !figs[i]->procs[j].target.gone)
				e[(*n)++].p = &figs[i]->procs[j];
	return e;
}

static uint64_t series_in(const char *buf, size_t len)
{
	uint64_t n = 0;
	bool bol = true;

	for (size_t i = 0; i < len; i++) {
		if (bol && buf[i] != '#')
			n++;
		bol = buf[i] == '\n';
	}
	return n;
}

int prom_all_render(FILE *f, const struct figures *const *figs, unsigned nf, unsigned top,
		    const struct prom_all_health *h)
{
	char *buf = NULL;
	size_t len = 0;
	unsigned n;
	struct ent *e = entries(figs, nf, &n);
	FILE *m = e ? open_memstream(&buf, &len) : NULL;

	if (!m) {
		free(e);
		return -ENOMEM;
	}
	qsort(e, n, sizeof(*e), by_live);
	unsigned shown = n < top ? n : top;
	info(m, e, shown);
	processes(m, e, n, top);
	stats_and_groups(m, e, shown);
	containers(m, e, n);
	health(m, h, n);
	int err = fclose(m) ? -ENOMEM : 0;
	free(e);
	if (!err) {
		fwrite(buf, 1, len, f);
		prom_family(f, "tally_agent_series", "gauge",
			    "Series in this exposition, this one included: bounded by --top");
		fprintf(f, "tally_agent_series %" PRIu64 "\n", series_in(buf, len) + 1);
	}
	free(buf);
	if (err)
		return err;
	return ferror(f) ? -EIO : 0;
}
