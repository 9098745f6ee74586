// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* NVML, through dlopen (nvml.h). The ABI below is NVML's (nvml.h of the
 * CUDA toolkit, which tally does not need to build). */
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "nvml.h"

typedef int nvml_ret;
typedef void *nvml_device;
#define NVML_SUCCESS 0
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_VALUE_NOT_AVAILABLE (~0ULL)
#define NVML_MAX_DEVICES 64
#define NVML_MAX_PROCS 1024

struct nvml_process_info { /* nvmlProcessInfo_t (v2, v3) */
	unsigned int pid;
	unsigned long long used_gpu_memory;
	unsigned int gpu_instance_id;
	unsigned int compute_instance_id;
};

struct nvml {
	void *lib;
	nvml_ret (*shutdown)(void);
	nvml_ret (*procs)(nvml_device, unsigned int *, struct nvml_process_info *);
	unsigned ndev;
	nvml_device dev[NVML_MAX_DEVICES];
	struct nvml_process_info info[NVML_MAX_PROCS];
};

/* A function of the library (dlsym's object pointer into a function's). */
#define SYM(dst, name)                                                                             \
	do {                                                                                       \
		void *sym_ = dlsym(n->lib, name);                                                  \
		memcpy(&(dst), &sym_, sizeof(sym_));                                               \
	} while (0)

int nvml_open(struct nvml **out)
{
	const char *path = getenv("TALLY_NVML");
	struct nvml *n = calloc(1, sizeof(*n));
	nvml_ret (*init)(void), (*count)(unsigned int *), (*handle)(unsigned int, nvml_device *);
	unsigned int ndev = 0;
	int err = -ENODEV;

	if (!n)
		return -ENOMEM;
	n->lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!n->lib) {
		free(n);
		return -ENOENT;
	}
	SYM(init, "nvmlInit_v2");
	SYM(count, "nvmlDeviceGetCount_v2");
	SYM(handle, "nvmlDeviceGetHandleByIndex_v2");
	SYM(n->shutdown, "nvmlShutdown");
	/* v3 where the driver has it (R510 on), else v2: the same struct */
	SYM(n->procs, "nvmlDeviceGetComputeRunningProcesses_v3");
	if (!n->procs)
		SYM(n->procs, "nvmlDeviceGetComputeRunningProcesses_v2");
	if (!init || !count || !handle || !n->shutdown || !n->procs || init() != NVML_SUCCESS)
		goto fail;
	if (count(&ndev) != NVML_SUCCESS || !ndev) {
		n->shutdown();
		goto fail;
	}
	for (unsigned int i = 0; i < ndev && n->ndev < NVML_MAX_DEVICES; i++)
		if (handle(i, &n->dev[n->ndev]) == NVML_SUCCESS)
			n->ndev++;
	*out = n;
	return 0;
fail:
	dlclose(n->lib);
	free(n);
	return err;
}

int nvml_process_memory(struct nvml *n, pid_t pid, uint64_t *bytes)
{
	bool found = false;

	*bytes = 0;
	for (unsigned d = 0; d < n->ndev; d++) {
		unsigned int cnt = NVML_MAX_PROCS;
		nvml_ret r = n->procs(n->dev[d], &cnt, n->info);
		if (r != NVML_SUCCESS && r != NVML_ERROR_INSUFFICIENT_SIZE)
			continue;
		for (unsigned int i = 0; i < cnt && i < NVML_MAX_PROCS; i++) {
			if (n->info[i].pid != (unsigned int)pid ||
			    n->info[i].used_gpu_memory == NVML_VALUE_NOT_AVAILABLE)
				continue;
			*bytes += n->info[i].used_gpu_memory;
			found = true;
		}
	}
	return found ? 0 : -ENOENT;
}

void nvml_close(struct nvml *n)
{
	if (!n)
		return;
	n->shutdown();
	dlclose(n->lib);
	free(n);
}
