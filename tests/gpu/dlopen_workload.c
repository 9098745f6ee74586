// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A process that loads the CUDA driver only when told: it waits for SIGUSR1,
 * then dlopens LIB, launches N kernels (the last one refused), allocates and
 * frees device memory, unloads, and exits. The test attaches tally before
 * the signal: a driver mapped after the attach must still be counted.
 *   dlopen_workload LIB N READY_FILE [before]
 * LIB is the driver, or a library that loads it (libgpu_plugin.so: by its
 * soname, wherever the dynamic loader finds it). With `before`, the driver
 * is loaded and the work done once before READY_FILE, and once more after
 * the signal: a late attach comes between them. 120 ms after the first
 * round, one call that does nothing (a free of 0): a CUPTI library hands
 * over its idle batch at its next callback.
 */
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

typedef int (*init_fn)(unsigned);
typedef int (*alloc_fn)(unsigned long long *, size_t);
typedef int (*free_fn)(unsigned long long);
typedef int (*load_fn)(void **, const void *);
typedef int (*unload_fn)(void *);
typedef int (*getfn_fn)(void **, void *, const char *);
typedef int (*launch_fn)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
			 unsigned, void *, void **, void **);

static volatile sig_atomic_t go;
static void on_usr1(int sig)
{
	(void)sig;
	go = 1;
}

static void *load_driver(const char *lib)
{
	size_t n = strlen(lib);
	const char *plugin = "libgpu_plugin.so";

	if (n >= strlen(plugin) && !strcmp(lib + n - strlen(plugin), plugin)) {
		void *p = dlopen(lib, RTLD_NOW);
		void *(*driver)(void);
		void *sym = p ? dlsym(p, "gpu_plugin_driver") : NULL;
		memcpy(&driver, &sym, sizeof(sym));
		return driver ? driver() : NULL;
	}
	return dlopen(lib, RTLD_NOW);
}

/* cuInit, a module, 1 MiB, n launches (the last refused), all released. */
static int work(void *lib, int n)
{
	static const char ptx[] = "//\n.version 8.0\n.target sm_90\n.address_size 64\n";
	init_fn cu_init = (init_fn)dlsym(lib, "cuInit");
	alloc_fn cu_alloc = (alloc_fn)dlsym(lib, "cuMemAlloc_v2");
	free_fn cu_free = (free_fn)dlsym(lib, "cuMemFree_v2");
	load_fn cu_load = (load_fn)dlsym(lib, "cuModuleLoadData");
	getfn_fn cu_getfn = (getfn_fn)dlsym(lib, "cuModuleGetFunction");
	launch_fn cu_launch = (launch_fn)dlsym(lib, "cuLaunchKernel");
	unload_fn cu_unload = (unload_fn)dlsym(lib, "cuModuleUnload");
	if (!cu_init || !cu_alloc || !cu_free || !cu_load || !cu_getfn || !cu_launch || !cu_unload)
		return 1;
	void *mod = NULL, *fn = NULL;
	unsigned long long d = 0;
	if (cu_init(0) || cu_load(&mod, ptx) || cu_getfn(&fn, mod, "k") || cu_alloc(&d, 1 << 20))
		return 1;
	for (int i = 0; i < n; i++)
		cu_launch(fn, i == n - 1 ? 0 : 1, 1, 1, 32, 1, 1, 0, NULL, NULL, NULL);
	return cu_free(d) || cu_unload(mod) ? 1 : 0;
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_usr1 };
	sigset_t none;
	void *lib = NULL;
	bool before = argc == 5 && !strcmp(argv[4], "before");

	if (argc != 4 && !before)
		return 2;
	sigemptyset(&sa.sa_mask);
	sigaction(SIGUSR1, &sa, NULL);
	int n = atoi(argv[2]);
	if (before && (!(lib = load_driver(argv[1])) || work(lib, n)))
		return 1;
	if (before) {
		free_fn cu_free = (free_fn)dlsym(lib, "cuMemFree_v2");
		usleep(120 * 1000);
		cu_free(0);
	}
	int fd = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0 || close(fd))
		return 1;
	sigemptyset(&none);
	while (!go)
		sigsuspend(&none);
	if (!lib && !(lib = load_driver(argv[1])))
		return 1;
	return work(lib, n);
}
