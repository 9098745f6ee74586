// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_cupti.so's handler, called directly: synthesized
 * CUpti_CallbackData around the real parameter structs of
 * generated_cuda_meta.h, a CUresult to return, and the batches it hands
 * over captured and decoded back with tally_ev_next(). No GPU, no driver,
 * no CUPTI runtime. The image sizes are checked on nvcc's own PTX, cubin
 * and fatbin when cupti/build.sh could build them (TALLY_CUPTI_FIXTURES).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include "../test_skip.h"
#include <fatbinary_section.h>

#include "../../bpf/image_format.h"
#include "../../cupti/internal.h"

/* ---- fakes: the group SDK, the driver's cuFuncGetName, the clock ---- */

static uint32_t fake_group;

/* Bound to the library's weak reference (alloc/common/sdk_lookup.h): exported (the
 * test links -rdynamic, and is compiled with -fvisibility=hidden like the
 * library). test_nosdk.c is the process without one. */
__attribute__((visibility("default"))) struct tally_group tally_group_current(void);
struct tally_group tally_group_current(void)
{
	return (struct tally_group){ fake_group };
}

static const char *fake_driver_name; /* what cuFuncGetName answers, NULL: an error */
static unsigned fake_driver_calls;

static CUresult fake_func_get_name(const char **name, CUfunction f)
{
	(void)f;
	fake_driver_calls++;
	if (!fake_driver_name)
		return CUDA_ERROR_INVALID_HANDLE;
	*name = fake_driver_name;
	return CUDA_SUCCESS;
}

static _Atomic uint64_t fake_ms; /* advanced by the threads of the concurrency test */

static uint64_t fake_now_ms(void)
{
	return fake_ms;
}

/* ---- the sink: every batch handed over, copied ---- */

#define MAX_BATCHES 1024

struct captured {
	struct tally_batch *b;
	size_t bytes;
	pid_t handed_by; /* gettid() inside the sink */
};

static pthread_mutex_t captured_lock = PTHREAD_MUTEX_INITIALIZER;
static struct captured captured[MAX_BATCHES];
static unsigned ncaptured;

static void capture_sink(const struct tally_batch *b, size_t bytes)
{
	pthread_mutex_lock(&captured_lock);
	assert_true(ncaptured < MAX_BATCHES);
	assert_int_equal(bytes, offsetof(struct tally_batch, words) + b->count * sizeof(__u64));
	captured[ncaptured].b = malloc(sizeof(*b));
	assert_non_null(captured[ncaptured].b);
	memcpy(captured[ncaptured].b, b, bytes);
	captured[ncaptured].bytes = bytes;
	captured[ncaptured].handed_by = gettid();
	ncaptured++;
	pthread_mutex_unlock(&captured_lock);
}

/* ---- decoding ---- */

#define MAX_RECORDS 16384

struct record {
	struct tally_ev ev;
	unsigned batch;			      /* index in captured[] */
	char name[TALLY_KERNEL_NAME_MAX + 1]; /* KERNEL_NAME: its text */
};

static struct record records[MAX_RECORDS];
static unsigned nrecords;

/* Decode every captured batch into records[], checking what holds for all:
 * the header, records that end exactly at count, and each launch's name id
 * named earlier in the same batch (by the same text every time). */
static void decode_all(void)
{
	char *names[64] = { 0 };

	nrecords = 0;
	for (unsigned i = 0; i < ncaptured; i++) {
		const struct tally_batch *b = captured[i].b;
		bool named[64] = { false };
		__u32 pos = 0;

		assert_int_equal(b->magic, TALLY_BATCH_MAGIC);
		assert_int_equal(b->version, TALLY_BATCH_VERSION);
		assert_int_equal(b->source, TALLY_SRC_CUPTI);
		assert_int_equal(b->tid, captured[i].handed_by);
		assert_true(b->heap_id != 0);
		assert_true(b->count > 0 && b->count <= TALLY_BATCH_WORDS);
		while (pos < b->count) {
			struct record *r = &records[nrecords];
			__u32 at = pos;
			assert_true(nrecords < MAX_RECORDS);
			assert_int_equal(tally_ev_next(b->words, b->count, &pos, &r->ev), 0);
			r->batch = i;
			r->name[0] = 0;
			if (r->ev.type == TALLY_EV_GPU_KERNEL_NAME) {
				assert_true(r->ev.bytes <= TALLY_KERNEL_NAME_MAX);
				memcpy(r->name, &b->words[at + 2], r->ev.bytes);
				r->name[r->ev.bytes] = 0;
				/* zero-padded to the word */
				for (__u64 k = r->ev.bytes; k % 8; k++)
					assert_int_equal(((const char *)&b->words[at + 2])[k], 0);
				assert_true(r->ev.n > 0 && r->ev.n < 64);
				if (names[r->ev.n])
					assert_string_equal(names[r->ev.n], r->name);
				else
					names[r->ev.n] = strdup(r->name);
				named[r->ev.n] = true;
			}
			if (r->ev.type == TALLY_EV_GPU_LAUNCH && r->ev.n)
				assert_true(r->ev.n < 64 && named[r->ev.n]);
			nrecords++;
		}
		assert_int_equal(pos, b->count);
	}
	for (unsigned i = 0; i < 64; i++)
		free(names[i]);
}

/* Hand over this thread's batch and decode everything captured. */
static void collect(void)
{
	tally_cupti_flush_self();
	decode_all();
}

/* records[] without the KERNEL_NAME records, for plain sequences. */
static unsigned plain(struct record *out[], unsigned max)
{
	unsigned n = 0;

	for (unsigned i = 0; i < nrecords; i++)
		if (records[i].ev.type != TALLY_EV_GPU_KERNEL_NAME && n < max)
			out[n++] = &records[i];
	return n;
}

static void assert_ev(const struct record *r, uint8_t type, uint8_t term, uint16_t group,
		      uint32_t n, uint64_t bytes)
{
	assert_int_equal(r->ev.type, type);
	assert_int_equal(r->ev.term, term);
	assert_int_equal(r->ev.group, group);
	assert_int_equal(r->ev.n, n);
	assert_int_equal(r->ev.bytes, bytes);
}

/* ---- calling the handler as CUPTI would ---- */

