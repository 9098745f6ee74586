// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fake CUDA driver, libcuda.so.1, for the GPU tests on machines with no GPU.
 * It exports the real driver's symbols with their real signatures
 * (cuda_abi.h), so that tally's uprobes on libcuda attach and read arguments,
 * return values and out-pointers exactly as on the real driver.
 *
 * Contract for the probes: every exported entry point is a real function of
 * its own (noinline, frame pointer prologue, built with -fno-ipa-icf) and
 * calls no other exported entry point, since that would go through the PLT
 * and hit a second probe: the shared work lives in static helpers. One call
 * of an entry point is exactly one uprobe hit.
 *
 * Behaviour, deterministic and close enough to the real driver's:
 *   - cuInit loads CUDA_INJECTION64_PATH and calls its InitializeInjection,
 *     as the real driver does (the real CUPTI then refuses to work with a
 *     fake driver: tally's fallback to its driver probes).
 *   - With FAKE_CUDA_STATE set, the process's live device bytes are kept in
 *     $FAKE_CUDA_STATE/PID, which the fake NVML (nvml.c) reports.
 *   - cuInit(0) first; every other call but cuDriverGetVersion and
 *     cuGetErrorString returns CUDA_ERROR_NOT_INITIALIZED before it.
 *     Contexts are handed out but not enforced (no current context needed).
 *   - Synchronisation (cuCtxSynchronize, cuStreamSynchronize[_ptsz],
 *     cuEventSynchronize) waits the way the real driver's spin-then-yield
 *     does, with FAKE_SYNC_YIELDS calls of libc's sched_yield: yields that
 *     tally must not count as the application's own (os_yields). Any stream
 *     is accepted (NULL is the default one), any non-NULL event.
 *   - Device allocations (cuMemAlloc*, pitch, managed, async, from a pool)
 *     return distinct 256-aligned fake addresses from a counter that never
 *     reuses one, and remember their sizes; any device free takes any of
 *     them. Size 0 is CUDA_ERROR_INVALID_VALUE. cuMemAllocPitch's pitch is
 *     the width rounded up to 512, and it reserves pitch * height bytes.
 *     cuMemCreate wants a pinned, device-located prop and a size that is a
 *     multiple of 2 MiB (the granularity) and returns a handle.
 *   - Host allocations really allocate (page-aligned), so the pointers work;
 *     cuMemHostRegister takes any readable range not already registered.
 *   - A free, release or unregister of something unknown (never allocated,
 *     already freed, or of the other kind) returns CUDA_ERROR_INVALID_VALUE
 *     (unregister: CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED) and changes nothing.
 *   - Images: any non-NULL image loads (NULL: CUDA_ERROR_INVALID_VALUE);
 *     the fake neither parses nor keeps it. Functions and kernels take any
 *     non-empty name and remember it (cuFuncGetName); a CUkernel may be cast
 *     to CUfunction and launched. Unloading frees the module's functions.
 *   - Launches succeed unless the function is NULL or gridDimX is 0 (Ex: the
 *     config is NULL or its gridDimX is 0; graph: the exec is NULL; multi-
 *     device: the list is NULL, numDevices is not 1 (there is one device) or
 *     an entry is invalid): CUDA_ERROR_INVALID_VALUE.
 */
#include <fcntl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cuda_abi.h"

#define FAKE_API __attribute__((visibility("default"), noinline))
/*
 * First statement of every entry point: using the frame address makes the
 * compiler open the function with `push %rbp; mov %rsp,%rbp` even where it
 * needs no frame (leaf functions), so each probed instruction is one the
 * kernel emulates rather than single-steps (docs/DESIGN.md §5). Built with
 * -fcf-protection=none so that no endbr64 comes before it.
 */
#define FAKE_PROLOGUE() __asm__ volatile("" : : "r"(__builtin_frame_address(0)))

#define FAKE_DRIVER_VERSION 12080
#define FAKE_DPTR_BASE 0x302000000ull /* where the fake device address space starts */
#define FAKE_DPTR_ALIGN 256ull
#define FAKE_PITCH_ALIGN 512ull
#define FAKE_VMM_GRANULARITY (2ull << 20)
#define FAKE_HANDLE_BASE 0x1000ull /* first cuMemCreate handle */
#define FAKE_SYNC_YIELDS 2	   /* sched_yield calls per synchronize */

enum fake_block_kind {
	FAKE_DEVICE,	 /* cuMemAlloc*: addr is the fake device address */
	FAKE_VMM,	 /* cuMemCreate: addr is the handle */
	FAKE_HOST_ALLOC, /* cuMemHostAlloc, cuMemAllocHost: addr is the malloc'd pointer */
	FAKE_HOST_REG,	 /* cuMemHostRegister: addr is the caller's pointer */
};

/* One live allocation, registration or handle. */
struct fake_block {
	struct fake_block *next;
	enum fake_block_kind kind;
	uint64_t addr; /* unique among live blocks of its kind */
	size_t size;   /* bytes, as reserved (pitch * height for a pitched block) */
};

struct CUfunc_st {
	struct CUfunc_st *next; /* in the owning module's list */
	char name[];		/* NUL-terminated, as given */
};

/* A module or a library (cuLibrary*): they share the layout, not the handles. */
struct CUmod_st {
	struct CUmod_st *next;
	bool library;
	struct CUfunc_st *funcs; /* functions or kernels got from it; freed with it */
};

struct CUctx_st {
	struct CUctx_st *next;
	CUdevice dev;
};

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static bool fake_initialized;
static struct fake_block *fake_blocks;
static struct CUmod_st *fake_modules;
static struct CUctx_st *fake_contexts;
static uint64_t fake_next_dptr = FAKE_DPTR_BASE;
static uint64_t fake_next_handle = FAKE_HANDLE_BASE;
static uint64_t fake_device_live; /* bytes of FAKE_DEVICE and FAKE_VMM blocks */

/* What the real driver tells NVML: this process's device memory, written to
 * $FAKE_CUDA_STATE/PID for the fake libnvidia-ml.so.1 (tests/fake_cuda/
 * nvml.c) when that is set. Under fake_lock. */
static void device_live_add(enum fake_block_kind kind, int64_t bytes)
{
	const char *dir = getenv("FAKE_CUDA_STATE");
	char path[4096];
	FILE *f;

	if (kind != FAKE_DEVICE && kind != FAKE_VMM)
		return;
	fake_device_live += (uint64_t)bytes;
	if (!dir || !*dir ||
	    snprintf(path, sizeof(path), "%s/%d", dir, (int)getpid()) >= (int)sizeof(path))
		return;
	f = fopen(path, "we");
	if (f) {
		fprintf(f, "%llu\n", (unsigned long long)fake_device_live);
		fclose(f);
	}
}

static bool initialized(void)
{
	return __atomic_load_n(&fake_initialized, __ATOMIC_ACQUIRE);
}

static uint64_t round_up(uint64_t n, uint64_t align)
{
	return (n + align - 1) / align * align;
}

/* Under fake_lock. */
static struct fake_block **block_find(enum fake_block_kind kind, uint64_t addr)
{
	for (struct fake_block **b = &fake_blocks; *b; b = &(*b)->next)
		if ((*b)->kind == kind && (*b)->addr == addr)
			return b;
	return NULL;
}

/* Under fake_lock. */
static bool block_add(enum fake_block_kind kind, uint64_t addr, size_t size)
{
	struct fake_block *b = malloc(sizeof(*b));

	if (!b)
		return false;
	b->kind = kind;
	b->addr = addr;
	b->size = size;
	b->next = fake_blocks;
	fake_blocks = b;
	device_live_add(kind, (int64_t)size);
	return true;
}

/* Forgets the block of that kind at addr; false when there is none. */
static bool block_remove(enum fake_block_kind kind, uint64_t addr)
{
	struct fake_block **b, *gone = NULL;

	pthread_mutex_lock(&fake_lock);
	b = block_find(kind, addr);
	if (b) {
		gone = *b;
		*b = gone->next;
		device_live_add(kind, -(int64_t)gone->size);
	}
	pthread_mutex_unlock(&fake_lock);
	free(gone);
	return gone != NULL;
}

static CUresult device_alloc(CUdeviceptr *dptr, size_t size)
{
	CUresult err = CUDA_SUCCESS;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!dptr || !size)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	uint64_t addr = fake_next_dptr;
	if (block_add(FAKE_DEVICE, addr, size)) {
		fake_next_dptr += round_up(size, FAKE_DPTR_ALIGN);
		*dptr = addr;
	} else {
		err = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&fake_lock);
	return err;
}

