// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally_cupti.so's entry: the CUDA driver loads it through
 * CUDA_INJECTION64_PATH and calls InitializeInjection, its only exported
 * symbol, once, at cuInit. It subscribes one callback to the driver API
 * domain (the entry points of dispatch.c) and to the resource domain
 * (MODULE_LOADED), and hands batches over through the USDT probe
 * tally:batch(batch, bytes), which tally attaches to in this file by path.
 *
 * A guest (docs/STYLE.md rule 6): nothing on stdout, never exits. If CUPTI
 * refuses the subscriber (another profiler holds CUPTI: Nsight, Kineto, a
 * second injection), the library stays inert and says why: to the tracer
 * in a record (whose driver probes then count), else in one line on stderr. While no
 * tracer is attached the callback costs one branch on the probe's
 * semaphore: nothing is recorded, no table grows.
 */
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include <cupti.h>

#include "../alloc/common/probes.h"
#include "internal.h"

TALLY_SEMAPHORE(batch);

static void probe_sink(const struct tally_batch *b, size_t bytes)
{
	if (probe_guard_ok())
		STAP_PROBE2(tally, batch, b, bytes);
}

static void CUPTIAPI cupti_callback(void *userdata, CUpti_CallbackDomain domain,
				    CUpti_CallbackId cbid, const void *cbdata)
{
	(void)userdata;
	if (!TALLY_TRACED(batch))
		return;
	tally_cupti_dispatch(domain, cbid, cbdata);
}

/* cuFuncGetName from the driver that loaded us: never linked (the driver
 * loads us, not the other way round), never loaded by us (RTLD_NOLOAD). */
static void resolve_func_get_name(void)
{
	void *cuda = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
	void *sym = cuda ? dlsym(cuda, "cuFuncGetName") : NULL;

	memcpy(&tally_cupti_hooks.func_get_name, &sym, sizeof(sym));
}

static CUptiResult cupti_subscribe(CUpti_SubscriberHandle *sub, char *holder, size_t holder_size)
{
#ifdef CUpti_SubscriberParams_STRUCT_SIZE
	CUpti_SubscriberParams params = {
		.structSize = CUpti_SubscriberParams_STRUCT_SIZE,
		.subscriberName = "tally",
		.oldSubscriberName = holder,
		.oldSubscriberSize = holder_size,
	};
	return cuptiSubscribe_v2(sub, cupti_callback, NULL, &params);
#else
	(void)holder;
	(void)holder_size;
	return cuptiSubscribe(sub, cupti_callback, NULL);
#endif
}

__attribute__((visibility("default"))) int InitializeInjection(void);

int InitializeInjection(void)
{
	static atomic_bool initialized;
	char holder[CUPTI_OLD_SUBSCRIBER_NAME_MIN_LEN + 1] = "";
	CUpti_SubscriberHandle sub;
	const char *why = NULL;
	unsigned failed = 0;
	CUptiResult res;

	if (atomic_exchange(&initialized, true))
		return 1;
	probe_guard_init(NULL);
	tally_cupti_hooks.sink = probe_sink;
	resolve_func_get_name();
	res = cupti_subscribe(&sub, holder, sizeof(holder) - 1);
	if (res != CUPTI_SUCCESS) {
		if (cuptiGetResultString(res, &why) != CUPTI_SUCCESS || !why)
			why = "error";
		/* a tracer counts through the driver's probes then, and says so;
		 * without one (a hand-set CUDA_INJECTION64_PATH) this line does */
		if (TALLY_TRACED(batch))
			tally_cupti_refused((int)res, why, holder);
		else
			fprintf(stderr,
				"tally_cupti: CUPTI refused the subscriber (%s%s%s): staying inert\n",
				why, holder[0] ? "; held by " : "", holder);
		return 1;
	}
	for (size_t i = 0; i < tally_cupti_driver_cbid_count; i++)
		if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_DRIVER_API,
					tally_cupti_driver_cbids[i]) != CUPTI_SUCCESS)
			failed++;
	if (cuptiEnableCallback(1, sub, CUPTI_CB_DOMAIN_RESOURCE,
				CUPTI_CBID_RESOURCE_MODULE_LOADED) != CUPTI_SUCCESS)
		failed++;
	if (failed)
		fprintf(stderr, "tally_cupti: %u of %zu callbacks could not be enabled\n", failed,
			tally_cupti_driver_cbid_count + 1);
	return 1;
}

/* Process exit: every thread's pending records; records written after this
 * (the CUDA runtime unloads its modules from its own exit handlers) are
 * handed over one by one. */
__attribute__((destructor)) static void cupti_exit(void)
{
	tally_cupti_flush_all();
}