/* ENTER then EXIT of one driver call returning rc. */
static void call_named(CUpti_CallbackId cbid, const void *params, CUresult rc, const char *symbol)
{
	CUresult ret = rc;
	CUpti_CallbackData cb = {
		.callbackSite = CUPTI_API_ENTER,
		.functionName = "cuSynthesized",
		.functionParams = params,
		.functionReturnValue = &ret,
		.symbolName = symbol,
	};

	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
	cb.callbackSite = CUPTI_API_EXIT;
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, cbid, &cb);
}

static void call(CUpti_CallbackId cbid, const void *params, CUresult rc)
{
	call_named(cbid, params, rc, NULL);
}

static void module_loaded(size_t cubin_size)
{
	CUpti_ModuleResourceData mod = { .moduleId = 7, .cubinSize = cubin_size, .pCubin = NULL };
	CUpti_ResourceData rd = { .context = NULL, .resourceDescriptor = &mod };

	tally_cupti_dispatch(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
}

#define FN(x) ((CUfunction)(uintptr_t)(x))

static void launch_kernel(CUfunction f, const char *symbol, CUresult rc)
{
	cuLaunchKernel_params p = { .f = f, .gridDimX = 1, .blockDimX = 32 };

	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel, &p, rc, symbol);
}

static CUdeviceptr mem_alloc(CUdeviceptr at, size_t bytes)
{
	CUdeviceptr out = at;
	cuMemAlloc_v2_params p = { .dptr = &out, .bytesize = bytes };

	call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &p, CUDA_SUCCESS);
	return out;
}

static void mem_free(CUdeviceptr ptr, CUresult rc)
{
	cuMemFree_v2_params p = { .dptr = ptr };

	call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &p, rc);
}

/* ---- fixture: fresh state for each test ---- */

static int setup(void **state)
{
	(void)state;
	tally_cupti_records_reset();
	tally_cupti_blocks_reset();
	tally_cupti_kernel_names_reset();
	for (unsigned i = 0; i < ncaptured; i++)
		free(captured[i].b);
	ncaptured = 0;
	nrecords = 0;
	fake_group = 0;
	fake_driver_name = NULL;
	fake_driver_calls = 0;
	fake_ms = 1000;
	tally_cupti_hooks = (struct tally_cupti_hooks){
		.sink = capture_sink,
		.func_get_name = fake_func_get_name,
		.now_ms = fake_now_ms,
	};
	return 0;
}

static unsigned char *fixture_bufs[3]; /* freed by teardown, even after a failure */

static int teardown(void **state)
{
	(void)state;
	for (unsigned i = 0; i < 3; i++) {
		free(fixture_bufs[i]);
		fixture_bufs[i] = NULL;
	}
	tally_cupti_records_reset();
	for (unsigned i = 0; i < ncaptured; i++)
		free(captured[i].b);
	ncaptured = 0;
	tally_cupti_blocks_reset();
	tally_cupti_kernel_names_reset();
	return 0;
}

/* ---- launches ---- */

static void launch__success__name_record_then_launch_with_its_id(void **state)
{
	(void)state;
	launch_kernel(FN(0x1000), "_Z6kernelPf", CUDA_SUCCESS);
	collect();
	assert_int_equal(ncaptured, 1);
	assert_int_equal(nrecords, 2);
	assert_ev(&records[0], TALLY_EV_GPU_KERNEL_NAME, 0, 0, 1, strlen("_Z6kernelPf"));
	assert_string_equal(records[0].name, "_Z6kernelPf");
	assert_ev(&records[1], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	/* 2 words of name record + 2 of text + 2 of launch */
	assert_int_equal(captured[0].b->count, 6);
	assert_int_equal(captured[0].b->seq_first, 0);
	assert_int_equal(captured[0].b->tid, gettid());
}

static void launch__same_kernel_again__name_once_then_only_its_id(void **state)
{
	(void)state;
	launch_kernel(FN(0x1000), "alpha", CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "alpha", CUDA_SUCCESS);
	launch_kernel(FN(0x2000), "beta", CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "alpha", CUDA_SUCCESS);
	/* another handle of the same kernel text (another context): same id */
	launch_kernel(FN(0x3000), "alpha", CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 7);
	assert_ev(&records[0], TALLY_EV_GPU_KERNEL_NAME, 0, 0, 1, 5);
	assert_string_equal(records[0].name, "alpha");
	assert_ev(&records[1], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[3], TALLY_EV_GPU_KERNEL_NAME, 0, 0, 2, 4);
	assert_string_equal(records[3].name, "beta");
	assert_ev(&records[4], TALLY_EV_GPU_LAUNCH, 0, 0, 2, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[5], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[6], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_int_equal(tally_cupti_kernel_names_count(), 2);
}

static void launch__every_entry_point__its_api_and_ptsz_as_base(void **state)
{
	CUlaunchConfig cfg = { .gridDimX = 1, .blockDimX = 1 };
	cuLaunchKernel_ptsz_params k_ptsz = { .f = FN(0x1100) };
	cuLaunchKernelEx_params ex = { .config = &cfg, .f = FN(0x1200) };
	cuLaunchKernelEx_ptsz_params ex_ptsz = { .config = &cfg, .f = FN(0x1300) };
	cuLaunchCooperativeKernel_params coop = { .f = FN(0x1400) };
	cuLaunchCooperativeKernel_ptsz_params coop_ptsz = { .f = FN(0x1500) };
	CUDA_LAUNCH_PARAMS list[2] = { { .function = FN(0x1600) }, { .function = FN(0x1700) } };
	cuLaunchCooperativeKernelMultiDevice_params multi = { .launchParamsList = list,
							      .numDevices = 2 };
	struct record *r[16];

	(void)state;
	fake_driver_name = "from_driver";
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernel_ptsz, &k_ptsz, CUDA_SUCCESS, "k_ptsz");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx, &ex, CUDA_SUCCESS, "ex");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &ex_ptsz, CUDA_SUCCESS,
		   "ex_ptsz");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel, &coop, CUDA_SUCCESS, "coop");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernel_ptsz, &coop_ptsz, CUDA_SUCCESS,
		   "coop_ptsz");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, &multi,
		   CUDA_SUCCESS, "multi0");
	collect();
	assert_int_equal(plain(r, 16), 8);
	const uint64_t api[8] = {
		TALLY_GPU_API_LAUNCH_KERNEL,
		TALLY_GPU_API_LAUNCH_KERNEL,
		TALLY_GPU_API_LAUNCH_KERNEL_EX,
		TALLY_GPU_API_LAUNCH_KERNEL_EX,
		TALLY_GPU_API_LAUNCH_COOPERATIVE,
		TALLY_GPU_API_LAUNCH_COOPERATIVE,
		TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI,
		TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI,
	};
	for (unsigned i = 0; i < 8; i++) {
		assert_int_equal(r[i]->ev.type, TALLY_EV_GPU_LAUNCH);
		assert_int_equal(r[i]->ev.bytes, api[i]);
	}
	/* one id per kernel; the multi-device launch's second kernel is named
	 * by the driver (symbolName names the first) */
	for (unsigned i = 0; i < 8; i++)
		assert_int_equal(r[i]->ev.n, i + 1);
	assert_string_equal(records[nrecords - 4].name, "multi0");
	assert_string_equal(records[nrecords - 2].name, "from_driver");
}