static CUresult device_free(CUdeviceptr dptr)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	return block_remove(FAKE_DEVICE, dptr) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult host_alloc(void **pp, size_t size)
{
	void *p;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pp || !size)
		return CUDA_ERROR_INVALID_VALUE;
	if (posix_memalign(&p, 4096, size))
		return CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_lock(&fake_lock);
	bool ok = block_add(FAKE_HOST_ALLOC, (uintptr_t)p, size);
	pthread_mutex_unlock(&fake_lock);
	if (!ok) {
		free(p);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	*pp = p;
	return CUDA_SUCCESS;
}

static CUresult module_load(struct CUmod_st **out, const void *image, bool library)
{
	struct CUmod_st *m;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !image)
		return CUDA_ERROR_INVALID_VALUE;
	m = calloc(1, sizeof(*m));
	if (!m)
		return CUDA_ERROR_OUT_OF_MEMORY;
	m->library = library;
	pthread_mutex_lock(&fake_lock);
	m->next = fake_modules;
	fake_modules = m;
	pthread_mutex_unlock(&fake_lock);
	*out = m;
	return CUDA_SUCCESS;
}

static CUresult module_unload(struct CUmod_st *m, bool library)
{
	struct CUmod_st **p;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&fake_lock);
	for (p = &fake_modules; *p; p = &(*p)->next)
		if (*p == m && m->library == library)
			break;
	if (!*p) {
		pthread_mutex_unlock(&fake_lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	*p = m->next;
	pthread_mutex_unlock(&fake_lock);
	while (m->funcs) {
		struct CUfunc_st *f = m->funcs;
		m->funcs = f->next;
		free(f);
	}
	free(m);
	return CUDA_SUCCESS;
}

static CUresult module_get(struct CUfunc_st **out, struct CUmod_st *m, const char *name,
			   bool library)
{
	struct CUmod_st *it;
	struct CUfunc_st *f;
	size_t len;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!out || !name)
		return CUDA_ERROR_INVALID_VALUE;
	len = strlen(name);
	if (!len)
		return CUDA_ERROR_NOT_FOUND;
	pthread_mutex_lock(&fake_lock);
	for (it = fake_modules; it; it = it->next)
		if (it == m && it->library == library)
			break;
	if (!it) {
		pthread_mutex_unlock(&fake_lock);
		return CUDA_ERROR_INVALID_HANDLE;
	}
	f = malloc(sizeof(*f) + len + 1);
	if (!f) {
		pthread_mutex_unlock(&fake_lock);
		return CUDA_ERROR_OUT_OF_MEMORY;
	}
	memcpy(f->name, name, len + 1);
	f->next = m->funcs;
	m->funcs = f;
	pthread_mutex_unlock(&fake_lock);
	*out = f;
	return CUDA_SUCCESS;
}

