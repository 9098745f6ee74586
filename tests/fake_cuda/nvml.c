// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fake NVIDIA management library, libnvidia-ml.so.1, beside the fake
 * driver (libcuda.c), for tally's device_memory_used on machines without a
 * GPU: one device, whose compute processes are those the fake driver keeps
 * a file for in $FAKE_CUDA_STATE (PID, holding its live device bytes), and
 * that still run. Only what tally calls, with NVML's signatures.
 */
#include <dirent.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

#define NVML_API __attribute__((visibility("default")))
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INSUFFICIENT_SIZE 7

typedef struct nvml_device_st *nvmlDevice_t;
typedef struct {
	unsigned int pid;
	unsigned long long usedGpuMemory;
	unsigned int gpuInstanceId;
	unsigned int computeInstanceId;
} nvmlProcessInfo_t;

static int inits;
static struct nvml_device_st {
	int index;
} device0;

NVML_API int nvmlInit_v2(void);
NVML_API int nvmlShutdown(void);
NVML_API int nvmlDeviceGetCount_v2(unsigned int *count);
NVML_API int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device);
NVML_API int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
						     nvmlProcessInfo_t *infos);

int nvmlInit_v2(void)
{
	inits++;
	return NVML_SUCCESS;
}

int nvmlShutdown(void)
{
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	inits--;
	return NVML_SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned int *count)
{
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	*count = 1;
	return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)
{
	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	if (index != 0 || !device)
		return NVML_ERROR_INVALID_ARGUMENT;
	*device = &device0;
	return NVML_SUCCESS;
}

int nvmlDeviceGetComputeRunningProcesses_v3(nvmlDevice_t device, unsigned int *count,
					    nvmlProcessInfo_t *infos)
{
	const char *dir = getenv("FAKE_CUDA_STATE");
	unsigned int n = 0;
	struct dirent *e;
	DIR *d;

	if (!inits)
		return NVML_ERROR_UNINITIALIZED;
	if (device != &device0 || !count)
		return NVML_ERROR_INVALID_ARGUMENT;
	d = dir ? opendir(dir) : NULL;
	while (d && (e = readdir(d))) {
		char path[4096];
		unsigned long long bytes;
		int pid = atoi(e->d_name);
		FILE *f;
		if (pid <= 0 || kill(pid, 0))
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		f = fopen(path, "re");
		if (!f)
			continue;
		if (fscanf(f, "%llu", &bytes) == 1) {
			if (n < *count && infos)
				infos[n] = (nvmlProcessInfo_t){ (unsigned int)pid, bytes, 0, 0 };
			n++;
		}
		fclose(f);
	}
	if (d)
		closedir(d);
	int rc = n > *count ? NVML_ERROR_INSUFFICIENT_SIZE : NVML_SUCCESS;
	*count = n;
	return rc;
}