static void launch__error__launch_failed_with_the_cuda_result(void **state)
{
	cuLaunchKernelEx_ptsz_params ex = { .f = FN(0x1200) };
	CUDA_LAUNCH_PARAMS list[1] = { { .function = FN(0x1600) } };
	cuLaunchCooperativeKernelMultiDevice_params multi = { .launchParamsList = list,
							      .numDevices = 1 };

	(void)state;
	fake_group = 4;
	launch_kernel(FN(0x1000), "k", CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES);
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchKernelEx_ptsz, &ex, CUDA_ERROR_INVALID_VALUE,
		   "ex");
	call_named(CUPTI_DRIVER_TRACE_CBID_cuLaunchCooperativeKernelMultiDevice, &multi,
		   CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, "m");
	collect();
	/* no name records: a refused launch names nothing */
	assert_int_equal(nrecords, 3);
	assert_ev(&records[0], TALLY_EV_GPU_LAUNCH_FAILED, 0, 4, CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES,
		  TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[1], TALLY_EV_GPU_LAUNCH_FAILED, 0, 4, CUDA_ERROR_INVALID_VALUE,
		  TALLY_GPU_API_LAUNCH_KERNEL_EX);
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH_FAILED, 0, 4,
		  CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE, TALLY_GPU_API_LAUNCH_COOPERATIVE_MULTI);
	assert_int_equal(tally_cupti_kernel_names_count(), 0);
}

static void graph_launch__counted_apart__and_refused_as_launch_failed(void **state)
{
	cuGraphLaunch_params g = { .hGraph = (CUgraphExec)(uintptr_t)0x77 };
	cuGraphLaunch_ptsz_params g_ptsz = { .hGraphExec = (CUgraphExec)(uintptr_t)0x78 };

	(void)state;
	fake_group = 2;
	call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &g, CUDA_SUCCESS);
	call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch_ptsz, &g_ptsz, CUDA_SUCCESS);
	call(CUPTI_DRIVER_TRACE_CBID_cuGraphLaunch, &g, CUDA_ERROR_INVALID_HANDLE);
	collect();
	assert_int_equal(nrecords, 3);
	assert_ev(&records[0], TALLY_EV_GPU_GRAPH_LAUNCH, 0, 2, 0, TALLY_GPU_API_GRAPH_LAUNCH);
	assert_ev(&records[1], TALLY_EV_GPU_GRAPH_LAUNCH, 0, 2, 0, TALLY_GPU_API_GRAPH_LAUNCH);
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH_FAILED, 0, 2, CUDA_ERROR_INVALID_HANDLE,
		  TALLY_GPU_API_GRAPH_LAUNCH);
}

static void launch__no_symbol_name__asks_the_driver_once_per_handle(void **state)
{
	(void)state;
	fake_driver_name = "_Z9from_drvv";
	launch_kernel(FN(0x1000), NULL, CUDA_SUCCESS);
	launch_kernel(FN(0x1000), NULL, CUDA_SUCCESS);
	assert_int_equal(fake_driver_calls, 1);
	/* neither knows: launched, unnamed, asked again next time */
	fake_driver_name = NULL;
	launch_kernel(FN(0x2000), NULL, CUDA_SUCCESS);
	launch_kernel(FN(0x2000), NULL, CUDA_SUCCESS);
	assert_int_equal(fake_driver_calls, 3);
	collect();
	assert_int_equal(nrecords, 5);
	assert_string_equal(records[0].name, "_Z9from_drvv");
	assert_ev(&records[1], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[3], TALLY_EV_GPU_LAUNCH, 0, 0, 0, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[4], TALLY_EV_GPU_LAUNCH, 0, 0, 0, TALLY_GPU_API_LAUNCH_KERNEL);
}

static void launch__name_longer_than_max__cut(void **state)
{
	char name[TALLY_KERNEL_NAME_MAX + 45];

	(void)state;
	for (size_t i = 0; i < sizeof(name) - 1; i++)
		name[i] = (char)('a' + i % 26);
	name[sizeof(name) - 1] = 0;
	launch_kernel(FN(0x1000), name, CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 2);
	assert_int_equal(records[0].ev.bytes, TALLY_KERNEL_NAME_MAX);
	assert_memory_equal(records[0].name, name, TALLY_KERNEL_NAME_MAX);
	assert_int_equal(captured[0].b->count, 2 + TALLY_KERNEL_NAME_MAX / 8 + 2);
}

static void launch__after_an_unload__handle_may_name_another_kernel(void **state)
{
	CUmodule mod = (CUmodule)(uintptr_t)0x5000;
	cuModuleLoadData_params load = { .module = &mod, .image = "// ptx\n" };
	cuModuleUnload_params unload = { .hmod = mod };

	(void)state;
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, &load, CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "old_kernel", CUDA_SUCCESS);
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &unload, CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "new_kernel", CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 6);
	assert_string_equal(records[1].name, "old_kernel");
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_string_equal(records[4].name, "new_kernel");
	assert_ev(&records[5], TALLY_EV_GPU_LAUNCH, 0, 0, 2, TALLY_GPU_API_LAUNCH_KERNEL);
}

/* ---- batches ---- */

