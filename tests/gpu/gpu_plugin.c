// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* A library that loads the CUDA driver for the program that loads it (as a
 * framework's plugin does): by its soname, wherever the dynamic loader finds
 * it (tests/gpu/dlopen_workload.c). */
#include <dlfcn.h>

__attribute__((visibility("default"))) void *gpu_plugin_driver(void);

void *gpu_plugin_driver(void)
{
	return dlopen("libcuda.so.1", RTLD_NOW);
}
