// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The Prometheus text exposition (prom.h). */
#include <errno.h>
#include <inttypes.h>
#include <string.h>

#include "prom.h"

#define REPLACEMENT "\xef\xbf\xbd" /* U+FFFD */

/* The length of the valid UTF-8 sequence at s (of n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
	unsigned char c = s[0], lo = 0x80, hi = 0xbf;
	size_t len;

	if (c < 0x80)
		return 1;
	if (c >= 0xc2 && c <= 0xdf)
		len = 2;
	else if (c >= 0xe0 && c <= 0xef)
		len = 3;
	else if (c >= 0xf0 && c <= 0xf4)
		len = 4;
	else
		return 0;
	/* no overlong forms, no surrogates, nothing past U+10FFFF */
	if (c == 0xe0)
		lo = 0xa0;
	else if (c == 0xed)
		hi = 0x9f;
	else if (c == 0xf0)
		lo = 0x90;
	else if (c == 0xf4)
		hi = 0x8f;
	if (len > n || s[1] < lo || s[1] > hi)
		return 0;
	for (size_t i = 2; i < len; i++)
		if ((s[i] & 0xc0) != 0x80)
			return 0;
	return len;
}

void prom_escape(FILE *f, const char *str, size_t n, bool quote)
{
	const unsigned char *s = (const unsigned char *)str;

	for (size_t i = 0; i < n;) {
		size_t len = utf8_len(s + i, n - i);
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
static void family(FILE *f, const char *name, const char *type, const char *help)
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

static void group_labels(FILE *f, const char *name, uint32_t g, const struct prom_group *pg)
{
	fprintf(f, "%s{id=\"%u\",group=\"", name, g);
	prom_escape(f, pg->name, strnlen(pg->name, sizeof(pg->name)), true);
	fputs("\"} ", f);
}

/* Nanoseconds as exact decimal seconds: no rounding through a double. */
static void seconds(FILE *f, uint64_t ns)
{
	fprintf(f, "%" PRIu64 ".%09" PRIu64 "\n", ns / 1000000000u, ns % 1000000000u);
}

enum group_field {
	GF_LIVE,
	GF_CPU,
	GF_ALLOC_BYTES,
	GF_DEALLOC_BYTES,
	GF_ALLOCS,
	GF_FREES,
	GF_YIELDS,
	GF_REJECTS,
	GF_KERNELS,
	GF_GRAPHS,
	GF_FAILED,
	GF_DEVICE,
	GF_HOST_PINNED,
	GF_IMAGE,
	GF_GPU_FIRST = GF_KERNELS,
};

static const struct {
	const char *name, *type, *help;
} group_families[] = {
	[GF_LIVE] = { "tally_group_live_bytes", "gauge",
		      "Bytes requested by the group's allocations and not yet freed" },
	[GF_CPU] = { "tally_group_cpu_seconds_total", "counter",
		     "CPU time charged to the group (the innermost current group of a running "
		     "thread)" },
	[GF_ALLOC_BYTES] = { "tally_group_allocated_bytes_total", "counter",
			     "Bytes requested by allocations charged to the group" },
	[GF_DEALLOC_BYTES] = { "tally_group_deallocated_bytes_total", "counter",
			       "Bytes freed of allocations charged to the group" },
	[GF_ALLOCS] = { "tally_group_allocations_total", "counter",
			"Allocations charged to the group" },
	[GF_FREES] = { "tally_group_frees_total", "counter",
		       "Frees of allocations charged to the group" },
	[GF_YIELDS] = { "tally_group_yields_total", "counter",
			"Cooperative yields the application reported in the group" },
	[GF_REJECTS] = { "tally_group_back_pressure_rejections_total", "counter",
			 "Launches the driver refused plus rejections the application reported, "
			 "in the group" },
	[GF_KERNELS] = { "tally_group_gpu_kernels_launched_total", "counter",
			 "Kernel launches the driver accepted, in the group" },
	[GF_GRAPHS] = { "tally_group_gpu_graph_launches_total", "counter",
			"Graph launches the driver accepted, in the group" },
	[GF_FAILED] = { "tally_group_gpu_failed_launches_total", "counter",
			"Launches the driver refused, in the group" },
	[GF_DEVICE] = { "tally_group_gpu_device_bytes", "gauge",
			"Device memory allocated by the group and not freed" },
	[GF_HOST_PINNED] = { "tally_group_gpu_host_pinned_bytes", "gauge",
			     "Pinned host memory of the group" },
	[GF_IMAGE] = { "tally_group_gpu_image_bytes", "gauge",
		       "Image bytes of modules and libraries the group loaded that are still "
		       "loaded" },
};

static void group_value(FILE *f, enum group_field k, const struct prom_group *pg)
{
	const struct model_instance *in = &pg->in;

	switch (k) {
	case GF_LIVE:
		fprintf(f, "%" PRId64 "\n", pg->live_bytes);
		return;
	case GF_CPU:
		seconds(f, pg->cpu_ns);
		return;
	case GF_ALLOC_BYTES:
	case GF_DEALLOC_BYTES:
	case GF_ALLOCS:
	case GF_FREES: {
		uint64_t v[] = { pg->alloc_bytes, pg->dealloc_bytes, pg->alloc_objs,
				 pg->dealloc_objs };
		fprintf(f, "%" PRIu64 "\n", v[k - GF_ALLOC_BYTES]);
		return;
	}
	case GF_YIELDS:
		fprintf(f, "%" PRIu64 "\n", in->yield_count);
		return;
	case GF_REJECTS:
		fprintf(f, "%" PRIu64 "\n", in->back_pressure_rejections);
		return;
	case GF_KERNELS:
		fprintf(f, "%" PRIu64 "\n", in->kernels_launched);
		return;
	case GF_GRAPHS:
		fprintf(f, "%" PRIu64 "\n", in->graph_launches);
		return;
	case GF_FAILED:
		fprintf(f, "%" PRIu64 "\n", in->failed_launches);
		return;
	case GF_DEVICE:
		fprintf(f, "%" PRId64 "\n", in->device_bytes_allocated);
		return;
	case GF_HOST_PINNED:
		fprintf(f, "%" PRId64 "\n", in->host_pinned_bytes);
		return;
	case GF_IMAGE:
		fprintf(f, "%" PRId64 "\n", in->bytes_pinned);
		return;
	}
}

static void render_groups(FILE *f, const struct prom_figures *p)
{
	unsigned n =
		p->gpu_groups ? sizeof(group_families) / sizeof(group_families[0]) : GF_GPU_FIRST;

	for (unsigned k = 0; k < n; k++) {
		family(f, group_families[k].name, group_families[k].type, group_families[k].help);
		for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
			if (!p->groups[g].shown)
				continue;
			group_labels(f, group_families[k].name, g, &p->groups[g]);
			group_value(f, (enum group_field)k, &p->groups[g]);
		}
	}
}

static const char *const stat_help[TALLY_STATS_FIELDS] = {
#define STAT_HELP(field, metric, help) help,
	TALLY_STATS_X(STAT_HELP)
#undef STAT_HELP
};

static const char *const stat_metric[TALLY_STATS_FIELDS] = {
#define STAT_METRIC(field, metric, help) "tally_stats_" metric,
	TALLY_STATS_X(STAT_METRIC)
#undef STAT_METRIC
};

static void render_stats(FILE *f, const struct prom_figures *p)
{
	const uint64_t *v = p->stats;
	struct tally_stats st;

	tally_stats_from_array(&st, v);

	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++) {
		if (!(p->stats_known & (1u << i)))
			continue;
		family(f, stat_metric[i], "gauge", stat_help[i]);
		/* signed: after lost records a rebuilt term can be negative */
		sample_i64(f, stat_metric[i], (int64_t)v[i]);
	}
	if (!p->identity)
		return;
	/* the derived figures as the snapshot computes them */
	family(f, "tally_stats_accounted_bytes", "gauge",
	       "The sum of the eight terms that account for every mapped byte");
	sample_i64(f, "tally_stats_accounted_bytes", (int64_t)tally_stats_accounted(&st));
	family(f, "tally_stats_balanced", "gauge",
	       "1 when the accounted bytes equal the mapped bytes (the identity holds)");
	sample_u64(f, "tally_stats_balanced", tally_stats_balanced(&st));
	family(f, "tally_stats_predicted_resident_bytes", "gauge",
	       "Mapped bytes minus virgin and returned: what should be resident");
	sample_i64(f, "tally_stats_predicted_resident_bytes",
		   (int64_t)tally_stats_predicted_resident(&st));
	if (p->have_resident) {
		family(f, "tally_stats_measured_resident_bytes", "gauge",
		       "Resident bytes of the allocator's mappings, measured");
		sample_u64(f, "tally_stats_measured_resident_bytes", p->resident);
	}
}