static void batch__name_and_launch_would_not_fit__handed_over_first(void **state)
{
	(void)state;
	/* a batch less one two-word record: room for 2; a name and its
	 * launch need 2 + 1 + 2 */
	const unsigned n = TALLY_BATCH_WORDS / 2 - 1;
	for (unsigned i = 0; i < n; i++)
		mem_alloc(0x10000 + i * 0x100, 64);
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	collect();
	assert_int_equal(ncaptured, 2);
	assert_int_equal(captured[0].b->count, 2 * n);
	assert_int_equal(captured[1].b->count, 5);
	assert_int_equal(captured[1].b->seq_first, 2 * n);
	assert_int_equal(captured[1].b->heap_id, captured[0].b->heap_id);
	assert_int_equal(records[n].batch, 1);
	assert_int_equal(records[n].ev.type, TALLY_EV_GPU_KERNEL_NAME);
}

static void batch__full__handed_over_and_numbered_by_words(void **state)
{
	(void)state;
	/* a batch of two-word records, and one more */
	const unsigned n = TALLY_BATCH_WORDS / 2 + 1;
	for (unsigned i = 0; i < n; i++)
		mem_alloc(0x10000 + i * 0x100, 64);
	assert_int_equal(ncaptured, 1);
	assert_int_equal(captured[0].b->count, TALLY_BATCH_WORDS);
	collect();
	assert_int_equal(ncaptured, 2);
	assert_int_equal(captured[1].b->count, 2);
	assert_int_equal(captured[1].b->seq_first, TALLY_BATCH_WORDS);
	assert_int_equal(nrecords, n);
}

static void batch__each_batch_names_its_kernels_again(void **state)
{
	(void)state;
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	tally_cupti_flush_self();
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	collect();
	assert_int_equal(ncaptured, 2);
	assert_int_equal(nrecords, 5);
	assert_int_equal(records[2].batch, 1);
	assert_ev(&records[2], TALLY_EV_GPU_KERNEL_NAME, 0, 0, 1, 1);
	assert_ev(&records[4], TALLY_EV_GPU_LAUNCH, 0, 0, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_int_equal(captured[1].b->seq_first, captured[0].b->count);
}

static void batch__older_than_50ms__handed_over_at_next_callback(void **state)
{
	(void)state;
	mem_alloc(0x10000, 64);
	fake_ms += TALLY_CUPTI_FLUSH_MS - 1;
	mem_free(0xdead0000, CUDA_SUCCESS); /* a callback that records nothing */
	assert_int_equal(ncaptured, 0);
	fake_ms += 1;
	mem_free(0xdead0000, CUDA_SUCCESS);
	assert_int_equal(ncaptured, 1);
	assert_int_equal(captured[0].b->count, 2);
}

struct idle_thread {
	pthread_barrier_t recorded, swept;
	uint64_t heap_id_seen;
	pid_t tid;
};

static void *idle_thread_main(void *arg)
{
	struct idle_thread *t = arg;

	t->tid = gettid();
	mem_alloc(0x70000, 4096);
	pthread_barrier_wait(&t->recorded);
	pthread_barrier_wait(&t->swept); /* idle: no callback of its own */
	return NULL;
}

static void batch__idle_threads_old_batch__handed_over_by_another_thread(void **state)
{
	struct idle_thread t;
	pthread_t th;

	(void)state;
	pthread_barrier_init(&t.recorded, NULL, 2);
	pthread_barrier_init(&t.swept, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, idle_thread_main, &t), 0);
	pthread_barrier_wait(&t.recorded);
	fake_ms += TALLY_CUPTI_FLUSH_MS;
	mem_free(0xdead0000, CUDA_SUCCESS); /* main's callback sweeps */
	pthread_mutex_lock(&captured_lock);
	assert_int_equal(ncaptured, 1);
	assert_int_equal(captured[0].b->tid, gettid()); /* handed over by main */
	assert_int_equal(captured[0].handed_by, gettid());
	assert_int_equal(captured[0].b->count, 2);
	pthread_mutex_unlock(&captured_lock);
	pthread_barrier_wait(&t.swept);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&t.recorded);
	pthread_barrier_destroy(&t.swept);
	decode_all();
	assert_ev(&records[0], TALLY_EV_GPU_DEVICE_MEM, 0, 0, 0, 4096);
}

static void *launching_thread_main(void *arg)
{
	*(pid_t *)arg = gettid();
	launch_kernel(FN(0x9000), "thread_kernel", CUDA_SUCCESS);
	return NULL;
}

static void batch__thread_exit__hands_over_its_stream(void **state)
{
	pthread_t th;
	pid_t tid = 0;

	(void)state;
	launch_kernel(FN(0x1000), "main_kernel", CUDA_SUCCESS);
	assert_int_equal(pthread_create(&th, NULL, launching_thread_main, &tid), 0);
	pthread_join(th, NULL);
	assert_int_equal(ncaptured, 1); /* the thread's, at its exit */
	assert_int_equal(captured[0].b->tid, tid);
	collect();
	assert_int_equal(ncaptured, 2);
	assert_int_equal(captured[1].b->tid, gettid());
	assert_true(captured[0].b->heap_id != captured[1].b->heap_id);
	assert_int_equal(captured[0].b->seq_first, 0);
	assert_int_equal(captured[1].b->seq_first, 0);
	/* ids are process-wide, names travel in each stream */
	assert_string_equal(records[0].name, "thread_kernel");
	assert_int_equal(records[0].ev.n, 2);
	assert_string_equal(records[2].name, "main_kernel");
	assert_int_equal(records[2].ev.n, 1);
}

static void batch__process_exit__everything_handed_over_then_each_record(void **state)
{
	(void)state;
	mem_alloc(0x10000, 64);
	tally_cupti_flush_all();
	assert_int_equal(ncaptured, 1);
	mem_free(0x10000, CUDA_SUCCESS); /* the runtime's exit handlers, after ours */
	assert_int_equal(ncaptured, 2);
	decode_all();
	assert_ev(&records[1], TALLY_EV_GPU_DEVICE_MEM, 1, 0, 0, 64);
}

/* ---- threads together ---- */

#define STRESS_THREADS 4
#define STRESS_OPS 600

static void *stress_thread_main(void *arg)
{
	uintptr_t t = (uintptr_t)arg;
	static const char *kernels[4] = { "k0", "k1", "k2", "k3" };

	for (unsigned i = 0; i < STRESS_OPS; i++) {
		CUdeviceptr p = 0x100000000ull * (t + 1) + i * 0x1000;
		mem_alloc(p, 100 + i);
		launch_kernel(FN(0x1000 + 0x10 * (i % 4)), kernels[i % 4], CUDA_SUCCESS);
		mem_free(p, CUDA_SUCCESS);
		if (t == 0)
			fake_ms += 7; /* age flushes and sweeps happen along the way */
	}
	return NULL;
}

