// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The GPU tests' target, linked against the fake libcuda.so.1
 * (tests/fake_cuda) and libtally.so. It drives every driver entry point that
 * tally probes, counts for itself what each instance should show
 * (docs/DESIGN.md §4), and writes that as JSON for the tests to compare with
 * tally's snapshot. Modes:
 *   run FILE    the work below; FILE; then frees and unloads everything
 *               (from the main thread, in root) and writes FILE.end; exits 0
 *   wait FILE   the same, but waits at a gate between FILE and the release
 *               (a target for a late attach: `tally snapshot -p PID`)
 *   late FILE   initialises (cuInit, a context, the groups), writes
 *               FILE.ready, waits at a gate, then goes on as `wait`; so a
 *               tracer attached at the first gate sees all the GPU work
 * A gate opens on a line (or EOF) on stdin, on SIGUSR1, or on SIGTERM or
 * SIGINT. EOF, SIGTERM and SIGINT open every later gate too. A stdin that is
 * /dev/null (a `cmd &` in a script) or closed is ignored: then only signals
 * open gates.
 *
 * The work. Groups "train" and "infer" each run on a thread of their own
 * (entered with tally_group_enter), while the main thread does the same in
 * root, each with its own sizes and counts (plans[] below), so a figure
 * charged to the wrong instance shows:
 *   images   cuModuleLoadData (PTX, cubin), cuModuleLoadDataEx (PTX),
 *            cuModuleLoadFatBinary (fatbin), cuLibraryLoadData (cubin,
 *            fatbin); the LoadDataEx module and the fatbin library are
 *            unloaded again by the same thread
 *   launches through each of the nine launch entry points, `ok` that succeed
 *            and `fail` that the fake refuses (gridDimX 0, NULL function,
 *            NULL config, NULL graph exec); the functions come from the
 *            modules and, cast from CUkernel, from the cubin library
 *   device   every allocation entry point, some freed again by the thread
 *   host     cuMemHostAlloc, cuMemAllocHost, cuMemHostRegister, some freed
 *   SDK      tally_yield() and tally_reject(), `yields` and `rejects` times
 *   OS       sched_yield(), `os_yields` times
 *   sync     cuCtxSynchronize, cuStreamSynchronize[_ptsz], cuEventSynchronize
 *            (the fake calls sched_yield inside each: the driver's own)
 * and calls that fail without effect: a NULL image, a size 0 or badly sized
 * allocation, frees, releases, unloads and unregisters of unknown or already
 * freed things. After the threads are joined the main thread, in root,
 * frees one device allocation of infer, one host allocation of train and
 * unloads one module of train: a release is charged to the instance that
 * allocated or loaded (bpf/contract/tally_events.h), not to the releasing thread.
 *
 * The figures, per instance (groups "root", "train", "infer", and the
 * process, their sum):
 *   kernels_launched          successful cuLaunchKernel, cuLaunchKernelEx,
 *                             cuLaunchCooperativeKernel and their _ptsz
 *                             variants, and cuLaunchCooperativeKernelMultiDevice
 *                             (always with numDevices 1: one launch per call)
 *   graph_launches            successful cuGraphLaunch and cuGraphLaunch_ptsz
 *   failed_launches           launch calls (any of the nine) that returned an error
 *   back_pressure_rejections  failed_launches + tally_reject() calls
 *   yield_count               tally_yield() calls
 *   os_yields                 the workload's own sched_yield() calls, not
 *                             those the fake makes inside its synchronize calls
 *   device_bytes_allocated    live bytes of cuMemAlloc_v2 (bytesize),
 *                             cuMemAllocPitch_v2 (returned pitch * Height),
 *                             cuMemAllocManaged, cuMemAllocAsync[_ptsz],
 *                             cuMemAllocFromPoolAsync[_ptsz] and cuMemCreate
 *                             (size), less those freed or released
 *   host_pinned_bytes         live bytes of cuMemHostAlloc, cuMemAllocHost_v2
 *                             and cuMemHostRegister_v2, less those freed or
 *                             unregistered
 *   bytes_pinned              live image bytes (bpf/image_size.h): PTX strlen
 *                             (without the NUL), cubin e_shoff + e_shnum *
 *                             e_shentsize (its section headers end it), fatbin
 *                             16 + the header's 64-bit size; less unloaded ones
 * Failed calls count nowhere except failed launches. In FILE.end every gauge
 * is 0 and the counters are those of FILE. JSON shape:
 *   { "phase": "live"|"end", "pid": N, "instance": {FIGURES},
 *     "groups": { "root": {FIGURES}, "train": {FIGURES}, "infer": {FIGURES} },
 *     "launches": { GROUP: { ENTRY_POINT: { "ok": N, "failed": N }, ... } } }
 */
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "../../alloc/include/tally.h"
#include "../../bpf/image_format.h"
#include "../fake_cuda/cuda_abi.h"

enum actor_id { ROOT, TRAIN, INFER, NACTORS };

/* What one actor does; sizes differ so that misattributed bytes show. */
struct plan {
	const char *group;	/* its tally group */
	const char *kernel;	/* the mangled name of its kernels */
	unsigned int ok;	/* successful launches per launch entry point */
	unsigned int fail;	/* refused launches per launch entry point */
	unsigned int yields;	/* tally_yield() calls */
	unsigned int rejects;	/* tally_reject() calls */
	unsigned int os_yields; /* sched_yield() calls */
	size_t scale;		/* multiplies every allocation size */
	size_t cubin_size;	/* bytes; a multiple of 64 */
	size_t fatbin_size;	/* bytes, header included; a multiple of 8 */
};

static const struct plan plans[NACTORS] = {
	[ROOT] = { "root", "_Z4initPfi", 2, 1, 1, 1, 2, 1, 2048, 4096 },
	[TRAIN] = { "train", "_Z6matmulPfS_S_i", 3, 2, 5, 2, 1, 2, 4096, 8192 },
	[INFER] = { "infer", "_Z7softmaxPfi", 4, 3, 3, 4, 4, 3, 6144, 12288 },
};

enum api {
	API_LAUNCH,
	API_LAUNCH_PTSZ,
	API_LAUNCH_EX,
	API_LAUNCH_EX_PTSZ,
	API_COOP,
	API_COOP_PTSZ,
	API_COOP_MULTI,
	API_GRAPH, /* graph launches from here on */
	API_GRAPH_PTSZ,
	NAPI,
};

static const char *const api_names[NAPI] = {
	"cuLaunchKernel",
	"cuLaunchKernel_ptsz",
	"cuLaunchKernelEx",
	"cuLaunchKernelEx_ptsz",
	"cuLaunchCooperativeKernel",
	"cuLaunchCooperativeKernel_ptsz",
	"cuLaunchCooperativeKernelMultiDevice",
	"cuGraphLaunch",
	"cuGraphLaunch_ptsz",
};

enum res_kind { RES_DEVICE, RES_HOST, RES_IMAGE };

/* How a resource is given back; each entry point has at least one. */
enum res_how {
	HOW_MEM_FREE,
	HOW_MEM_FREE_ASYNC,
	HOW_MEM_FREE_ASYNC_PTSZ,
	HOW_MEM_RELEASE,
	HOW_FREE_HOST,
	HOW_HOST_UNREGISTER,
	HOW_MODULE_UNLOAD,
	HOW_LIBRARY_UNLOAD,
};

/* A device allocation, pinned host range or loaded image. */
struct res {
	enum res_kind kind;
	enum res_how how;
	uint64_t bytes; /* what the instance is charged while live */
	bool live;
	CUdeviceptr dptr;		     /* device */
	CUmemGenericAllocationHandle handle; /* cuMemCreate */
	void *host;			     /* host; for a registered range, ours to free */
	CUmodule mod;
	CUlibrary lib;
};

#define MAX_RES 32

/* One actor's state; only its own thread touches it until it is joined. */
struct actor {
	const struct plan *plan;
	struct tally_group group;
	struct res res[MAX_RES];
	unsigned int nres;
	/* live ones that root releases for it at the end of the work */
	struct res *big_alloc, *host_alloc, *fat_module;
	uint64_t ok[NAPI], failed[NAPI];
	uint64_t yields, rejects, os_yields;
	char ptx[512];
	_Alignas(8) unsigned char cubin[8192];
	_Alignas(8) unsigned char fatbin[16384];
};

static struct actor actors[NACTORS];
/* The fake accepts any non-NULL exec and pool: it has no graph or pool API. */
static char graph_exec_token, mem_pool_token, event_token;
#define GRAPH_EXEC ((CUgraphExec)&graph_exec_token)
#define MEM_POOL ((CUmemoryPool)&mem_pool_token)

/* --- plumbing: messages without stdio streams, exact JSON output --- */

__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
	char msg[512];
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(msg, sizeof(msg) - 1, fmt, ap);
	va_end(ap);
	if (n < 0)
		n = 0;
	if ((size_t)n > sizeof(msg) - 2)
		n = sizeof(msg) - 2;
	msg[n++] = '\n';
	if (write(2, "gpu_workload: ", 14) < 0 || write(2, msg, (size_t)n) < 0)
		_exit(1);
	_exit(1);
}

