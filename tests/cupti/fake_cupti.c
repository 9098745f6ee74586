// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A fake CUPTI (libcupti.so.N, the toolkit's soname and version node), to
 * run the real libtally_cupti.so against the fake driver
 * (tests/fake_cuda/libcuda.c), which the real CUPTI refuses to serve. Built
 * with the toolkit's own headers: the callback data and the parameter
 * structs are CUPTI's. What libtally_cupti.so calls, no more:
 *   cuptiSubscribe_v2   hooks into the fake driver (fakeCudaSetApiHook);
 *                       with FAKE_CUPTI_HELD_BY set, refuses as CUPTI does
 *                       when another tool holds it, naming that tool
 *   cuptiEnableCallback the driver API callbacks to call
 *   cuptiGetResultString
 * The fake driver reports cuLaunchKernel, cuMemAlloc_v2, cuMemFree_v2,
 * cuModuleLoadData and cuModuleUnload; each becomes an API-exit callback.
 */
#include <dlfcn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cupti.h>

#define EXPORT __attribute__((visibility("default")))

static CUpti_CallbackFunc callback;
static void *callback_data;
static bool enabled[CUPTI_DRIVER_TRACE_CBID_SIZE];

/* One API exit, as the driver reports it: the parameter struct built from
 * the arguments' addresses, then the subscriber called. */
static void api_exit(const char *name, void *const *a, CUresult rc)
{
	CUpti_CallbackData cb = { .callbackSite = CUPTI_API_EXIT,
				  .functionName = name,
				  .functionReturnValue = &rc };
	CUpti_CallbackId id;
	union {
		cuLaunchKernel_params launch;
		cuMemAlloc_v2_params alloc;
		cuMemFree_v2_params free;
		cuModuleLoadData_params load;
		cuModuleUnload_params unload;
	} p;

	if (!strcmp(name, "cuLaunchKernel")) {
		id = CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel;
		p.launch = (cuLaunchKernel_params){ *(CUfunction *)a[0],   *(unsigned int *)a[1],
						    *(unsigned int *)a[2], *(unsigned int *)a[3],
						    *(unsigned int *)a[4], *(unsigned int *)a[5],
						    *(unsigned int *)a[6], *(unsigned int *)a[7],
						    *(CUstream *)a[8],	   *(void ***)a[9],
						    *(void ***)a[10] };
	} else if (!strcmp(name, "cuMemAlloc_v2")) {
		id = CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2;
		p.alloc = (cuMemAlloc_v2_params){ *(CUdeviceptr **)a[0], *(size_t *)a[1] };
	} else if (!strcmp(name, "cuMemFree_v2")) {
		id = CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2;
		p.free = (cuMemFree_v2_params){ *(CUdeviceptr *)a[0] };
	} else if (!strcmp(name, "cuModuleLoadData")) {
		id = CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData;
		p.load = (cuModuleLoadData_params){ *(CUmodule **)a[0], *(const void **)a[1] };
	} else if (!strcmp(name, "cuModuleUnload")) {
		id = CUPTI_DRIVER_TRACE_CBID_cuModuleUnload;
		p.unload = (cuModuleUnload_params){ *(CUmodule *)a[0] };
	} else {
		return;
	}
	if (!callback || !enabled[id])
		return;
	cb.functionParams = &p;
	callback(callback_data, CUPTI_CB_DOMAIN_DRIVER_API, id, &cb);
}

EXPORT CUptiResult CUPTIAPI cuptiSubscribe_v2(CUpti_SubscriberHandle *sub, CUpti_CallbackFunc fn,
					      void *data, CUpti_SubscriberParams *params)
{
	const char *held = getenv("FAKE_CUPTI_HELD_BY");
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void (*set_hook)(void (*)(const char *, void *const *, CUresult));
	void *sym = cuda ? dlsym(cuda, "fakeCudaSetApiHook") : NULL;

	if (held && *held) {
		if (params && params->oldSubscriberName && params->oldSubscriberSize)
			snprintf(params->oldSubscriberName, params->oldSubscriberSize, "%s", held);
		return CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED;
	}
	memcpy(&set_hook, &sym, sizeof(sym));
	if (!set_hook || !sub || !fn)
		return CUPTI_ERROR_NOT_INITIALIZED;
	callback = fn;
	callback_data = data;
	*sub = (CUpti_SubscriberHandle)&callback;
	set_hook(api_exit);
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiEnableCallback(uint32_t enable, CUpti_SubscriberHandle sub,
						CUpti_CallbackDomain domain, CUpti_CallbackId cbid)
{
	if (sub != (CUpti_SubscriberHandle)&callback)
		return CUPTI_ERROR_INVALID_PARAMETER;
	if (domain == CUPTI_CB_DOMAIN_DRIVER_API && cbid < CUPTI_DRIVER_TRACE_CBID_SIZE)
		enabled[cbid] = enable != 0;
	return CUPTI_SUCCESS;
}

EXPORT CUptiResult CUPTIAPI cuptiGetResultString(CUptiResult result, const char **str)
{
	switch (result) {
	case CUPTI_SUCCESS:
		*str = "CUPTI_SUCCESS";
		break;
	case CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED:
		*str = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED";
		break;
	default:
		*str = "CUPTI_ERROR_UNKNOWN";
		break;
	}
	return CUPTI_SUCCESS;
}
