/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libtally_cupti.so's parts and the contracts between them:
 *
 *   injection.c    InitializeInjection: subscribes to CUPTI, owns the USDT
 *                  probe tally:batch and its semaphore (the only file that
 *                  needs CUPTI's runtime)
 *   dispatch.c     one callback (domain, cbid, cbdata) -> GPU records
 *   gpu_records.c  per-thread streams of struct tally_batch, handed to a sink
 *   kernel_names.c kernel names interned: a handle -> a name -> an id
 *   handle_map.c   allocations, pins and images by handle: {bytes, group}
 *   image_size.c   the size of a PTX, cubin or fatbin image
 *
 * Everything but injection.c is pure enough to be called by a test with
 * synthesized callback data (tests/cupti/test_cupti.c). All symbols are
 * hidden but InitializeInjection.
 */
#ifndef TALLY_CUPTI_INTERNAL_H
#define TALLY_CUPTI_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* cupti.h declares CUPTI's API (called only by injection.c) and brings the
 * callback types, the driver's callback ids and the driver calls' parameter
 * structs (generated_cuda_meta.h, which needs cupti.h's stand-ins for the
 * obsolete _v1 types). */
#include <cupti.h>

#include "../alloc/include/tally.h"
#include "../bpf/contract/tally_events.h"

#define TALLY_CUPTI_FLUSH_MS 50 /* a partial batch waits about this long */

/* ---- image_size.c ---- */

#include "image_size.h" /* tally_cupti_image_size, tally_cupti_file_size */

/* ---- handle_map.c ---- */

/* Which table a handle lives in: a free must find its own kind of handle. */
enum tally_cupti_kind {
	TALLY_CUPTI_DEVICE_PTR = 1, /* CUdeviceptr from cuMemAlloc* */
	TALLY_CUPTI_VMM_HANDLE = 2, /* CUmemGenericAllocationHandle from cuMemCreate */
	TALLY_CUPTI_HOST_ALLOC = 3, /* host pointer from cuMemHostAlloc / cuMemAllocHost */
	TALLY_CUPTI_HOST_REG = 4,   /* host pointer given to cuMemHostRegister */
	TALLY_CUPTI_MODULE = 5,	    /* CUmodule */
	TALLY_CUPTI_LIBRARY = 6,    /* CUlibrary */
};

/* One open-addressing table (linear probing, backward-shift deletion: no
 * tombstones). Not locked: its owner locks. Invariant: used <= cap / 2, cap
 * a power of two or 0. */
struct tally_cupti_map {
	struct tally_cupti_slot *slots;
	size_t cap;  /* slots */
	size_t used; /* live entries */
};

struct tally_cupti_slot {
	uint64_t handle;
	uint32_t kind;	/* enum tally_cupti_kind, or the owner's own; 0: empty slot */
	uint32_t group; /* group charged when it was made */
	uint64_t value; /* bytes, or the owner's value */
};

/* 0, or -ENOMEM (the entry is then not stored); replaces an entry of the same key. */
int tally_cupti_map_put(struct tally_cupti_map *m, uint32_t kind, uint64_t handle, uint64_t value,
			uint32_t group);
/* The entry, or NULL; valid until the next put or take. */
const struct tally_cupti_slot *tally_cupti_map_get(const struct tally_cupti_map *m, uint32_t kind,
						   uint64_t handle);
/* Removes the entry into *out: 0, or -ENOENT. */
int tally_cupti_map_take(struct tally_cupti_map *m, uint32_t kind, uint64_t handle,
			 struct tally_cupti_slot *out);
void tally_cupti_map_clear(struct tally_cupti_map *m);

/* The process's blocks: allocations, pins, images (all kinds above), under
 * one mutex; these calls are not hot. */
int tally_cupti_blocks_put(uint32_t kind, uint64_t handle, uint64_t bytes, uint32_t group);
int tally_cupti_blocks_take(uint32_t kind, uint64_t handle, uint64_t *bytes, uint32_t *group);
size_t tally_cupti_blocks_count(void);
void tally_cupti_blocks_reset(void);

/* ---- kernel_names.c ---- */

/* An interned name: never freed, never changed once published. */
struct tally_cupti_name {
	uint32_t id;  /* 1, 2, ... in order of first sight */
	uint32_t len; /* bytes in text, <= TALLY_KERNEL_NAME_MAX */
	char text[];  /* not NUL-terminated */
};

/* The name of kernel f: from the callback's symbolName if given, else from
 * the driver (hooks.func_get_name). NULL when neither knows it. Fast for a
 * handle this thread has seen since the last unload (a per-thread cache). */
const struct tally_cupti_name *tally_cupti_kernel_name(CUfunction f, const char *symbol);
/* A module or library was unloaded: its function handles may come back as
 * other kernels, so forget every handle (names and ids stay). */
void tally_cupti_kernel_names_forget_handles(void);
uint32_t tally_cupti_kernel_names_count(void);
void tally_cupti_kernel_names_reset(void);

/* ---- gpu_records.c ---- */

/* How the records leave, and what they need from the process; set once
 * before the first callback (injection.c, or a test). */
struct tally_cupti_hooks {
	/* hands a batch over: bytes = header + count words (the USDT probe) */
	void (*sink)(const struct tally_batch *b, size_t bytes);
	/* the driver's cuFuncGetName, or NULL */
	CUresult (*func_get_name)(const char **name, CUfunction f);
	/* milliseconds on a monotonic clock, or NULL for CLOCK_MONOTONIC_COARSE */
	uint64_t (*now_ms)(void);
};
extern struct tally_cupti_hooks tally_cupti_hooks;

/* What could not be recorded; read by tests, and by a tracer from process
 * memory (the symbol is in .symtab). Relaxed atomics. */
struct tally_cupti_counters {
	uint64_t unknown_frees;	  /* frees, unpins, unloads of handles never seen */
	uint64_t untracked;	  /* allocations not recorded: no memory for the table */
	uint64_t dropped_records; /* records lost: no memory for a thread's stream */
	uint64_t batches;	  /* batches handed over */
};
extern struct tally_cupti_counters tally_cupti_counters;

/* The calling thread's resource group: libtally.so's tally_group_current()
 * (looked up once) or 0. */
uint32_t tally_cupti_group(void);

/* Append one two-word record to the calling thread's stream. */
void tally_cupti_emit(uint8_t type, uint8_t term, uint32_t group, uint32_t n, uint64_t bytes);
/* A launch of a named kernel (nm may be NULL: n = 0): the KERNEL_NAME record
 * goes first if this batch has not carried it yet, in the same batch. */
void tally_cupti_emit_launch(const struct tally_cupti_name *nm, uint32_t group, uint32_t api);
/* At the end of a callback: hand over this thread's batch if older than
 * TALLY_CUPTI_FLUSH_MS, and, at most every TALLY_CUPTI_FLUSH_MS, the old
 * batches of other threads (idle threads' records would wait otherwise). */
void tally_cupti_tick(void);
/* CUPTI refused the subscriber: a TALLY_EV_GPU_CUPTI_REFUSED record with
 * CUPTI's reason (`why`, its result string; `holder`, who holds it, or
 * NULL), handed over at once: the tracer's driver probes count instead. */
void tally_cupti_refused(int result, const char *why, const char *holder);
/* Hand over the calling thread's batch now. */
void tally_cupti_flush_self(void);
/* Process exit: hand over every thread's batch; from then on every record
 * is handed over as it is written (the driver's own exit handlers still
 * unload modules after our destructor). */
void tally_cupti_flush_all(void);
/* Tests: forget every stream (after flushing them) and all state. */
void tally_cupti_records_reset(void);

/* The per-thread state (dispatch.c needs the module-load correlation). */
struct tally_cupti_thread {
	/* module image load in progress on this thread: the resource domain's
	 * MODULE_LOADED cubinSize seen since its API entry (0: none) */
	bool loading;
	uint64_t loaded_cubin_size;
};
struct tally_cupti_thread *tally_cupti_thread(void);

/* ---- dispatch.c ---- */

/* One CUPTI callback: cbdata is a CUpti_CallbackData (driver API domain) or
 * a CUpti_ResourceData (resource domain). The caller has checked that a
 * tracer is attached. */
void tally_cupti_dispatch(CUpti_CallbackDomain domain, CUpti_CallbackId cbid, const void *cbdata);

/* The driver callbacks dispatch() handles, for injection.c to enable. */
extern const CUpti_CallbackId tally_cupti_driver_cbids[];
extern const size_t tally_cupti_driver_cbid_count;

#endif /* TALLY_CUPTI_INTERNAL_H */