/* The wait of a synchronize call, as a spinning driver's. */
static CUresult sync_wait(void)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	for (int i = 0; i < FAKE_SYNC_YIELDS; i++)
		sched_yield();
	return CUDA_SUCCESS;
}

static CUresult launch_check(CUfunction f, unsigned int grid_x)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!f || !grid_x)
		return CUDA_ERROR_INVALID_VALUE;
	return CUDA_SUCCESS;
}

static CUresult launch_ex_check(const CUlaunchConfig *config, CUfunction f)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!config || (config->numAttrs && !config->attrs))
		return CUDA_ERROR_INVALID_VALUE;
	return launch_check(f, config->gridDimX);
}

static CUresult graph_launch_check(CUgraphExec exec)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	return exec ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

static CUresult alloc_async(CUdeviceptr *dptr, size_t size, CUmemoryPool pool, bool need_pool)
{
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (need_pool && !pool)
		return CUDA_ERROR_INVALID_VALUE;
	return device_alloc(dptr, size);
}

/* --- CUPTI's view --- */

/* What the real driver does for its CUPTI subscribers, for the fake CUPTI
 * (tests/cupti/fake_cupti.c): at the exit of cuLaunchKernel, cuMemAlloc_v2,
 * cuMemFree_v2, cuModuleLoadData and cuModuleUnload, the hook it set gets
 * the entry point's name, its arguments' addresses in order and its result. */
typedef void (*fake_api_hook)(const char *name, void *const *args, CUresult rc);
static fake_api_hook api_hook;

FAKE_API void fakeCudaSetApiHook(fake_api_hook hook);
void fakeCudaSetApiHook(fake_api_hook hook)
{
	__atomic_store_n(&api_hook, hook, __ATOMIC_RELEASE);
}

