// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The snapshot document of DESIGN.md §6, and `tally snapshot`. The document
 * is built in memory and written in one piece, so that a failure never
 * leaves half of it on stdout.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "snapshot.h"

static const char *const stat_names[TALLY_STATS_FIELDS] = {
	"mapped",  "live",	 "rounding",	     "cache",	    "span_free",      "returned",
	"virgin",  "hysteresis", "segment_overhead", "large_count", "spans_assigned",
};

static void stats_fields(uint64_t v[TALLY_STATS_FIELDS], const struct tally_stats *s)
{
	uint64_t f[TALLY_STATS_FIELDS] = { s->mapped,	   s->live,	   s->rounding,
					   s->cache,	   s->span_free,   s->returned,
					   s->virgin,	   s->hysteresis,  s->segment_overhead,
					   s->large_count, s->spans_assigned };
	memcpy(v, f, sizeof(f));
}

static void write_stats11(struct json_writer *w, const uint64_t v[TALLY_STATS_FIELDS])
{
	for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++)
		json_kv_u64(w, stat_names[i], v[i]);
}

/* The instance figures (DESIGN.md §4) of one group, or of the process when
 * g is TALLY_MAX_GROUPS: the five of the contract, then tally's own. */
static void write_instance(struct json_writer *w, const struct session *s, uint32_t g)
{
	const struct gpu_model *gm = &s->model.gpu;
	enum gpu_source src = gpu_source_of(gm);
	struct gpu_group sum = { 0 };
	uint64_t yields = 0, rejects = 0, os_yields = 0;
	uint32_t lo = g < TALLY_MAX_GROUPS ? g : 0, hi = g < TALLY_MAX_GROUPS ? g + 1 : g;

	for (uint32_t i = lo; i < hi; i++) {
		const struct gpu_group *gg = &gm->groups[src][i];
		sum.kernels_launched += gg->kernels_launched;
		sum.graph_launches += gg->graph_launches;
		sum.failed_launches += gg->failed_launches;
		sum.device_bytes += gg->device_bytes;
		sum.host_pinned += gg->host_pinned;
		sum.image_bytes += gg->image_bytes;
		yields += s->model.groups[i].yields;
		rejects += s->model.groups[i].rejects;
		os_yields += s->model.groups[i].os_yields;
	}
	json_kv_u64(w, "kernels_launched", sum.kernels_launched);
	json_kv_i64(w, "bytes_pinned", sum.image_bytes);
	json_kv_u64(w, "back_pressure_rejections", rejects + sum.failed_launches);
	json_kv_u64(w, "yield_count", yields);
	json_kv_i64(w, "device_bytes_allocated", sum.device_bytes);
	json_kv_u64(w, "graph_launches", sum.graph_launches);
	json_kv_u64(w, "failed_launches", sum.failed_launches);
	json_kv_i64(w, "host_pinned_bytes", sum.host_pinned);
	json_kv_u64(w, "os_yields", os_yields);
	if (g == TALLY_MAX_GROUPS)
		json_kv_bool(w, "scheduler", yields > 0);
}

static const char *cuda_source(const struct session *s)
{
	if (s->model.gpu.seen[GPU_SRC_CUPTI])
		return "cupti";
	if (s->model.gpu.seen[GPU_SRC_DRIVER] || s->cuda_fig.entry_points)
		return "driver";
	return "none";
}

static void write_stats(struct json_writer *w, const struct session *s)
{
	struct tally_stats st;
	uint64_t v[TALLY_STATS_FIELDS];

	json_key(w, "stats");
	json_begin_object(w);
	if (s->allocator == SESSION_ALLOC_TALLY) {
		model_stats(&s->model, &st);
		stats_fields(v, &st);
		write_stats11(w, v);
		json_kv_u64(w, "accounted", tally_stats_accounted(&st));
		json_kv_bool(w, "balanced", tally_stats_balanced(&st));
		json_kv_u64(w, "predicted_resident", tally_stats_predicted_resident(&st));
		if (s->have_resident)
			json_kv_u64(w, "measured_resident", s->resident);
		else
			json_kv_null(w, "measured_resident");
	} else {
		/* glibc can say what is live, its rounding and its mmapped
		 * chunks; the other terms have no glibc meaning */
		const struct glibc_figures *g = s->glibc_fig;
		for (unsigned i = 0; i < TALLY_STATS_FIELDS; i++) {
			if (g && i == 1)
				json_kv_u64(w, stat_names[i], g->live);
			else if (g && i == 2)
				json_kv_u64(w, stat_names[i], g->rounding);
			else if (g && i == 9)
				json_kv_u64(w, stat_names[i], g->large_count);
			else
				json_kv_null(w, stat_names[i]);
		}
		json_kv_null(w, "accounted");
		json_kv_null(w, "balanced");
		json_kv_null(w, "predicted_resident");
		json_kv_null(w, "measured_resident");
	}
	json_end_object(w);
	json_key(w, "stats_inprocess");
	if (s->allocator == SESSION_ALLOC_TALLY && s->have_final_inprocess) {
		stats_fields(v, &s->final_inprocess);
		json_begin_object(w);
		write_stats11(w, v);
		json_end_object(w);
	} else if (s->allocator == SESSION_ALLOC_TALLY && s->model.have_inprocess) {
		json_begin_object(w);
		write_stats11(w, s->model.inprocess);
		json_end_object(w);
	} else {
		json_null(w);
	}
}