static int batch_by_stream(const void *a, const void *b)
{
	const struct tally_batch *x = ((const struct captured *)a)->b;
	const struct tally_batch *y = ((const struct captured *)b)->b;

	if (x->heap_id != y->heap_id)
		return x->heap_id < y->heap_id ? -1 : 1;
	return x->seq_first < y->seq_first ? -1 : x->seq_first > y->seq_first;
}

static void batch__threads_together__every_record_once_streams_contiguous(void **state)
{
	pthread_t th[STRESS_THREADS];
	uint64_t alloc = 0, freed = 0, launches = 0, expect = 0;

	(void)state;
	for (uintptr_t t = 0; t < STRESS_THREADS; t++)
		assert_int_equal(pthread_create(&th[t], NULL, stress_thread_main, (void *)t), 0);
	for (unsigned t = 0; t < STRESS_THREADS; t++)
		pthread_join(th[t], NULL);
	collect();
	for (unsigned i = 0; i < nrecords; i++) {
		const struct tally_ev *e = &records[i].ev;
		if (e->type == TALLY_EV_GPU_DEVICE_MEM)
			*(e->term ? &freed : &alloc) += e->bytes;
		if (e->type == TALLY_EV_GPU_LAUNCH)
			launches++;
	}
	for (unsigned i = 0; i < STRESS_OPS; i++)
		expect += 100 + i;
	assert_int_equal(alloc, expect * STRESS_THREADS);
	assert_int_equal(freed, expect * STRESS_THREADS);
	assert_int_equal(launches, STRESS_OPS * STRESS_THREADS);
	assert_int_equal(tally_cupti_kernel_names_count(), 4);
	assert_int_equal(tally_cupti_blocks_count(), 0);
	assert_int_equal(tally_cupti_counters.unknown_frees, 0);
	/* each stream's batches follow one another word for word */
	qsort(captured, ncaptured, sizeof(captured[0]), batch_by_stream);
	for (unsigned i = 1; i < ncaptured; i++) {
		const struct tally_batch *prev = captured[i - 1].b, *b = captured[i].b;
		if (b->heap_id == prev->heap_id)
			assert_int_equal(b->seq_first, prev->seq_first + prev->count);
		else
			assert_int_equal(b->seq_first, 0);
	}
}

/* ---- device memory ---- */

static void device_mem__every_allocator_and_free__bytes_both_ways(void **state)
{
	CUdeviceptr d[6] = { 0x100000, 0x200000, 0x300000, 0x400000, 0x500000, 0x600000 };
	CUdeviceptr out;
	struct record *r[16];
	CUstream s = NULL;
	CUmemoryPool pool = (CUmemoryPool)(uintptr_t)0x99;

	(void)state;
	out = d[0];
	cuMemAlloc_v2_params a0 = { .dptr = &out, .bytesize = 1000 };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &a0, CUDA_SUCCESS);
	out = d[1];
	cuMemAllocManaged_params a1 = { .dptr = &out, .bytesize = 2000, .flags = 1 };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocManaged, &a1, CUDA_SUCCESS);
	out = d[2];
	cuMemAllocAsync_params a2 = { .dptr = &out, .bytesize = 3000, .hStream = s };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync, &a2, CUDA_SUCCESS);
	out = d[3];
	cuMemAllocAsync_ptsz_params a3 = { .dptr = &out, .bytesize = 4000, .hStream = s };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocAsync_ptsz, &a3, CUDA_SUCCESS);
	out = d[4];
	cuMemAllocFromPoolAsync_params a4 = { .dptr = &out, .bytesize = 5000, .pool = pool };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync, &a4, CUDA_SUCCESS);
	out = d[5];
	cuMemAllocFromPoolAsync_ptsz_params a5 = { .dptr = &out, .bytesize = 6000, .pool = pool };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocFromPoolAsync_ptsz, &a5, CUDA_SUCCESS);
	assert_int_equal(tally_cupti_blocks_count(), 6);

	cuMemFree_v2_params f0 = { .dptr = d[5] };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFree_v2, &f0, CUDA_SUCCESS);
	cuMemFreeAsync_params f1 = { .dptr = d[0], .hStream = s };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync, &f1, CUDA_SUCCESS);
	cuMemFreeAsync_ptsz_params f2 = { .dptr = d[3], .hStream = s };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeAsync_ptsz, &f2, CUDA_SUCCESS);
	assert_int_equal(tally_cupti_blocks_count(), 3);
	collect();
	assert_int_equal(plain(r, 16), 9);
	for (unsigned i = 0; i < 6; i++)
		assert_ev(r[i], TALLY_EV_GPU_DEVICE_MEM, 0, 0, 0, 1000 * (i + 1));
	assert_ev(r[6], TALLY_EV_GPU_DEVICE_MEM, 1, 0, 0, 6000);
	assert_ev(r[7], TALLY_EV_GPU_DEVICE_MEM, 1, 0, 0, 1000);
	assert_ev(r[8], TALLY_EV_GPU_DEVICE_MEM, 1, 0, 0, 4000);
	assert_int_equal(tally_cupti_counters.unknown_frees, 0);
}

static void device_mem__pitch__pitch_times_height(void **state)
{
	CUdeviceptr out = 0x100000;
	size_t pitch = 512; /* what the driver chose for 500-byte rows */
	cuMemAllocPitch_v2_params p = {
		.dptr = &out,
		.pPitch = &pitch,
		.WidthInBytes = 500,
		.Height = 100,
		.ElementSizeBytes = 4,
	};

	(void)state;
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocPitch_v2, &p, CUDA_SUCCESS);
	mem_free(0x100000, CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 2);
	assert_ev(&records[0], TALLY_EV_GPU_DEVICE_MEM, 0, 0, 0, 512 * 100);
	assert_ev(&records[1], TALLY_EV_GPU_DEVICE_MEM, 1, 0, 0, 512 * 100);
}

