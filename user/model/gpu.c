// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* The GPU figures from GPU records (gpu.h). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "../util/grow.h"
#include "gpu.h"

#define GPU_MAX_NAMES (1u << 20)

void gpu_init(struct gpu_model *g)
{
	memset(g, 0, sizeof(*g));
}

void gpu_free(struct gpu_model *g)
{
	for (uint32_t i = 0; i < g->nnames; i++)
		free(g->names[i]);
	free(g->names);
	g->names = NULL;
	g->nnames = 0;
}

static int intern(struct gpu_model *g, uint32_t id, const char *s, size_t len)
{
	if (id >= GPU_MAX_NAMES)
		return -EINVAL;
	if (id >= g->nnames) {
		size_t n = g->nnames;
		if (grow((void **)&g->names, &n, (size_t)id + 1, sizeof(*g->names), 64))
			return -ENOMEM;
		memset(g->names + g->nnames, 0, (n - g->nnames) * sizeof(*g->names));
		g->nnames = (uint32_t)n; /* at most 2 * GPU_MAX_NAMES */
	}
	char *name = malloc(len + 1);
	if (!name)
		return -ENOMEM;
	memcpy(name, s, len);
	name[len] = 0;
	free(g->names[id]);
	g->names[id] = name;
	return 0;
}

int gpu_apply(struct gpu_model *g, enum gpu_source src, const struct tally_ev *e, const __u64 *name)
{
	struct gpu_group *gg;
	int64_t sign = e->term ? -1 : 1;

	if (src >= GPU_SOURCES || e->group >= TALLY_MAX_GROUPS)
		goto bad;
	gg = &g->groups[src][e->group];
	switch (e->type) {
	case TALLY_EV_GPU_LAUNCH:
		gg->kernels_launched++;
		break;
	case TALLY_EV_GPU_GRAPH_LAUNCH:
		gg->graph_launches++;
		break;
	case TALLY_EV_GPU_LAUNCH_FAILED:
		gg->failed_launches++;
		break;
	case TALLY_EV_GPU_DEVICE_MEM:
		gg->device_bytes += sign * (int64_t)e->bytes;
		break;
	case TALLY_EV_GPU_HOST_PINNED:
		gg->host_pinned += sign * (int64_t)e->bytes;
		break;
	case TALLY_EV_GPU_IMAGE:
		gg->image_bytes += sign * (int64_t)e->bytes;
		break;
	case TALLY_EV_GPU_KERNEL_NAME:
		if (!name || e->bytes > TALLY_KERNEL_NAME_MAX ||
		    intern(g, e->n, (const char *)name, (size_t)e->bytes))
			goto bad;
		break;
	case TALLY_EV_GPU_CUPTI_REFUSED: {
		/* CUPTI did not speak: the driver's probes do (not a figure) */
		size_t n = (size_t)e->bytes;
		if (src != GPU_SRC_CUPTI || !name || n > TALLY_KERNEL_NAME_MAX)
			goto bad;
		if (n >= sizeof(g->cupti_refused))
			n = sizeof(g->cupti_refused) - 1;
		memcpy(g->cupti_refused, name, n);
		g->cupti_refused[n] = 0;
		for (size_t i = 0; i < n; i++) /* a guest's text: printable only */
			if ((unsigned char)g->cupti_refused[i] < 0x20 ||
			    (unsigned char)g->cupti_refused[i] >= 0x7f)
				g->cupti_refused[i] = '?';
		if (!n)
			strcpy(g->cupti_refused, "?");
		return 0;
	}
	default:
		goto bad;
	}
	g->seen[src] = true;
	return 0;
bad: /* counted by the caller (the model's malformed) */
	return -EINVAL;
}

enum gpu_source gpu_source_of(const struct gpu_model *g)
{
	return g->seen[GPU_SRC_CUPTI] ? GPU_SRC_CUPTI : GPU_SRC_DRIVER;
}

const char *gpu_kernel_name(const struct gpu_model *g, uint32_t id)
{
	return id < g->nnames ? g->names[id] : NULL;
}

int gpu_copy(struct gpu_model *dst, const struct gpu_model *src)
{
	*dst = *src;
	dst->names = NULL;
	dst->nnames = 0;
	if (!src->nnames)
		return 0;
	dst->names = calloc(src->nnames, sizeof(*dst->names));
	if (!dst->names)
		return -ENOMEM;
	dst->nnames = src->nnames;
	for (uint32_t i = 0; i < src->nnames; i++)
		if (src->names[i] && !(dst->names[i] = strdup(src->names[i]))) {
			gpu_free(dst);
			return -ENOMEM;
		}
	return 0;
}
