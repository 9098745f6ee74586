// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * One CUPTI callback turned into GPU records (bpf/contract/tally_events.h, docs/DESIGN.md
 * §4). Everything happens at API exit, where the return code and the
 * out-parameters are known; the only work at API entry is to open the window
 * in which the resource domain's MODULE_LOADED may report an image's size.
 *
 *   launches   CUDA_SUCCESS: GPU_LAUNCH (n = kernel name id) or
 *              GPU_GRAPH_LAUNCH; an error: GPU_LAUNCH_FAILED (n = CUresult).
 *              bytes = enum tally_gpu_api; _ptsz variants as their base.
 *              A multi-device cooperative launch is one launch per device.
 *   device     cuMemAlloc_v2, cuMemAllocManaged, cuMemAllocAsync,
 *              cuMemAllocFromPoolAsync: bytesize; cuMemAllocPitch_v2:
 *              *pPitch * Height; cuMemCreate: size. Frees and cuMemRelease:
 *              the bytes recorded for the handle.
 *   pinned     cuMemHostAlloc, cuMemAllocHost_v2, cuMemHostRegister_v2:
 *              bytesize; cuMemFreeHost, cuMemHostUnregister: recorded bytes.
 *   images     the image's size (image_size.c; cuLibraryLoadFromFile: the
 *              file's), else the MODULE_LOADED cubinSize reported during the
 *              call, else 0; unloads: the recorded bytes.
 *
 * A failed allocation or release changes nothing. A release of a handle
 * never recorded (made before the tracer attached) is counted in
 * tally_cupti_counters.unknown_frees and emits nothing, so the figures never
 * go below what was seen. A release carries the group of its allocation.
 */
#include "internal.h" /* cupti.h: the parameter structs of generated_cuda_meta.h */

const CUpti_CallbackId tally_cupti_driver_cbids[] = {
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch,
	CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz,
	CUPTI_DRIVER_TRACE_CBID_cuMemCreate,
	CUPTI_DRIVER_TRACE_CBID_cuMemRelease,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc,
	CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2,
	CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost,
	CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister,
	CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
	CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx,
	CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary,
	CUPTI_DRIVER_TRACE_CBID_cuModuleUnload,
	CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData,
	CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile,
	CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload,
};
const size_t tally_cupti_driver_cbid_count =
	sizeof(tally_cupti_driver_cbids) / sizeof(tally_cupti_driver_cbids[0]);

/* A block made: remember it, then count it (an unremembered block would
 * never be released in the figures, so it is not counted at all). */
static void block_made(uint8_t type, uint32_t kind, uint64_t handle, uint64_t bytes)
{
	uint32_t group = tally_cupti_group();

	if (tally_cupti_blocks_put(kind, handle, bytes, group)) {
		__atomic_fetch_add(&tally_cupti_counters.untracked, 1, __ATOMIC_RELAXED);
		return;
	}
	if (bytes)
		tally_cupti_emit(type, 0, group, 0, bytes);
}

/* A block released: its bytes go back to the group that made it. */
static void block_released(uint8_t type, uint32_t kind, uint64_t handle)
{
	uint64_t bytes;
	uint32_t group;

	if (!handle) /* cuMemFree(0) and the like: nothing to release */
		return;
	if (tally_cupti_blocks_take(kind, handle, &bytes, &group)) {
		__atomic_fetch_add(&tally_cupti_counters.unknown_frees, 1, __ATOMIC_RELAXED);
		return;
	}
	if (bytes)
		tally_cupti_emit(type, 1, group, 0, bytes);
}

static void launch(const CUpti_CallbackData *cb, CUresult rc, CUfunction f, uint32_t api)
{
	uint32_t group = tally_cupti_group();

	if (rc != CUDA_SUCCESS)
		tally_cupti_emit(TALLY_EV_GPU_LAUNCH_FAILED, 0, group, (uint32_t)rc, api);
	else
		tally_cupti_emit_launch(tally_cupti_kernel_name(f, cb->symbolName), group, api);
}

static void launch_multi(const CUpti_CallbackData *cb, CUresult rc,
			 const cuLaunchCooperativeKernelMultiDevice_params *p)
{
	uint32_t group = tally_cupti_group();
	uint32_t api = TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI;

	if (rc != CUDA_SUCCESS || !p->launchParamsList) {
		tally_cupti_emit(TALLY_EV_GPU_LAUNCH_FAILED, 0, group, (uint32_t)rc, api);
		return;
	}
	for (unsigned i = 0; i < p->numDevices; i++) {
		CUfunction f = p->launchParamsList[i].function;
		/* symbolName names the first device's kernel */
		const char *sym = f == p->launchParamsList[0].function ? cb->symbolName : NULL;
		tally_cupti_emit_launch(tally_cupti_kernel_name(f, sym), group, api);
	}
}