static void device_mem__failed_calls__change_nothing(void **state)
{
	CUdeviceptr out = 0x100000;
	cuMemAlloc_v2_params a = { .dptr = &out, .bytesize = 1 << 30 };

	(void)state;
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2, &a, CUDA_ERROR_OUT_OF_MEMORY);
	assert_int_equal(tally_cupti_blocks_count(), 0);
	mem_alloc(0x200000, 64);
	mem_free(0x200000, CUDA_ERROR_INVALID_VALUE); /* still allocated */
	assert_int_equal(tally_cupti_blocks_count(), 1);
	collect();
	assert_int_equal(nrecords, 1);
	assert_ev(&records[0], TALLY_EV_GPU_DEVICE_MEM, 0, 0, 0, 64);
	assert_int_equal(tally_cupti_counters.unknown_frees, 0);
}

static void device_mem__free_of_unknown_pointer__ignored_and_counted(void **state)
{
	(void)state;
	mem_free(0xdead0000, CUDA_SUCCESS); /* allocated before the tracer came */
	mem_free(0, CUDA_SUCCESS);	    /* cuMemFree(0): nothing at all */
	mem_alloc(0x100000, 64);
	mem_free(0x100000, CUDA_SUCCESS);
	mem_free(0x100000, CUDA_SUCCESS); /* twice: the second is unknown */
	collect();
	assert_int_equal(nrecords, 2);
	assert_int_equal(tally_cupti_counters.unknown_frees, 2);
}

static void device_mem__vmm_create_release__own_handles(void **state)
{
	CUmemGenericAllocationHandle h = 0x4242;
	CUmemAllocationProp prop = { .type = CU_MEM_ALLOCATION_TYPE_PINNED };
	cuMemCreate_params c = { .handle = &h, .size = 2 << 20, .prop = &prop };
	cuMemRelease_params r = { .handle = 0x4242 };

	(void)state;
	fake_group = 9;
	call(CUPTI_DRIVER_TRACE_CBID_cuMemCreate, &c, CUDA_SUCCESS);
	mem_free(0x4242, CUDA_SUCCESS); /* not a device pointer: unknown */
	fake_group = 0;
	call(CUPTI_DRIVER_TRACE_CBID_cuMemRelease, &r, CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 2);
	assert_ev(&records[0], TALLY_EV_GPU_DEVICE_MEM, 0, 9, 0, 2 << 20);
	assert_ev(&records[1], TALLY_EV_GPU_DEVICE_MEM, 1, 9, 0, 2 << 20);
	assert_int_equal(tally_cupti_counters.unknown_frees, 1);
}

/* ---- pinned host memory ---- */

static void host_pinned__alloc_register_free_unregister(void **state)
{
	char buf_a[16], buf_b[16], buf_c[16];
	void *out;
	struct record *r[8];

	(void)state;
	out = buf_a;
	cuMemHostAlloc_params ha = { .pp = &out, .bytesize = 100, .Flags = 0 };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemHostAlloc, &ha, CUDA_SUCCESS);
	out = buf_b;
	cuMemAllocHost_v2_params ah = { .pp = &out, .bytesize = 200 };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemAllocHost_v2, &ah, CUDA_SUCCESS);
	cuMemHostRegister_v2_params hr = { .p = buf_c, .bytesize = 300, .Flags = 0 };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemHostRegister_v2, &hr, CUDA_SUCCESS);

	cuMemFreeHost_params wrong = { .p = buf_c }; /* registered, not allocated */
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &wrong, CUDA_SUCCESS);
	cuMemFreeHost_params fa = { .p = buf_a };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &fa, CUDA_SUCCESS);
	cuMemFreeHost_params fb = { .p = buf_b };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemFreeHost, &fb, CUDA_SUCCESS);
	cuMemHostUnregister_params un = { .p = buf_c };
	call(CUPTI_DRIVER_TRACE_CBID_cuMemHostUnregister, &un, CUDA_SUCCESS);
	collect();
	assert_int_equal(plain(r, 8), 6);
	assert_ev(r[0], TALLY_EV_GPU_HOST_PINNED, 0, 0, 0, 100);
	assert_ev(r[1], TALLY_EV_GPU_HOST_PINNED, 0, 0, 0, 200);
	assert_ev(r[2], TALLY_EV_GPU_HOST_PINNED, 0, 0, 0, 300);
	assert_ev(r[3], TALLY_EV_GPU_HOST_PINNED, 1, 0, 0, 100);
	assert_ev(r[4], TALLY_EV_GPU_HOST_PINNED, 1, 0, 0, 200);
	assert_ev(r[5], TALLY_EV_GPU_HOST_PINNED, 1, 0, 0, 300);
	assert_int_equal(tally_cupti_counters.unknown_frees, 1);
	assert_int_equal(tally_cupti_blocks_count(), 0);
}

/* ---- groups ---- */

static void group__records_carry_the_current_group__frees_their_allocations(void **state)
{
	(void)state;
	fake_group = 3;
	mem_alloc(0x100000, 64);
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	fake_group = 5;
	mem_free(0x100000, CUDA_SUCCESS);
	launch_kernel(FN(0x1000), "k", CUDA_SUCCESS);
	fake_group = TALLY_MAX_GROUPS; /* out of range: root */
	mem_alloc(0x200000, 32);
	collect();
	assert_int_equal(nrecords, 6);
	assert_ev(&records[0], TALLY_EV_GPU_DEVICE_MEM, 0, 3, 0, 64);
	assert_ev(&records[2], TALLY_EV_GPU_LAUNCH, 0, 3, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[3], TALLY_EV_GPU_DEVICE_MEM, 1, 3, 0, 64);
	assert_ev(&records[4], TALLY_EV_GPU_LAUNCH, 0, 5, 1, TALLY_GPU_API_LAUNCH_KERNEL);
	assert_ev(&records[5], TALLY_EV_GPU_DEVICE_MEM, 0, 0, 0, 32);
}

/* ---- images ---- */

/* The image-size definition itself is tested on synthesized images, CUDA
 * toolkit or not, by tests/test_image_size.c; here, on nvcc's own output,
 * and the magic numbers against the toolkit's. */
_Static_assert(IMAGE_FATBIN_WRAPPER_MAGIC == FATBINC_MAGIC, "one fatbin wrapper magic");