#define API_EXIT(rc, ...)                                                                          \
	do {                                                                                       \
		fake_api_hook h_ = __atomic_load_n(&api_hook, __ATOMIC_ACQUIRE);                   \
		void *const a_[] = { __VA_ARGS__ };                                                \
		if (h_)                                                                            \
			h_(__func__, a_, rc);                                                      \
	} while (0)

/* --- initialisation, devices, contexts --- */

/* As the real driver does at its first cuInit: the library named by
 * CUDA_INJECTION64_PATH is loaded and its InitializeInjection called (a
 * profiler's hook: tally's CUPTI library, when tally started the program). */
static void load_injection(void)
{
	static bool done;
	const char *path = getenv("CUDA_INJECTION64_PATH");
	void *lib;
	int (*init)(void);

	if (__atomic_exchange_n(&done, true, __ATOMIC_ACQ_REL) || !path || !*path)
		return;
	lib = dlopen(path, RTLD_NOW);
	void *sym = lib ? dlsym(lib, "InitializeInjection") : NULL;
	memcpy(&init, &sym, sizeof(sym));
	if (init)
		init();
}

FAKE_API CUresult cuInit(unsigned int Flags)
{
	FAKE_PROLOGUE();
	if (Flags)
		return CUDA_ERROR_INVALID_VALUE;
	load_injection();
	__atomic_store_n(&fake_initialized, true, __ATOMIC_RELEASE);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDriverGetVersion(int *driverVersion)
{
	FAKE_PROLOGUE();
	if (!driverVersion)
		return CUDA_ERROR_INVALID_VALUE;
	*driverVersion = FAKE_DRIVER_VERSION;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuDeviceGet(CUdevice *device, int ordinal)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!device)
		return CUDA_ERROR_INVALID_VALUE;
	if (ordinal != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	*device = 0;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxCreate_v2(CUcontext *pctx, unsigned int flags, CUdevice dev)
{
	FAKE_PROLOGUE();
	struct CUctx_st *c;

	(void)flags;
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pctx)
		return CUDA_ERROR_INVALID_VALUE;
	if (dev != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	c = calloc(1, sizeof(*c));
	if (!c)
		return CUDA_ERROR_OUT_OF_MEMORY;
	c->dev = dev;
	pthread_mutex_lock(&fake_lock);
	c->next = fake_contexts;
	fake_contexts = c;
	pthread_mutex_unlock(&fake_lock);
	*pctx = c;
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxDestroy_v2(CUcontext ctx)
{
	FAKE_PROLOGUE();
	struct CUctx_st **p;
	bool found = false;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	pthread_mutex_lock(&fake_lock);
	for (p = &fake_contexts; *p; p = &(*p)->next) {
		if (*p == ctx) {
			*p = ctx->next;
			found = true;
			break;
		}
	}
	pthread_mutex_unlock(&fake_lock);
	if (!found)
		return CUDA_ERROR_INVALID_CONTEXT;
	free(ctx);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuCtxSynchronize(void)
{
	FAKE_PROLOGUE();
	return sync_wait();
}

FAKE_API CUresult cuStreamSynchronize(CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return sync_wait();
}

FAKE_API CUresult cuStreamSynchronize_ptsz(CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return sync_wait();
}

FAKE_API CUresult cuEventSynchronize(CUevent hEvent)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!hEvent)
		return CUDA_ERROR_INVALID_HANDLE;
	return sync_wait();
}

FAKE_API CUresult cuGetErrorString(CUresult error, const char **pStr)
{
	FAKE_PROLOGUE();
	static const struct {
		CUresult code;
		const char *text;
	} texts[] = {
		{ CUDA_SUCCESS, "no error" },
		{ CUDA_ERROR_INVALID_VALUE, "invalid argument" },
		{ CUDA_ERROR_OUT_OF_MEMORY, "out of memory" },
		{ CUDA_ERROR_NOT_INITIALIZED, "initialization error" },
		{ CUDA_ERROR_INVALID_DEVICE, "invalid device ordinal" },
		{ CUDA_ERROR_INVALID_IMAGE, "device kernel image is invalid" },
		{ CUDA_ERROR_INVALID_CONTEXT, "invalid device context" },
		{ CUDA_ERROR_FILE_NOT_FOUND, "file not found" },
		{ CUDA_ERROR_INVALID_HANDLE, "invalid resource handle" },
		{ CUDA_ERROR_NOT_FOUND, "named symbol not found" },
		{ CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
		  "part or all of the requested memory range is already mapped" },
		{ CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, "pointer does not correspond to a "
							 "registered memory region" },
		{ CUDA_ERROR_NOT_SUPPORTED, "operation not supported" },
		{ CUDA_ERROR_UNKNOWN, "unknown error" },
	};

	if (!pStr)
		return CUDA_ERROR_INVALID_VALUE;
	for (size_t i = 0; i < sizeof(texts) / sizeof(texts[0]); i++) {
		if (texts[i].code == error) {
			*pStr = texts[i].text;
			return CUDA_SUCCESS;
		}
	}
	*pStr = NULL;
	return CUDA_ERROR_INVALID_VALUE;
}

/* --- modules, libraries, functions --- */

FAKE_API CUresult cuModuleLoadData(CUmodule *module, const void *image)
{
	FAKE_PROLOGUE();
	CUresult rc = module_load(module, image, false);
	API_EXIT(rc, &module, &image);
	return rc;
}

FAKE_API CUresult cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned int numOptions,
				     CUjit_option *options, void **optionValues)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (numOptions && (!options || !optionValues))
		return CUDA_ERROR_INVALID_VALUE;
	return module_load(module, image, false);
}