static void graph_launch(CUresult rc)
{
	uint32_t group = tally_cupti_group();
	uint32_t api = TALLY_GPU_API_GRAPH_LAUNCH;

	if (rc != CUDA_SUCCESS)
		tally_cupti_emit(TALLY_EV_GPU_LAUNCH_FAILED, 0, group, (uint32_t)rc, api);
	else
		tally_cupti_emit(TALLY_EV_GPU_GRAPH_LAUNCH, 0, group, 0, api);
}

/* An out-parameter the driver filled: read only on success. */
#define OUT(ptr) ((ptr) ? (uint64_t)(uintptr_t)(*(ptr)) : 0)

static void image_loaded(uint32_t kind, uint64_t handle, uint64_t size)
{
	struct tally_cupti_thread *t = tally_cupti_thread();

	if (!size && t)
		size = t->loaded_cubin_size;
	if (handle)
		block_made(TALLY_EV_GPU_IMAGE, kind, handle, size);
}

static void image_unloaded(uint32_t kind, uint64_t handle)
{
	block_released(TALLY_EV_GPU_IMAGE, kind, handle);
	/* its functions' handles may now name other kernels */
	tally_cupti_kernel_names_forget_handles();
}

static bool is_image_load(CUpti_CallbackId cbid)
{
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData:
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx:
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary:
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData:
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile:
		return true;
	default:
		return false;
	}
}

/* Launches: the return code decides the record. */
static bool driver_launch(CUpti_CallbackId cbid, const CUpti_CallbackData *cb, CUresult rc)
{
	const void *p = cb->functionParams;

	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel:
		launch(cb, rc, ((const cuLaunchKernel_params *)p)->f, TALLY_GPU_API_LAUNCH_KERNEL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz:
		launch(cb, rc, ((const cuLaunchKernel_ptsz_params *)p)->f,
		       TALLY_GPU_API_LAUNCH_KERNEL);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx:
		launch(cb, rc, ((const cuLaunchKernelEx_params *)p)->f,
		       TALLY_GPU_API_LAUNCH_KERNEL_EX);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz:
		launch(cb, rc, ((const cuLaunchKernelEx_ptsz_params *)p)->f,
		       TALLY_GPU_API_LAUNCH_KERNEL_EX);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel:
		launch(cb, rc, ((const cuLaunchCooperativeKernel_params *)p)->f,
		       TALLY_GPU_API_LAUNCH_COOPERATIVE);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz:
		launch(cb, rc, ((const cuLaunchCooperativeKernel_ptsz_params *)p)->f,
		       TALLY_GPU_API_LAUNCH_COOPERATIVE);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice:
		launch_multi(cb, rc, p);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch:
	case CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz:
		graph_launch(rc);
		break;
	default:
		return false;
	}
	return true;
}