#ifdef TALLY_CUPTI_FIXTURES
/* A fixture file, NUL-terminated in memory (as a PTX string must be). */
static unsigned char *fixture(const char *name, size_t *size)
{
	char path[4096];
	struct stat st;
	unsigned char *buf;
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", TALLY_CUPTI_FIXTURES, name);
	if (stat(path, &st))
		return NULL;
	buf = calloc(1, (size_t)st.st_size + 1);
	f = fopen(path, "rb");
	assert_non_null(buf);
	assert_non_null(f);
	assert_int_equal(fread(buf, 1, (size_t)st.st_size, f), (size_t)st.st_size);
	fclose(f);
	*size = (size_t)st.st_size;
	return buf;
}
#endif

static void image__nvcc_fixtures__load_and_unload_each_entry_point(void **state)
{
#ifndef TALLY_CUPTI_FIXTURES
	(void)state;
	skip_because("built without nvcc (no CUDA toolkit)");
#else
	size_t ptx_size, cubin_size, fatbin_size;
	unsigned char *ptx = fixture_bufs[0] = fixture("k.ptx", &ptx_size);
	unsigned char *cubin = fixture_bufs[1] = fixture("k.cubin", &cubin_size);
	unsigned char *fatbin = fixture_bufs[2] = fixture("k.fatbin", &fatbin_size);
	char cubin_path[4096];
	CUmodule m[5];
	CUlibrary l[3];
	struct record *r[32];

	(void)state;
	if (!ptx || !cubin || !fatbin)
		skip_because("the nvcc fixtures were not built");
	snprintf(cubin_path, sizeof(cubin_path), "%s/k.cubin", TALLY_CUPTI_FIXTURES);
	/* the formats, straight */
	assert_int_equal(tally_cupti_image_size(ptx), ptx_size);
	assert_int_equal(tally_cupti_image_size(cubin), cubin_size);
	assert_int_equal(tally_cupti_image_size(fatbin), fatbin_size);
	__fatBinC_Wrapper_t wrapper = { FATBINC_MAGIC, FATBINC_VERSION,
					(const unsigned long long *)fatbin, NULL };
	assert_int_equal(tally_cupti_image_size(&wrapper), fatbin_size);

	fake_group = 6;
	for (unsigned i = 0; i < 5; i++)
		m[i] = (CUmodule)(uintptr_t)(0x5000 + i * 0x10);
	for (unsigned i = 0; i < 3; i++)
		l[i] = (CUlibrary)(uintptr_t)(0x6000 + i * 0x10);
	cuModuleLoadData_params md0 = { .module = &m[0], .image = ptx };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, &md0, CUDA_SUCCESS);
	cuModuleLoadDataEx_params md1 = { .module = &m[1], .image = cubin };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadDataEx, &md1, CUDA_SUCCESS);
	cuModuleLoadFatBinary_params md2 = { .module = &m[2], .fatCubin = fatbin };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary, &md2, CUDA_SUCCESS);
	cuModuleLoadFatBinary_params md3 = { .module = &m[3], .fatCubin = &wrapper };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadFatBinary, &md3, CUDA_SUCCESS);
	cuModuleLoadData_params md4 = { .module = &m[4], .image = ptx };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, &md4, CUDA_ERROR_INVALID_PTX);
	cuLibraryLoadData_params ld0 = { .library = &l[0], .code = &wrapper };
	call(CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, &ld0, CUDA_SUCCESS);
	cuLibraryLoadData_params ld1 = { .library = &l[1], .code = ptx };
	call(CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadData, &ld1, CUDA_SUCCESS);
	cuLibraryLoadFromFile_params ld2 = { .library = &l[2], .fileName = cubin_path };
	call(CUPTI_DRIVER_TRACE_CBID_cuLibraryLoadFromFile, &ld2, CUDA_SUCCESS);
	assert_int_equal(tally_cupti_blocks_count(), 7);

	fake_group = 0;
	for (unsigned i = 0; i < 4; i++) {
		cuModuleUnload_params u = { .hmod = m[i] };
		call(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &u, CUDA_SUCCESS);
	}
	for (unsigned i = 0; i < 3; i++) {
		cuLibraryUnload_params u = { .library = l[i] };
		call(CUPTI_DRIVER_TRACE_CBID_cuLibraryUnload, &u, CUDA_SUCCESS);
	}
	cuModuleUnload_params never = { .hmod = m[4] }; /* its load failed */
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &never, CUDA_SUCCESS);
	collect();
	const uint64_t sizes[7] = { ptx_size,	 cubin_size, fatbin_size, fatbin_size,
				    fatbin_size, ptx_size,   cubin_size };
	assert_int_equal(plain(r, 32), 14);
	for (unsigned i = 0; i < 7; i++) {
		assert_ev(r[i], TALLY_EV_GPU_IMAGE, 0, 6, 0, sizes[i]);
		assert_ev(r[7 + i], TALLY_EV_GPU_IMAGE, 1, 6, 0, sizes[i]);
	}
	assert_int_equal(tally_cupti_counters.unknown_frees, 1);
	assert_int_equal(tally_cupti_blocks_count(), 0);
#endif
}

static void image__unknown_format__module_loaded_cubin_size_or_nothing(void **state)
{
	static const unsigned char opaque[] = { 0x00, 0x42, 0x42, 0x42 };
	CUmodule m1 = (CUmodule)(uintptr_t)0x5000, m2 = (CUmodule)(uintptr_t)0x5010;
	cuModuleLoadData_params p1 = { .module = &m1, .image = opaque };
	cuModuleLoadData_params p2 = { .module = &m2, .image = opaque };
	CUresult ok = CUDA_SUCCESS;
	CUpti_CallbackData cb = { .callbackSite = CUPTI_API_ENTER,
				  .functionParams = &p1,
				  .functionReturnValue = &ok };

	(void)state;
	/* the resource domain reports the size inside the call */
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
			     &cb);
	module_loaded(4242);
	cb.callbackSite = CUPTI_API_EXIT;
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData,
			     &cb);
	/* a report outside any load call (lazy loading) sizes nothing */
	module_loaded(9999);
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleLoadData, &p2, CUDA_SUCCESS);
	/* the unsized module is still known: its unload is not "unknown" */
	cuModuleUnload_params u2 = { .hmod = m2 };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &u2, CUDA_SUCCESS);
	cuModuleUnload_params u1 = { .hmod = m1 };
	call(CUPTI_DRIVER_TRACE_CBID_cuModuleUnload, &u1, CUDA_SUCCESS);
	collect();
	assert_int_equal(nrecords, 2);
	assert_ev(&records[0], TALLY_EV_GPU_IMAGE, 0, 0, 0, 4242);
	assert_ev(&records[1], TALLY_EV_GPU_IMAGE, 1, 0, 0, 4242);
	assert_int_equal(tally_cupti_counters.unknown_frees, 0);
}