FAKE_API CUresult cuModuleLoadFatBinary(CUmodule *module, const void *fatCubin)
{
	FAKE_PROLOGUE();
	return module_load(module, fatCubin, false);
}

FAKE_API CUresult cuModuleUnload(CUmodule hmod)
{
	FAKE_PROLOGUE();
	CUresult rc = module_unload(hmod, false);
	API_EXIT(rc, &hmod);
	return rc;
}

FAKE_API CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name)
{
	FAKE_PROLOGUE();
	return module_get(hfunc, hmod, name, false);
}

FAKE_API CUresult cuFuncGetName(const char **name, CUfunction hfunc)
{
	FAKE_PROLOGUE();
	CUresult err = CUDA_ERROR_INVALID_HANDLE;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!name)
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	for (struct CUmod_st *m = fake_modules; m && err; m = m->next) {
		for (struct CUfunc_st *f = m->funcs; f; f = f->next) {
			if (f == hfunc) {
				*name = f->name;
				err = CUDA_SUCCESS;
				break;
			}
		}
	}
	pthread_mutex_unlock(&fake_lock);
	return err;
}

FAKE_API CUresult cuLibraryLoadData(CUlibrary *library, const void *code, CUjit_option *jitOptions,
				    void **jitOptionsValues, unsigned int numJitOptions,
				    CUlibraryOption *libraryOptions, void **libraryOptionValues,
				    unsigned int numLibraryOptions)
{
	FAKE_PROLOGUE();
	struct CUmod_st *m;
	CUresult err;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!library || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	err = module_load(&m, code, true);
	if (!err)
		*library = (CUlibrary)m;
	return err;
}

FAKE_API CUresult cuLibraryLoadFromFile(CUlibrary *library, const char *fileName,
					CUjit_option *jitOptions, void **jitOptionsValues,
					unsigned int numJitOptions, CUlibraryOption *libraryOptions,
					void **libraryOptionValues, unsigned int numLibraryOptions)
{
	FAKE_PROLOGUE();
	struct CUmod_st *m;
	struct stat st;
	CUresult err;
	int fd;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!library || !fileName || (numJitOptions && (!jitOptions || !jitOptionsValues)) ||
	    (numLibraryOptions && (!libraryOptions || !libraryOptionValues)))
		return CUDA_ERROR_INVALID_VALUE;
	fd = open(fileName, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return CUDA_ERROR_FILE_NOT_FOUND;
	err = fstat(fd, &st) || !S_ISREG(st.st_mode) || !st.st_size ? CUDA_ERROR_INVALID_IMAGE :
								      CUDA_SUCCESS;
	close(fd);
	if (err)
		return err;
	err = module_load(&m, fileName, true);
	if (!err)
		*library = (CUlibrary)m;
	return err;
}

FAKE_API CUresult cuLibraryUnload(CUlibrary library)
{
	FAKE_PROLOGUE();
	return module_unload((struct CUmod_st *)library, true);
}

FAKE_API CUresult cuLibraryGetKernel(CUkernel *pKernel, CUlibrary library, const char *name)
{
	FAKE_PROLOGUE();
	struct CUfunc_st *f;
	CUresult err;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pKernel)
		return CUDA_ERROR_INVALID_VALUE;
	err = module_get(&f, (struct CUmod_st *)library, name, true);
	if (!err)
		*pKernel = (CUkernel)f;
	return err;
}