static void render_process(FILE *f, const struct prom_figures *p)
{
	const struct model_instance *in = &p->process;

	family(f, "tally_gpu_kernels_launched_total", "counter",
	       "Kernel launches the driver accepted");
	sample_u64(f, "tally_gpu_kernels_launched_total", in->kernels_launched);
	family(f, "tally_gpu_graph_launches_total", "counter",
	       "Graph launches the driver accepted");
	sample_u64(f, "tally_gpu_graph_launches_total", in->graph_launches);
	family(f, "tally_gpu_failed_launches_total", "counter", "Launches the driver refused");
	sample_u64(f, "tally_gpu_failed_launches_total", in->failed_launches);
	family(f, "tally_gpu_device_bytes", "gauge", "Device memory allocated and not freed");
	sample_i64(f, "tally_gpu_device_bytes", in->device_bytes_allocated);
	family(f, "tally_gpu_host_pinned_bytes", "gauge", "Pinned host memory");
	sample_i64(f, "tally_gpu_host_pinned_bytes", in->host_pinned_bytes);
	family(f, "tally_gpu_image_bytes", "gauge",
	       "Image bytes (PTX, cubin, fatbin) of loaded modules and libraries (bytes_pinned)");
	sample_i64(f, "tally_gpu_image_bytes", in->bytes_pinned);
	family(f, "tally_back_pressure_rejections_total", "counter",
	       "Launches the driver refused plus rejections the application reported");
	sample_u64(f, "tally_back_pressure_rejections_total", in->back_pressure_rejections);
	family(f, "tally_yields_total", "counter", "Cooperative yields the application reported");
	sample_u64(f, "tally_yields_total", in->yield_count);
}