/* Device allocations: only a successful call changes anything. */
static void driver_device_alloc(CUpti_CallbackId cbid, const void *p)
{
	const uint8_t DEV = TALLY_EV_GPU_DEVICE_MEM;

	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2: {
		const cuMemAlloc_v2_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2: {
		const cuMemAllocPitch_v2_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), OUT(a->pPitch) * a->Height);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged: {
		const cuMemAllocManaged_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync: {
		const cuMemAllocAsync_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz: {
		const cuMemAllocAsync_ptsz_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync: {
		const cuMemAllocFromPoolAsync_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz: {
		const cuMemAllocFromPoolAsync_ptsz_params *a = p;
		block_made(DEV, TALLY_CUPTI_DEVICE_PTR, OUT(a->dptr), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemCreate: {
		const cuMemCreate_params *a = p;
		block_made(DEV, TALLY_CUPTI_VMM_HANDLE, OUT(a->handle), a->size);
		break;
	}
	}
}

/* Their releases: only a successful call changes anything. */
static void driver_device_free(CUpti_CallbackId cbid, const void *p)
{
	const uint8_t DEV = TALLY_EV_GPU_DEVICE_MEM;

	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2:
		block_released(DEV, TALLY_CUPTI_DEVICE_PTR, ((const cuMemFree_v2_params *)p)->dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync:
		block_released(DEV, TALLY_CUPTI_DEVICE_PTR,
			       ((const cuMemFreeAsync_params *)p)->dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz:
		block_released(DEV, TALLY_CUPTI_DEVICE_PTR,
			       ((const cuMemFreeAsync_ptsz_params *)p)->dptr);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemRelease:
		block_released(DEV, TALLY_CUPTI_VMM_HANDLE,
			       ((const cuMemRelease_params *)p)->handle);
		break;
	}
}

/* Pinned host memory and its releases: only a successful call changes
 * anything. */
static void driver_host_memory(CUpti_CallbackId cbid, const void *p)
{
	const uint8_t HOST = TALLY_EV_GPU_HOST_PINNED;

	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc: {
		const cuMemHostAlloc_params *a = p;
		block_made(HOST, TALLY_CUPTI_HOST_ALLOC, OUT(a->pp), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2: {
		const cuMemAllocHost_v2_params *a = p;
		block_made(HOST, TALLY_CUPTI_HOST_ALLOC, OUT(a->pp), a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2: {
		const cuMemHostRegister_v2_params *a = p;
		block_made(HOST, TALLY_CUPTI_HOST_REG, (uintptr_t)a->p, a->bytesize);
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost:
		block_released(HOST, TALLY_CUPTI_HOST_ALLOC,
			       (uintptr_t)((const cuMemFreeHost_params *)p)->p);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister:
		block_released(HOST, TALLY_CUPTI_HOST_REG,
			       (uintptr_t)((const cuMemHostUnregister_params *)p)->p);
		break;
	}
}

/* Images and their unloads: only a successful call changes anything. */
static void driver_image(CUpti_CallbackId cbid, const void *p)
{
	switch (cbid) {
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData: {
		const cuModuleLoadData_params *a = p;
		image_loaded(TALLY_CUPTI_MODULE, OUT(a->module), tally_cupti_image_size(a->image));
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx: {
		const cuModuleLoadDataEx_params *a = p;
		image_loaded(TALLY_CUPTI_MODULE, OUT(a->module), tally_cupti_image_size(a->image));
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary: {
		const cuModuleLoadFatBinary_params *a = p;
		image_loaded(TALLY_CUPTI_MODULE, OUT(a->module),
			     tally_cupti_image_size(a->fatCubin));
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData: {
		const cuLibraryLoadData_params *a = p;
		image_loaded(TALLY_CUPTI_LIBRARY, OUT(a->library), tally_cupti_image_size(a->code));
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile: {
		const cuLibraryLoadFromFile_params *a = p;
		image_loaded(TALLY_CUPTI_LIBRARY, OUT(a->library),
			     tally_cupti_file_size(a->fileName));
		break;
	}
	case CUPTI_DRIVER_TRACE_CBID_cuModuleUnload:
		image_unloaded(TALLY_CUPTI_MODULE,
			       (uintptr_t)((const cuModuleUnload_params *)p)->hmod);
		break;
	case CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload:
		image_unloaded(TALLY_CUPTI_LIBRARY,
			       (uintptr_t)((const cuLibraryUnload_params *)p)->library);
		break;
	}
}

static void driver_callback(CUpti_CallbackId cbid, const CUpti_CallbackData *cb)
{
	struct tally_cupti_thread *t;
	CUresult rc;

	if (!cb || !cb->functionParams)
		return;
	if (cb->callbackSite == CUPTI_API_ENTER) {
		if (is_image_load(cbid) && (t = tally_cupti_thread())) {
			t->loading = true;
			t->loaded_cubin_size = 0;
		}
		return;
	}
	if (cb->callbackSite != CUPTI_API_EXIT || !cb->functionReturnValue)
		return;
	rc = *(const CUresult *)cb->functionReturnValue;
	if (driver_launch(cbid, cb, rc))
		return;
	if (rc == CUDA_SUCCESS) {
		driver_device_alloc(cbid, cb->functionParams);
		driver_device_free(cbid, cb->functionParams);
		driver_host_memory(cbid, cb->functionParams);
		driver_image(cbid, cb->functionParams);
	}
	if (is_image_load(cbid) && (t = tally_cupti_thread()))
		t->loading = false;
}

/* MODULE_LOADED comes inside the load call, on its thread: while that
 * thread's window is open, its cubinSize is the size of what was loaded (the
 * largest, if a library loads one module per context). */
static void resource_callback(CUpti_CallbackId cbid, const CUpti_ResourceData *rd)
{
	const CUpti_ModuleResourceData *mod;
	struct tally_cupti_thread *t;

	if (cbid != CUPTI_CBID_RESOURCE_MODULE_LOADED || !rd || !rd->resourceDescriptor)
		return;
	mod = rd->resourceDescriptor;
	t = tally_cupti_thread();
	if (t && t->loading && mod->cubinSize > t->loaded_cubin_size)
		t->loaded_cubin_size = mod->cubinSize;
}

void tally_cupti_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata)
{
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API)
		driver_callback(cbid, cbdata);
	else if (domain == CUPTI_CB_DOMAIN_RESOURCE)
		resource_callback(cbid, cbdata);
	tally_cupti_tick();
}