/* --- launches --- */

FAKE_API CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				 unsigned int gridDimZ, unsigned int blockDimX,
				 unsigned int blockDimY, unsigned int blockDimZ,
				 unsigned int sharedMemBytes, CUstream hStream, void **kernelParams,
				 void **extra)
{
	FAKE_PROLOGUE();
	(void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	CUresult rc = launch_check(f, gridDimX);
	API_EXIT(rc, &f, &gridDimX, &gridDimY, &gridDimZ, &blockDimX, &blockDimY, &blockDimZ,
		 &sharedMemBytes, &hStream, &kernelParams, &extra);
	return rc;
}

FAKE_API CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
				      unsigned int gridDimZ, unsigned int blockDimX,
				      unsigned int blockDimY, unsigned int blockDimZ,
				      unsigned int sharedMemBytes, CUstream hStream,
				      void **kernelParams, void **extra)
{
	FAKE_PROLOGUE();
	(void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)hStream, (void)kernelParams, (void)extra;
	return launch_check(f, gridDimX);
}

FAKE_API CUresult cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction f, void **kernelParams,
				   void **extra)
{
	FAKE_PROLOGUE();
	(void)kernelParams, (void)extra;
	return launch_ex_check(config, f);
}

FAKE_API CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig *config, CUfunction f,
					void **kernelParams, void **extra)
{
	FAKE_PROLOGUE();
	(void)kernelParams, (void)extra;
	return launch_ex_check(config, f);
}

FAKE_API CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX,
					    unsigned int gridDimY, unsigned int gridDimZ,
					    unsigned int blockDimX, unsigned int blockDimY,
					    unsigned int blockDimZ, unsigned int sharedMemBytes,
					    CUstream hStream, void **kernelParams)
{
	FAKE_PROLOGUE();
	(void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)hStream, (void)kernelParams;
	return launch_check(f, gridDimX);
}

FAKE_API CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX,
						 unsigned int gridDimY, unsigned int gridDimZ,
						 unsigned int blockDimX, unsigned int blockDimY,
						 unsigned int blockDimZ,
						 unsigned int sharedMemBytes, CUstream hStream,
						 void **kernelParams)
{
	FAKE_PROLOGUE();
	(void)gridDimY, (void)gridDimZ, (void)blockDimX, (void)blockDimY, (void)blockDimZ;
	(void)sharedMemBytes, (void)hStream, (void)kernelParams;
	return launch_check(f, gridDimX);
}

FAKE_API CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS *launchParamsList,
						       unsigned int numDevices, unsigned int flags)
{
	FAKE_PROLOGUE();
	(void)flags;
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	/* one fake device, so exactly one entry */
	if (!launchParamsList || numDevices != 1)
		return CUDA_ERROR_INVALID_VALUE;
	return launch_check(launchParamsList[0].function, launchParamsList[0].gridDimX);
}

FAKE_API CUresult cuGraphLaunch(CUgraphExec hGraphExec, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return graph_launch_check(hGraphExec);
}

FAKE_API CUresult cuGraphLaunch_ptsz(CUgraphExec hGraphExec, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return graph_launch_check(hGraphExec);
}

/* --- device memory --- */

FAKE_API CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize)
{
	FAKE_PROLOGUE();
	CUresult rc = device_alloc(dptr, bytesize);
	API_EXIT(rc, &dptr, &bytesize);
	return rc;
}

FAKE_API CUresult cuMemAllocPitch_v2(CUdeviceptr *dptr, size_t *pPitch, size_t WidthInBytes,
				     size_t Height, unsigned int ElementSizeBytes)
{
	FAKE_PROLOGUE();
	size_t pitch;
	CUresult err;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!pPitch || !WidthInBytes || !Height ||
	    (ElementSizeBytes != 4 && ElementSizeBytes != 8 && ElementSizeBytes != 16))
		return CUDA_ERROR_INVALID_VALUE;
	pitch = round_up(WidthInBytes, FAKE_PITCH_ALIGN);
	if (Height > SIZE_MAX / pitch)
		return CUDA_ERROR_OUT_OF_MEMORY;
	err = device_alloc(dptr, pitch * Height);
	if (!err)
		*pPitch = pitch;
	return err;
}