static void group_counts(const struct session *s, uint32_t g, uint64_t c[4])
{
	if (s->allocator == SESSION_ALLOC_GLIBC && s->glibc_fig) {
		c[0] = s->glibc_fig->alloc_bytes[g];
		c[1] = s->glibc_fig->alloc_objs[g];
		c[2] = s->glibc_fig->dealloc_bytes[g];
		c[3] = s->glibc_fig->dealloc_objs[g];
		return;
	}
	c[0] = (uint64_t)s->model.rp.groups[g].alloc_bytes;
	c[1] = (uint64_t)s->model.rp.groups[g].alloc_objs;
	c[2] = (uint64_t)s->model.rp.groups[g].dealloc_bytes;
	c[3] = (uint64_t)s->model.rp.groups[g].dealloc_objs;
}

static void write_groups(struct json_writer *w, const struct session *s)
{
	json_key(w, "groups");
	json_begin_array(w);
	for (uint32_t g = 0; g < TALLY_MAX_GROUPS; g++) {
		const struct model_group *mg = &s->model.groups[g];
		uint64_t c[4];

		group_counts(s, g, c);
		/* a group is shown once it has a name or has been charged something */
		if (!mg->known && !c[1] && !c[3] && !mg->os_yields)
			continue;
		json_begin_object(w);
		json_kv_u64(w, "id", g);
		if (mg->name[0])
			json_kv_str(w, "name", mg->name);
		else
			json_kv_null(w, "name");
		json_kv_u64(w, "allocated_bytes", c[0]);
		json_kv_u64(w, "allocated_objects", c[1]);
		json_kv_u64(w, "deallocated_bytes", c[2]);
		json_kv_u64(w, "deallocated_objects", c[3]);
		json_kv_i64(w, "live_bytes", (int64_t)(c[0] - c[2]));
		json_kv_u64(w, "cpu_ns", mg->cpu_ns);
		json_key(w, "instance");
		json_begin_object(w);
		write_instance(w, s, g);
		json_end_object(w);
		json_end_object(w);
	}
	json_end_array(w);
}

bool snapshot_exact(const struct session *s)
{
	if (!model_exact(&s->model))
		return false;
	if (s->late && !s->late_consistent && s->allocator == SESSION_ALLOC_TALLY)
		return false;
	if (s->allocator == SESSION_ALLOC_GLIBC)
		return s->glibc_fig && glibc_figures_exact(s->glibc_fig) && !s->late;
	return true;
}

void snapshot_write(struct json_writer *w, const struct session *s)
{
	static const char *const alloc_names[] = { "tally", "glibc", "none" };

	json_begin_object(w);
	json_key(w, "target");
	json_begin_object(w);
	json_kv_i64(w, "pid", s->pid);
	json_kv_str(w, "comm", s->comm);
	json_kv_str(w, "allocator", alloc_names[s->allocator]);
	json_kv_str(w, "cuda", cuda_source(s));
	json_kv_str(w, "attach", s->late ? "running" : "start");
	json_end_object(w);
	json_kv_bool(w, "exact", snapshot_exact(s));
	json_key(w, "events");
	json_begin_object(w);
	json_kv_u64(w, "received", s->model.received);
	json_kv_u64(w, "lost", s->model.lost_msgs);
	json_kv_u64(w, "lost_record_words", s->model.lost_words);
	json_kv_u64(w, "malformed", s->model.malformed);
	json_kv_u64(w, "records", s->model.records);
	json_end_object(w);
	write_stats(w, s);
	json_key(w, "instance");
	json_begin_object(w);
	write_instance(w, s, TALLY_MAX_GROUPS);
	json_end_object(w);
	write_groups(w, s);
	json_end_object(w);
}

int snapshot_print(FILE *out, const struct session *s)
{
	struct json_writer w;
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	int err;

	if (!mem)
		return -errno;
	json_init(&w, mem, true);
	snapshot_write(&w, s);
	err = json_finish(&w);
	if (fclose(mem) && !err)
		err = -EIO;
	if (!err && (fwrite(buf, 1, len, out) != len || fflush(out)))
		err = -EIO;
	free(buf);
	return err;
}