/* ---- the dispatch's edges ---- */

static void dispatch__other_callbacks_and_broken_data__nothing(void **state)
{
	CUdeviceptr out = 0x100000;
	cuMemAlloc_v2_params a = { .dptr = &out, .bytesize = 64 };
	CUpti_CallbackData no_rc = { .callbackSite = CUPTI_API_EXIT, .functionParams = &a };
	CUpti_ResourceData rd = { 0 };

	(void)state;
	call(CUPTI_DRIVER_TRACE_CBID_cuCtxSynchronize, &a, CUDA_SUCCESS);
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			     &no_rc);
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_DRIVER_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			     NULL);
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_RUNTIME_API, CUPTI_DRIVER_TRACE_CBID_cuMemAlloc_v2,
			     &no_rc);
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, &rd);
	tally_cupti_dispatch(CUPTI_CB_DOMAIN_RESOURCE, CUPTI_CBID_RESOURCE_MODULE_LOADED, NULL);
	collect();
	assert_int_equal(ncaptured, 0);
	assert_int_equal(tally_cupti_blocks_count(), 0);
}

static void dispatch__enables_exactly_the_entry_points_it_handles(void **state)
{
	(void)state;
	/* 7 kernel launch, 2 graph, 12 device, 5 pinned, 7 image entry points */
	assert_int_equal(tally_cupti_driver_cbid_count, 7 + 2 + 12 + 5 + 7);
	for (size_t i = 0; i < tally_cupti_driver_cbid_count; i++)
		for (size_t j = i + 1; j < tally_cupti_driver_cbid_count; j++)
			assert_int_not_equal(tally_cupti_driver_cbids[i],
					     tally_cupti_driver_cbids[j]);
}

/* ---- the handle table ---- */

static void handle_map__churn__every_entry_found_until_taken(void **state)
{
	struct tally_cupti_map m = { 0 };
	struct tally_cupti_slot out;
	enum { N = 5000 };

	(void)state;
	for (uint64_t i = 0; i < N; i++)
		assert_int_equal(
			tally_cupti_map_put(&m, 1 + i % 3, 0x7f0000000000 + i * 4096, i, 0), 0);
	assert_int_equal(m.used, N);
	/* take every other one, then check every entry */
	for (uint64_t i = 0; i < N; i += 2)
		assert_int_equal(
			tally_cupti_map_take(&m, 1 + i % 3, 0x7f0000000000 + i * 4096, &out), 0);
	for (uint64_t i = 0; i < N; i++) {
		const struct tally_cupti_slot *s =
			tally_cupti_map_get(&m, 1 + i % 3, 0x7f0000000000 + i * 4096);
		if (i % 2)
			assert_true(s && s->value == i);
		else
			assert_null(s);
		/* another kind, same handle: not the same entry */
		assert_null(tally_cupti_map_get(&m, 4, 0x7f0000000000 + i * 4096));
	}
	assert_int_equal(m.used, N / 2);
	tally_cupti_map_clear(&m);
}

/* CUPTI refused the subscriber (Nsight or Kineto holds it): one record
 * with CUPTI's result and reason, handed over at once (no flush asked), so
 * that the tracer's driver probes count and it says why. */
static void refused__another_subscriber__reason_handed_over_at_once(void **state)
{
	const char *want = "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; held by nsys";
	(void)state;

	tally_cupti_refused(39, "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED", "nsys");
	assert_int_equal(ncaptured, 1);
	decode_all();
	assert_int_equal(nrecords, 1);
	assert_ev(&records[0], TALLY_EV_GPU_CUPTI_REFUSED, 0, 0, 39, strlen(want));
	assert_memory_equal(&captured[0].b->words[2], want, strlen(want));
	/* without a holder's name: the result string alone */
	tally_cupti_refused(999, "CUPTI_ERROR_UNKNOWN", "");
	assert_int_equal(ncaptured, 2);
	decode_all();
	assert_ev(&records[1], TALLY_EV_GPU_CUPTI_REFUSED, 0, 0, 999,
		  strlen("CUPTI_ERROR_UNKNOWN"));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
		T(launch__success__name_record_then_launch_with_its_id),
		T(launch__same_kernel_again__name_once_then_only_its_id),
		T(launch__every_entry_point__its_api_and_ptsz_as_base),
		T(launch__error__launch_failed_with_the_cuda_result),
		T(graph_launch__counted_apart__and_refused_as_launch_failed),
		T(launch__no_symbol_name__asks_the_driver_once_per_handle),
		T(launch__name_longer_than_max__cut),
		T(launch__after_an_unload__handle_may_name_another_kernel),
		T(batch__name_and_launch_would_not_fit__handed_over_first),
		T(batch__full__handed_over_and_numbered_by_words),
		T(batch__each_batch_names_its_kernels_again),
		T(batch__older_than_50ms__handed_over_at_next_callback),
		T(batch__idle_threads_old_batch__handed_over_by_another_thread),
		T(batch__thread_exit__hands_over_its_stream),
		T(batch__process_exit__everything_handed_over_then_each_record),
		T(batch__threads_together__every_record_once_streams_contiguous),
		T(device_mem__every_allocator_and_free__bytes_both_ways),
		T(device_mem__pitch__pitch_times_height),
		T(device_mem__failed_calls__change_nothing),
		T(device_mem__free_of_unknown_pointer__ignored_and_counted),
		T(device_mem__vmm_create_release__own_handles),
		T(host_pinned__alloc_register_free_unregister),
		T(group__records_carry_the_current_group__frees_their_allocations),
		T(image__nvcc_fixtures__load_and_unload_each_entry_point),
		T(image__unknown_format__module_loaded_cubin_size_or_nothing),
		T(dispatch__other_callbacks_and_broken_data__nothing),
		T(dispatch__enables_exactly_the_entry_points_it_handles),
		T(handle_map__churn__every_entry_found_until_taken),
		T(refused__another_subscriber__reason_handed_over_at_once),
#undef T
	};

	return cmocka_run_group_tests_name("cupti", tests, NULL, NULL);
}