int prom_render(FILE *f, const struct prom_figures *p)
{
	family(f, "tally_info", "gauge", "The traced process; the value is always 1");
	fprintf(f, "tally_info{pid=\"%u\",comm=\"", p->pid);
	prom_escape(f, p->comm, strnlen(p->comm, sizeof(p->comm)), true);
	fputs("\",allocator=\"", f);
	prom_escape(f, p->allocator, strlen(p->allocator), true);
	fputs("\",cuda=\"", f);
	prom_escape(f, p->cuda, strlen(p->cuda), true);
	fputs("\"} 1\n", f);
	family(f, "tally_target_running", "gauge",
	       "1 while the traced process runs; 0 once it exited (its final figures)");
	sample_u64(f, "tally_target_running", p->running);
	family(f, "tally_exact", "gauge",
	       "1 when no event was lost or refused: the figures are exact");
	sample_u64(f, "tally_exact", p->exact);
	family(f, "tally_events_received_total", "counter", "Ring buffer messages received");
	sample_u64(f, "tally_events_received_total", p->received);
	family(f, "tally_events_lost_total", "counter",
	       "Ring buffer messages lost because the ring was full");
	sample_u64(f, "tally_events_lost_total", p->lost_msgs);
	family(f, "tally_events_lost_record_words_total", "counter",
	       "Words of allocator records inside the lost messages");
	sample_u64(f, "tally_events_lost_record_words_total", p->lost_words);
	render_stats(f, p);
	render_process(f, p);
	render_groups(f, p);
	return ferror(f) ? -EIO : 0;
}