FAKE_API CUresult cuMemAllocManaged(CUdeviceptr *dptr, size_t bytesize, unsigned int flags)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (flags != CU_MEM_ATTACH_GLOBAL && flags != CU_MEM_ATTACH_HOST)
		return CUDA_ERROR_INVALID_VALUE;
	return device_alloc(dptr, bytesize);
}

FAKE_API CUresult cuMemAllocAsync(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return alloc_async(dptr, bytesize, NULL, false);
}

FAKE_API CUresult cuMemAllocAsync_ptsz(CUdeviceptr *dptr, size_t bytesize, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return alloc_async(dptr, bytesize, NULL, false);
}

FAKE_API CUresult cuMemAllocFromPoolAsync(CUdeviceptr *dptr, size_t bytesize, CUmemoryPool pool,
					  CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return alloc_async(dptr, bytesize, pool, true);
}

FAKE_API CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr *dptr, size_t bytesize,
					       CUmemoryPool pool, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return alloc_async(dptr, bytesize, pool, true);
}

FAKE_API CUresult cuMemFree_v2(CUdeviceptr dptr)
{
	FAKE_PROLOGUE();
	CUresult rc = device_free(dptr);
	API_EXIT(rc, &dptr);
	return rc;
}

FAKE_API CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return device_free(dptr);
}

FAKE_API CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream)
{
	FAKE_PROLOGUE();
	(void)hStream;
	return device_free(dptr);
}

FAKE_API CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size,
			      const CUmemAllocationProp *prop, unsigned long long flags)
{
	FAKE_PROLOGUE();
	CUresult err = CUDA_SUCCESS;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!handle || !prop || flags || !size || size % FAKE_VMM_GRANULARITY ||
	    prop->type != CU_MEM_ALLOCATION_TYPE_PINNED ||
	    prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE)
		return CUDA_ERROR_INVALID_VALUE;
	if (prop->location.id != 0)
		return CUDA_ERROR_INVALID_DEVICE;
	pthread_mutex_lock(&fake_lock);
	uint64_t h = fake_next_handle;
	if (block_add(FAKE_VMM, h, size)) {
		fake_next_handle++;
		*handle = h;
	} else {
		err = CUDA_ERROR_OUT_OF_MEMORY;
	}
	pthread_mutex_unlock(&fake_lock);
	return err;
}

FAKE_API CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	return block_remove(FAKE_VMM, handle) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

/* --- page-locked host memory --- */

FAKE_API CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int Flags)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (Flags & ~0x7u) /* PORTABLE, DEVICEMAP, WRITECOMBINED */
		return CUDA_ERROR_INVALID_VALUE;
	return host_alloc(pp, bytesize);
}

FAKE_API CUresult cuMemAllocHost_v2(void **pp, size_t bytesize)
{
	FAKE_PROLOGUE();
	return host_alloc(pp, bytesize);
}

FAKE_API CUresult cuMemHostRegister_v2(void *p, size_t bytesize, unsigned int Flags)
{
	FAKE_PROLOGUE();
	CUresult err = CUDA_SUCCESS;
	uint64_t lo = (uintptr_t)p;

	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!p || !bytesize || Flags & ~0xfu) /* PORTABLE, DEVICEMAP, IOMEMORY, READ_ONLY */
		return CUDA_ERROR_INVALID_VALUE;
	pthread_mutex_lock(&fake_lock);
	for (struct fake_block *b = fake_blocks; b; b = b->next) {
		if (b->kind == FAKE_HOST_REG && lo < b->addr + b->size && b->addr < lo + bytesize) {
			err = CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
			break;
		}
	}
	if (!err && !block_add(FAKE_HOST_REG, lo, bytesize))
		err = CUDA_ERROR_OUT_OF_MEMORY;
	pthread_mutex_unlock(&fake_lock);
	return err;
}

FAKE_API CUresult cuMemFreeHost(void *p)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	if (!block_remove(FAKE_HOST_ALLOC, (uintptr_t)p))
		return CUDA_ERROR_INVALID_VALUE;
	free(p);
	return CUDA_SUCCESS;
}

FAKE_API CUresult cuMemHostUnregister(void *p)
{
	FAKE_PROLOGUE();
	if (!initialized())
		return CUDA_ERROR_NOT_INITIALIZED;
	return block_remove(FAKE_HOST_REG, (uintptr_t)p) ? CUDA_SUCCESS :
							   CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
}