static void expect(CUresult got, CUresult want, const char *what)
{
	if (got != want)
		die("%s returned %d, expected %d", what, (int)got, (int)want);
}

struct out {
	char buf[16384];
	size_t len;
};

__attribute__((format(printf, 2, 3))) static void out_add(struct out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(o->buf + o->len, sizeof(o->buf) - o->len, fmt, ap);
	va_end(ap);
	if (n < 0 || (size_t)n >= sizeof(o->buf) - o->len)
		die("JSON output too long");
	o->len += (size_t)n;
}

/* Writes the whole buffer to PATH through a rename, so a reader never sees half. */
static void out_write(const struct out *o, const char *path)
{
	char tmp[4096];
	size_t off = 0;
	int fd;

	if ((size_t)snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= sizeof(tmp))
		die("path too long: %s", path);
	fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	if (fd < 0)
		die("cannot create %s: %s", tmp, strerror(errno));
	while (off < o->len) {
		ssize_t n = write(fd, o->buf + off, o->len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			die("cannot write %s: %s", tmp, strerror(errno));
		off += (size_t)n;
	}
	if (close(fd) || rename(tmp, path))
		die("cannot write %s: %s", path, strerror(errno));
}

/* --- images --- */

static size_t make_ptx(struct actor *a)
{
	const char *k = a->plan->kernel;
	int n = snprintf(a->ptx, sizeof(a->ptx),
			 "//\n.version 8.0\n.target sm_90\n.address_size 64\n\n"
			 ".visible .entry %s(\n\t.param .u64 %s_param_0\n)\n{\n\tret;\n}\n",
			 k, k);

	if (n < 0 || (size_t)n >= sizeof(a->ptx))
		die("PTX too long");
	return (size_t)n;
}

/* A minimal valid ELF64 cubin of `size` bytes: the header, a .shstrtab and
 * the section headers (null, .shstrtab) at the very end, so that
 * size = e_shoff + e_shnum * e_shentsize. */
static size_t make_cubin(unsigned char *buf, size_t size)
{
	static const char shstrtab[] = "\0.shstrtab";
	Elf64_Ehdr eh = {
		.e_ident = { ELFMAG0, ELFMAG1, ELFMAG2, ELFMAG3, ELFCLASS64, ELFDATA2LSB,
			     EV_CURRENT, 0x33 /* ELFOSABI_CUDA */, 7 },
		.e_type = ET_EXEC,
		.e_machine = EM_CUDA,
		.e_version = EV_CURRENT,
		.e_flags = 90, /* sm_90 */
		.e_ehsize = sizeof(Elf64_Ehdr),
		.e_shentsize = sizeof(Elf64_Shdr),
		.e_shnum = 2,
		.e_shstrndx = 1,
	};
	Elf64_Shdr sh[2] = {
		{ 0 },
		{ .sh_name = 1,
		  .sh_type = SHT_STRTAB,
		  .sh_offset = sizeof(Elf64_Ehdr),
		  .sh_size = sizeof(shstrtab),
		  .sh_addralign = 1 },
	};

	eh.e_shoff = size - sizeof(sh);
	memset(buf, 0, size);
	memcpy(buf, &eh, sizeof(eh));
	memcpy(buf + sizeof(eh), shstrtab, sizeof(shstrtab));
	memcpy(buf + eh.e_shoff, sh, sizeof(sh));
	return eh.e_shoff + (size_t)eh.e_shnum * eh.e_shentsize;
}

/* A fatbin of `size` bytes: the 16-byte header (magic, version 1, header
 * size 16, the size of what follows) and that many bytes. */
static size_t make_fatbin(unsigned char *buf, size_t size)
{
	uint32_t magic = IMAGE_FATBIN_MAGIC;
	uint16_t version = 1, header = 16;
	uint64_t fat = size - header;

	memset(buf, 0, size);
	memcpy(buf, &magic, 4);
	memcpy(buf + 4, &version, 2);
	memcpy(buf + 6, &header, 2);
	memcpy(buf + 8, &fat, 8);
	return header + fat;
}

/* --- resources --- */

static struct res *res_new(struct actor *a, enum res_kind kind, enum res_how how, uint64_t bytes)
{
	struct res *r;

	if (a->nres == MAX_RES)
		die("MAX_RES too small");
	r = &a->res[a->nres++];
	r->kind = kind;
	r->how = how;
	r->bytes = bytes;
	r->live = true;
	return r;
}

static void res_release(struct res *r)
{
	CUresult err = CUDA_ERROR_UNKNOWN;

	if (!r->live)
		return;
	switch (r->how) {
	case HOW_MEM_FREE:
		err = cuMemFree_v2(r->dptr);
		break;
	case HOW_MEM_FREE_ASYNC:
		err = cuMemFreeAsync(r->dptr, NULL);
		break;
	case HOW_MEM_FREE_ASYNC_PTSZ:
		err = cuMemFreeAsync_ptsz(r->dptr, NULL);
		break;
	case HOW_MEM_RELEASE:
		err = cuMemRelease(r->handle);
		break;
	case HOW_FREE_HOST:
		err = cuMemFreeHost(r->host);
		break;
	case HOW_HOST_UNREGISTER:
		err = cuMemHostUnregister(r->host);
		free(r->host);
		break;
	case HOW_MODULE_UNLOAD:
		err = cuModuleUnload(r->mod);
		break;
	case HOW_LIBRARY_UNLOAD:
		err = cuLibraryUnload(r->lib);
		break;
	}
	expect(err, CUDA_SUCCESS, "a release");
	r->live = false;
}

static uint64_t live_bytes(const struct actor *a, enum res_kind kind)
{
	uint64_t sum = 0;

	for (unsigned int i = 0; i < a->nres; i++)
		if (a->res[i].live && a->res[i].kind == kind)
			sum += a->res[i].bytes;
	return sum;
}

static struct res *load(struct actor *a, int how, const void *image, uint64_t bytes)
{
	CUjit_option jit[2] = { CU_JIT_MAX_REGISTERS, CU_JIT_OPTIMIZATION_LEVEL };
	void *jit_val[2] = { (void *)(uintptr_t)64, (void *)(uintptr_t)3 };
	CUlibraryOption lib_opt[1] = { CU_LIBRARY_BINARY_IS_PRESERVED };
	void *lib_val[1] = { (void *)(uintptr_t)1 };
	struct res *r;

	if (how <= 2) {
		r = res_new(a, RES_IMAGE, HOW_MODULE_UNLOAD, bytes);
		if (how == 0)
			expect(cuModuleLoadData(&r->mod, image), CUDA_SUCCESS, "cuModuleLoadData");
		else if (how == 1)
			expect(cuModuleLoadDataEx(&r->mod, image, 2, jit, jit_val), CUDA_SUCCESS,
			       "cuModuleLoadDataEx");
		else
			expect(cuModuleLoadFatBinary(&r->mod, image), CUDA_SUCCESS,
			       "cuModuleLoadFatBinary");
	} else {
		r = res_new(a, RES_IMAGE, HOW_LIBRARY_UNLOAD, bytes);
		expect(cuLibraryLoadData(&r->lib, image, NULL, NULL, 0, how == 4 ? lib_opt : NULL,
					 how == 4 ? lib_val : NULL, how == 4 ? 1 : 0),
		       CUDA_SUCCESS, "cuLibraryLoadData");
	}
	return r;
}

/* --- launches --- */

/* Launch number i through `api`: a valid one, or one the fake refuses, by a
 * zero grid on even i and a NULL function (config, exec) on odd i. */
static void launch(struct actor *a, enum api api, CUfunction f, unsigned int i, bool ok)
{
	bool null_arg = !ok && i % 2;
	unsigned int grid = !ok && !null_arg ? 0 : 8 + i;
	CUfunction fn = null_arg ? NULL : f;
	CUdeviceptr arg0 = 0;
	int arg1 = (int)i;
	void *params[] = { &arg0, &arg1 };
	CUlaunchConfig cfg = { .gridDimX = grid,
			       .gridDimY = 1,
			       .gridDimZ = 1,
			       .blockDimX = 128,
			       .blockDimY = 1,
			       .blockDimZ = 1 };
	const CUlaunchConfig *pcfg = null_arg ? NULL : &cfg;
	CUDA_LAUNCH_PARAMS multi = { .function = fn,
				     .gridDimX = grid,
				     .gridDimY = 1,
				     .gridDimZ = 1,
				     .blockDimX = 128,
				     .blockDimY = 1,
				     .blockDimZ = 1,
				     .kernelParams = params };
	CUgraphExec exec = ok ? GRAPH_EXEC : NULL;
	CUresult err = CUDA_ERROR_UNKNOWN;

	if ((unsigned int)api >= NAPI)
		die("no launch entry point %d", (int)api);
	switch (api) {
	case API_LAUNCH:
		err = cuLaunchKernel(fn, grid, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
		break;
	case API_LAUNCH_PTSZ:
		err = cuLaunchKernel_ptsz(fn, grid, 1, 1, 128, 1, 1, 0, NULL, params, NULL);
		break;
	case API_LAUNCH_EX:
		err = cuLaunchKernelEx(pcfg, f, params, NULL);
		break;
	case API_LAUNCH_EX_PTSZ:
		err = cuLaunchKernelEx_ptsz(pcfg, f, params, NULL);
		break;
	case API_COOP:
		err = cuLaunchCooperativeKernel(fn, grid, 1, 1, 128, 1, 1, 0, NULL, params);
		break;
	case API_COOP_PTSZ:
		err = cuLaunchCooperativeKernel_ptsz(fn, grid, 1, 1, 128, 1, 1, 0, NULL, params);
		break;
	case API_COOP_MULTI:
		err = cuLaunchCooperativeKernelMultiDevice(&multi, 1, 0);
		break;
	case API_GRAPH:
		err = cuGraphLaunch(exec, NULL);
		break;
	case API_GRAPH_PTSZ:
		err = cuGraphLaunch_ptsz(exec, NULL);
		break;
	case NAPI:
		break;
	}
	expect(err, ok ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE, api_names[api]);
	if (ok)
		a->ok[api]++;
	else
		a->failed[api]++;
}

/* --- one actor's work --- */

static void do_images(struct actor *a, CUfunction fns[4])
{
	size_t ptx = make_ptx(a);
	size_t cubin = make_cubin(a->cubin, a->plan->cubin_size);
	size_t fatbin = make_fatbin(a->fatbin, a->plan->fatbin_size);
	const char *name;
	CUmodule bad;
	CUkernel k;

	struct res *m_ptx = load(a, 0, a->ptx, ptx);
	struct res *m_cubin = load(a, 0, a->cubin, cubin);
	struct res *m_ex = load(a, 1, a->ptx, ptx);
	struct res *m_fat = a->fat_module = load(a, 2, a->fatbin, fatbin);
	struct res *l_cubin = load(a, 3, a->cubin, cubin);
	struct res *l_fat = load(a, 4, a->fatbin, fatbin);
	expect(cuModuleLoadData(&bad, NULL), CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData(NULL)");

	expect(cuModuleGetFunction(&fns[0], m_ptx->mod, a->plan->kernel), CUDA_SUCCESS,
	       "cuModuleGetFunction");
	expect(cuModuleGetFunction(&fns[1], m_cubin->mod, a->plan->kernel), CUDA_SUCCESS,
	       "cuModuleGetFunction");
	expect(cuModuleGetFunction(&fns[2], m_fat->mod, a->plan->kernel), CUDA_SUCCESS,
	       "cuModuleGetFunction");
	expect(cuLibraryGetKernel(&k, l_cubin->lib, a->plan->kernel), CUDA_SUCCESS,
	       "cuLibraryGetKernel");
	fns[3] = (CUfunction)k;
	for (int i = 0; i < 4; i++) {
		expect(cuFuncGetName(&name, fns[i]), CUDA_SUCCESS, "cuFuncGetName");
		if (strcmp(name, a->plan->kernel))
			die("cuFuncGetName gave %s", name);
	}

	res_release(m_ex);
	res_release(l_fat);
	expect(cuLibraryUnload(l_fat->lib), CUDA_ERROR_INVALID_HANDLE, "cuLibraryUnload twice");
	expect(cuModuleUnload((CUmodule)&graph_exec_token), CUDA_ERROR_INVALID_HANDLE,
	       "cuModuleUnload(unknown)");
}

static void do_launches(struct actor *a, CUfunction fns[4])
{
	for (int api = 0; api < NAPI; api++) {
		for (unsigned int i = 0; i < a->plan->ok; i++)
			launch(a, (enum api)api, fns[(api + i) % 4], i, true);
		for (unsigned int i = 0; i < a->plan->fail; i++)
			launch(a, (enum api)api, fns[(api + i) % 4], i, false);
	}
}

static struct res *dev(struct actor *a, int entry, size_t bytes, enum res_how how)
{
	struct res *r = res_new(a, RES_DEVICE, how, bytes);

	switch (entry) {
	case 0:
		expect(cuMemAlloc_v2(&r->dptr, bytes), CUDA_SUCCESS, "cuMemAlloc_v2");
		break;
	case 1:
		expect(cuMemAllocManaged(&r->dptr, bytes, CU_MEM_ATTACH_GLOBAL), CUDA_SUCCESS,
		       "cuMemAllocManaged");
		break;
	case 2:
		expect(cuMemAllocAsync(&r->dptr, bytes, NULL), CUDA_SUCCESS, "cuMemAllocAsync");
		break;
	case 3:
		expect(cuMemAllocAsync_ptsz(&r->dptr, bytes, NULL), CUDA_SUCCESS,
		       "cuMemAllocAsync_ptsz");
		break;
	case 4:
		expect(cuMemAllocFromPoolAsync(&r->dptr, bytes, MEM_POOL, NULL), CUDA_SUCCESS,
		       "cuMemAllocFromPoolAsync");
		break;
	case 5:
		expect(cuMemAllocFromPoolAsync_ptsz(&r->dptr, bytes, MEM_POOL, NULL), CUDA_SUCCESS,
		       "cuMemAllocFromPoolAsync_ptsz");
		break;
	}
	return r;
}

static void do_device(struct actor *a)
{
	const size_t s = a->plan->scale;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED,
				     .requestedHandleTypes = CU_MEM_HANDLE_TYPE_NONE,
				     .location = { CU_MEM_LOCATION_TYPE_DEVICE, 0 } };
	CUdeviceptr none;
	CUmemGenericAllocationHandle h;
	size_t pitch = 0;

	a->big_alloc = dev(a, 0, (1u << 20) * s, HOW_MEM_FREE);
	struct res *small = dev(a, 0, 3000 * s, HOW_MEM_FREE);
	dev(a, 1, (256u << 10) * s, HOW_MEM_FREE);
	struct res *async = dev(a, 2, (64u << 10) * s, HOW_MEM_FREE_ASYNC);
	dev(a, 2, 40000 * s, HOW_MEM_FREE_ASYNC);
	dev(a, 3, (32u << 10) * s, HOW_MEM_FREE_ASYNC_PTSZ);
	dev(a, 4, (128u << 10) * s, HOW_MEM_FREE_ASYNC);
	dev(a, 5, (48u << 10) * s, HOW_MEM_FREE_ASYNC_PTSZ);

	struct res *pitched = res_new(a, RES_DEVICE, HOW_MEM_FREE, 0);
	expect(cuMemAllocPitch_v2(&pitched->dptr, &pitch, 1000 + 100 * s, 64, 4), CUDA_SUCCESS,
	       "cuMemAllocPitch_v2");
	pitched->bytes = (uint64_t)pitch * 64;

	for (int i = 0; i < 2; i++) {
		struct res *r = res_new(a, RES_DEVICE, HOW_MEM_RELEASE, (2u << 20) * s);
		expect(cuMemCreate(&r->handle, r->bytes, &prop, 0), CUDA_SUCCESS, "cuMemCreate");
		if (i)
			res_release(r);
	}

	res_release(small);
	res_release(async);
	expect(cuMemAlloc_v2(&none, 0), CUDA_ERROR_INVALID_VALUE, "cuMemAlloc_v2(0)");
	expect(cuMemCreate(&h, 3u << 20, &prop, 0), CUDA_ERROR_INVALID_VALUE, "cuMemCreate(3 MiB)");
	expect(cuMemFree_v2(small->dptr), CUDA_ERROR_INVALID_VALUE, "cuMemFree_v2 twice");
	expect(cuMemFreeAsync(0xdead0000ull, NULL), CUDA_ERROR_INVALID_VALUE,
	       "cuMemFreeAsync(unknown)");
	expect(cuMemRelease(0x77), CUDA_ERROR_INVALID_VALUE, "cuMemRelease(unknown)");
}

static void do_host(struct actor *a)
{
	const size_t s = a->plan->scale;
	struct res *r;

	r = a->host_alloc = res_new(a, RES_HOST, HOW_FREE_HOST, (64u << 10) * s);
	expect(cuMemHostAlloc(&r->host, r->bytes, CU_MEMHOSTALLOC_PORTABLE), CUDA_SUCCESS,
	       "cuMemHostAlloc");
	struct res *gone = res_new(a, RES_HOST, HOW_FREE_HOST, (16u << 10) * s);
	expect(cuMemAllocHost_v2(&gone->host, gone->bytes), CUDA_SUCCESS, "cuMemAllocHost_v2");
	r = res_new(a, RES_HOST, HOW_FREE_HOST, (24u << 10) * s);
	expect(cuMemAllocHost_v2(&r->host, r->bytes), CUDA_SUCCESS, "cuMemAllocHost_v2");

	struct res *reg[2];
	for (int i = 0; i < 2; i++) {
		reg[i] = res_new(a, RES_HOST, HOW_HOST_UNREGISTER, (i ? 8u << 10 : 32u << 10) * s);
		reg[i]->host = aligned_alloc(4096, reg[i]->bytes);
		if (!reg[i]->host)
			die("out of memory");
		expect(cuMemHostRegister_v2(reg[i]->host, reg[i]->bytes,
					    CU_MEMHOSTREGISTER_PORTABLE),
		       CUDA_SUCCESS, "cuMemHostRegister_v2");
	}

	expect(cuMemHostRegister_v2(reg[0]->host, 4096, 0),
	       CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, "cuMemHostRegister_v2 twice");
	expect(cuMemFreeHost(reg[0]->host), CUDA_ERROR_INVALID_VALUE, "cuMemFreeHost(registered)");
	res_release(gone);
	void *p = reg[1]->host;
	expect(cuMemHostUnregister(p), CUDA_SUCCESS, "cuMemHostUnregister");
	reg[1]->live = false;
	expect(cuMemHostUnregister(p), CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED,
	       "cuMemHostUnregister twice");
	free(p);
}

static void actor_work(struct actor *a)
{
	CUfunction fns[4];

	do_images(a, fns);
	do_device(a);
	do_host(a);
	do_launches(a, fns);
	for (unsigned int i = 0; i < a->plan->yields; i++, a->yields++)
		tally_yield();
	for (unsigned int i = 0; i < a->plan->rejects; i++, a->rejects++)
		tally_reject();
	for (unsigned int i = 0; i < a->plan->os_yields; i++, a->os_yields++)
		sched_yield();
	expect(cuStreamSynchronize(NULL), CUDA_SUCCESS, "cuStreamSynchronize");
	expect(cuStreamSynchronize_ptsz(NULL), CUDA_SUCCESS, "cuStreamSynchronize_ptsz");
	expect(cuEventSynchronize((CUevent)&event_token), CUDA_SUCCESS, "cuEventSynchronize");
	expect(cuCtxSynchronize(), CUDA_SUCCESS, "cuCtxSynchronize");
}

static void *group_thread(void *arg)
{
	struct actor *a = arg;
	struct tally_group_guard guard;

	pthread_setname_np(pthread_self(), a->plan->group);
	guard = tally_group_enter(a->group);
	actor_work(a);
	tally_group_exit(guard);
	return NULL;
}

/* --- figures --- */

struct figures {
	uint64_t kernels, graphs, failed, rejections, yields, os_yields, device, host, images;
};

static void figures_of(const struct actor *a, struct figures *f)
{
	memset(f, 0, sizeof(*f));
	for (int api = 0; api < NAPI; api++) {
		if (api >= API_GRAPH)
			f->graphs += a->ok[api];
		else
			f->kernels += a->ok[api];
		f->failed += a->failed[api];
	}
	f->rejections = f->failed + a->rejects;
	f->yields = a->yields;
	f->os_yields = a->os_yields;
	f->device = live_bytes(a, RES_DEVICE);
	f->host = live_bytes(a, RES_HOST);
	f->images = live_bytes(a, RES_IMAGE);
}

static void out_figures(struct out *o, const struct figures *f)
{
	out_add(o,
		"{\"kernels_launched\": %llu, \"graph_launches\": %llu, \"failed_launches\": %llu, "
		"\"back_pressure_rejections\": %llu, \"yield_count\": %llu, \"os_yields\": %llu, "
		"\"device_bytes_allocated\": %llu, \"host_pinned_bytes\": %llu, "
		"\"bytes_pinned\": %llu}",
		(unsigned long long)f->kernels, (unsigned long long)f->graphs,
		(unsigned long long)f->failed, (unsigned long long)f->rejections,
		(unsigned long long)f->yields, (unsigned long long)f->os_yields,
		(unsigned long long)f->device, (unsigned long long)f->host,
		(unsigned long long)f->images);
}

static void write_figures(const char *path, const char *phase)
{
	static struct out o; /* static: too big for comfort on the stack */
	struct figures f[NACTORS], sum = { 0 };

	o.len = 0;
	for (int i = 0; i < NACTORS; i++) {
		figures_of(&actors[i], &f[i]);
		sum.kernels += f[i].kernels;
		sum.graphs += f[i].graphs;
		sum.failed += f[i].failed;
		sum.rejections += f[i].rejections;
		sum.yields += f[i].yields;
		sum.os_yields += f[i].os_yields;
		sum.device += f[i].device;
		sum.host += f[i].host;
		sum.images += f[i].images;
	}
	out_add(&o, "{\n  \"phase\": \"%s\",\n  \"pid\": %d,\n  \"instance\": ", phase,
		(int)getpid());
	out_figures(&o, &sum);
	out_add(&o, ",\n  \"groups\": {");
	for (int i = 0; i < NACTORS; i++) {
		out_add(&o, "%s\n    \"%s\": ", i ? "," : "", plans[i].group);
		out_figures(&o, &f[i]);
	}
	out_add(&o, "\n  },\n  \"launches\": {");
	for (int i = 0; i < NACTORS; i++) {
		out_add(&o, "%s\n    \"%s\": {", i ? "," : "", plans[i].group);
		for (int api = 0; api < NAPI; api++)
			out_add(&o, "%s\"%s\": {\"ok\": %llu, \"failed\": %llu}", api ? ", " : "",
				api_names[api], (unsigned long long)actors[i].ok[api],
				(unsigned long long)actors[i].failed[api]);
		out_add(&o, "}");
	}
	out_add(&o, "\n  }\n}\n");
	out_write(&o, path);
}

/* --- gates --- */

static volatile sig_atomic_t got_term, got_usr1;
static bool stdin_eof;

static void on_signal(int sig)
{
	if (sig == SIGUSR1)
		got_usr1 = 1;
	else
		got_term = 1;
}

/* True when fd 0 can pass a line: open, and not /dev/null. */
static bool stdin_usable(void)
{
	struct stat st;

	if (fstat(0, &st))
		return false;
	return !(S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
}

/* Waits as the header says. The gate signals are blocked everywhere else,
 * and unblocked only inside ppoll or sigsuspend, so none is lost. */
static void gate(const sigset_t *unblocked)
{
	bool use_stdin = stdin_usable();

	for (;;) {
		if (got_term || stdin_eof)
			return;
		if (got_usr1) {
			got_usr1 = 0;
			return;
		}
		if (!use_stdin) {
			sigsuspend(unblocked);
			continue;
		}
		struct pollfd pfd = { .fd = 0, .events = POLLIN };
		if (ppoll(&pfd, 1, NULL, unblocked) < 0)
			continue; /* EINTR: a signal, seen at the top */
		if (pfd.revents & POLLNVAL) {
			use_stdin = false;
			continue;
		}
		for (;;) { /* one line, or up to EOF */
			char c;
			ssize_t n = read(0, &c, 1);
			if (n < 0 && errno == EINTR)
				continue;
			if (n <= 0)
				stdin_eof = true;
			if (n <= 0 || c == '\n')
				return;
		}
	}
}

static void ready_file(const char *path)
{
	char name[4096];
	struct out *o = calloc(1, sizeof(*o));

	if (!o)
		die("out of memory");
	if ((size_t)snprintf(name, sizeof(name), "%s.ready", path) >= sizeof(name))
		die("path too long");
	out_add(o, "{\"pid\": %d}\n", (int)getpid());
	out_write(o, name);
	free(o);
}

int main(int argc, char **argv)
{
	struct sigaction sa = { .sa_handler = on_signal };
	sigset_t gate_sigs, unblocked;
	pthread_t threads[NACTORS];
	char end_path[4096];
	CUcontext ctx;
	CUdevice dev;
	int version;

	if (argc != 3 ||
	    (strcmp(argv[1], "run") && strcmp(argv[1], "wait") && strcmp(argv[1], "late"))) {
		fprintf(stderr, "usage: gpu_workload run|wait|late FILE\n");
		return 2;
	}
	const char *mode = argv[1], *path = argv[2];
	if ((size_t)snprintf(end_path, sizeof(end_path), "%s.end", path) >= sizeof(end_path))
		die("path too long");

	/* the gate signals: handled without SA_RESTART, blocked in every thread */
	sigemptyset(&gate_sigs);
	sigaddset(&gate_sigs, SIGTERM);
	sigaddset(&gate_sigs, SIGINT);
	sigaddset(&gate_sigs, SIGUSR1);
	sigaction(SIGTERM, &sa, NULL);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGUSR1, &sa, NULL);
	pthread_sigmask(SIG_BLOCK, &gate_sigs, &unblocked);

	expect(cuInit(0), CUDA_SUCCESS, "cuInit");
	expect(cuDriverGetVersion(&version), CUDA_SUCCESS, "cuDriverGetVersion");
	expect(cuDeviceGet(&dev, 0), CUDA_SUCCESS, "cuDeviceGet");
	expect(cuCtxCreate_v2(&ctx, 0, dev), CUDA_SUCCESS, "cuCtxCreate_v2");
	for (int i = 0; i < NACTORS; i++) {
		actors[i].plan = &plans[i];
		actors[i].group = tally_group_register(plans[i].group);
		if (actors[i].group.id == TALLY_GROUP_INVALID || (i == ROOT) != !actors[i].group.id)
			die("cannot register group %s", plans[i].group);
	}
	if (!strcmp(mode, "late")) {
		ready_file(path);
		gate(&unblocked);
	}

	for (int i = TRAIN; i < NACTORS; i++)
		if (pthread_create(&threads[i], NULL, group_thread, &actors[i]))
			die("cannot create a thread");
	actor_work(&actors[ROOT]);
	for (int i = TRAIN; i < NACTORS; i++)
		pthread_join(threads[i], NULL);

	/* releases by root of other instances' things (see the header) */
	res_release(actors[INFER].big_alloc);
	res_release(actors[TRAIN].host_alloc);
	res_release(actors[TRAIN].fat_module);
	expect(cuCtxSynchronize(), CUDA_SUCCESS, "cuCtxSynchronize");
	write_figures(path, "live");

	if (strcmp(mode, "run"))
		gate(&unblocked);
	for (int i = 0; i < NACTORS; i++)
		for (unsigned int j = actors[i].nres; j-- > 0;)
			res_release(&actors[i].res[j]);
	expect(cuCtxDestroy_v2(ctx), CUDA_SUCCESS, "cuCtxDestroy_v2");
	write_figures(end_path, "end");
	return 0;
}
