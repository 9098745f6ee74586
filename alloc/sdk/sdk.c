// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libtally.so: resource groups, yields and rejections. Works with any
 * allocator; when libtally_alloc is loaded too, each group change is passed to
 * it so that allocations are charged to the current group.
 *
 * Every operation is an event through its own USDT probe (provider "tally";
 * five-byte nop sites with semaphores, so untraced they cost one branch):
 *   group_register(id, name)   group_enter(id, prev)   group_exit(restored, left)
 *   yield(group)               reject(group)
 * and the state a late tracer needs lives in tally_registry. The current
 * group is also published in OpenTelemetry's thread context (OTEP 4947,
 * otel_thread_ctx_v1), for profilers other than tally.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdbool.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../common/probes.h"
#include "../../bpf/contract/sdk_registry.h"
#include "../include/tally.h"

#define SDK_API __attribute__((visibility("default")))

TALLY_SEMAPHORE(group_register);
TALLY_SEMAPHORE(group_enter);
TALLY_SEMAPHORE(group_exit);
TALLY_SEMAPHORE(yield);
TALLY_SEMAPHORE(reject);

SDK_API struct tally_registry tally_registry = {
	.magic = TALLY_REGISTRY_MAGIC,
	.version = TALLY_REGISTRY_VERSION,
	.ngroups = 1,
	.names = { "root" },
};

/*
 * OTEP 4947's thread context: otel_thread_ctx_v1, an exported TLS pointer
 * (TLSDESC: the Makefile builds this file with -mtls-dialect=gnu2, which
 * the OTEP recommends) to the record of the thread's context, NULL when it
 * has none. The record is byte-packed, 2-byte aligned: trace-id[16],
 * span-id[8], valid (1), trace-flags, attrs-data-size (uint16, host order),
 * then attrs-data, entries of key index (uint8), length (uint8) and the
 * UTF-8 value. tally has no trace or span: both zero, as the OTEP allows
 * ("zeroes ... none active"), with trace-flags 0; one attribute, key index
 * 0, whose name the OTEP puts in the process context's
 * threadlocal.attribute_key_map (OTEP 4719), which tally does not publish:
 * docs/DESIGN.md §3.1 gives the name it would have, tally.group.
 *
 * One record per group, built when the group is registered and never
 * written again (names are immutable), so that entering a group only
 * switches the pointer, the OTEP's "swap out the pointer" way (its readers
 * read a thread while it is stopped: no fence is needed). In the root group
 * (no group entered) the pointer is NULL. What it costs (callgrind, a loop
 * of enter and exit): 67 instructions a pair before, 90 with the pointer's
 * store through the TLS descriptor (2 of them in glibc's
 * _dl_tlsdesc_return, and the registers its call makes set_current save),
 * 82 initial-exec, the OTEP's other model; NULL first and a fence, 97.
 */
struct otel_thread_ctx_record {
	uint8_t trace_id[16];
	uint8_t span_id[8];
	uint8_t valid;
	uint8_t trace_flags;
	uint16_t attrs_data_size;
	uint8_t attrs_data[2 + TALLY_GROUP_NAME_MAX - 1];
} __attribute__((packed, aligned(2)));
_Static_assert(offsetof(struct otel_thread_ctx_record, attrs_data) == 28,
	       "OTEP 4947's fixed header is 28 bytes");
_Static_assert(sizeof(struct otel_thread_ctx_record) <= 64, "a record in one cache line");
#define OTEL_KEY_GROUP 0 /* tally.group */

SDK_API __thread struct otel_thread_ctx_record *otel_thread_ctx_v1
	__attribute__((tls_model("global-dynamic")));
static struct otel_thread_ctx_record otel_records[TALLY_MAX_GROUPS];

/* group g's record, from its name: under registry_lock, before the group's
 * id can be entered */
static void otel_record_init(uint32_t g, const char *name, size_t len)
{
	struct otel_thread_ctx_record *r = &otel_records[g];

	r->attrs_data[0] = OTEL_KEY_GROUP;
	r->attrs_data[1] = (uint8_t)len;
	memcpy(&r->attrs_data[2], name, len);
	r->attrs_data_size = (uint16_t)(2 + len);
	r->valid = 1;
}

/* One store of the pointer (a relaxed atomic: never torn, never split by
 * the compiler), no NULL first: the OTEP asks for it only before a record
 * visible to readers is rewritten, and these never are. */
static void otel_publish(uint32_t g)
{
	__atomic_store_n(&otel_thread_ctx_v1, g ? &otel_records[g] : NULL, __ATOMIC_RELAXED);
}

/* The allocator's hook; NULL when libtally_alloc is not loaded. */
extern void tally_alloc__set_group(uint32_t group) __attribute__((weak, visibility("default")));

static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static pthread_key_t thread_key;
static __thread uint32_t cur_group;
static __thread struct tally_registry_thread *cur_slot;

static void thread_gone(void *arg)
{
	struct tally_registry_thread *t = arg;
	__atomic_store_n(&t->group, 0, __ATOMIC_RELAXED);
	__atomic_store_n(&t->tid, 0, __ATOMIC_RELEASE);
}

/* before the program can fork: a child must not inherit the probes */
__attribute__((constructor)) static void sdk_init(void)
{
	probe_guard_init(NULL);
}

static void key_init(void)
{
	pthread_key_create(&thread_key, thread_gone);
}

/* The calling thread's slot in the registry, taken on its first group change. */
static struct tally_registry_thread *thread_slot(void)
{
	if (cur_slot)
		return cur_slot;
	pthread_once(&key_once, key_init);
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	for (int i = 0; i < TALLY_MAX_THREADS; i++) {
		uint32_t zero = 0;
		struct tally_registry_thread *t = &tally_registry.threads[i];
		if (__atomic_compare_exchange_n(&t->tid, &zero, tid, false, __ATOMIC_ACQ_REL,
						__ATOMIC_RELAXED)) {
			cur_slot = t;
			pthread_setspecific(thread_key, t);
			return t;
		}
	}
	__atomic_fetch_add(&tally_registry.threads_dropped, 1, __ATOMIC_RELAXED);
	return NULL;
}

static void set_current(uint32_t g)
{
	struct tally_registry_thread *t = thread_slot();
	cur_group = g;
	otel_publish(g);
	if (t)
		__atomic_store_n(&t->group, g, __ATOMIC_RELEASE);
	if (tally_alloc__set_group)
		tally_alloc__set_group(g);
}

SDK_API struct tally_group tally_group_register(const char *name)
{
	struct tally_group g = { TALLY_GROUP_INVALID };
	size_t len;

	if (!name || !(len = strlen(name)) || len >= TALLY_GROUP_NAME_MAX)
		return g;
	pthread_mutex_lock(&registry_lock);
	uint32_t n = tally_registry.ngroups;
	for (uint32_t i = 0; i < n; i++) {
		if (!strcmp(tally_registry.names[i], name)) {
			g.id = i;
			goto out;
		}
	}
	if (n < TALLY_MAX_GROUPS) {
		memcpy(tally_registry.names[n], name, len + 1);
		otel_record_init(n, name, len);
		/* the name is complete before a reader can see the new count */
		__atomic_store_n(&tally_registry.ngroups, n + 1, __ATOMIC_RELEASE);
		g.id = n;
		if (TALLY_TRACED(group_register))
			STAP_PROBE2(tally, group_register, g.id, tally_registry.names[n]);
	}
out:
	pthread_mutex_unlock(&registry_lock);
	return g;
}

SDK_API struct tally_group tally_group_current(void)
{
	return (struct tally_group){ cur_group };
}

SDK_API struct tally_group_guard tally_group_enter(struct tally_group g)
{
	struct tally_group_guard guard = { cur_group };

	if (g.id >= __atomic_load_n(&tally_registry.ngroups, __ATOMIC_ACQUIRE))
		return guard;
	set_current(g.id);
	if (TALLY_TRACED(group_enter))
		STAP_PROBE2(tally, group_enter, g.id, guard.prev);
	return guard;
}

SDK_API void tally_group_exit(struct tally_group_guard guard)
{
	uint32_t left = cur_group;

	if (guard.prev >= TALLY_MAX_GROUPS)
		return;
	set_current(guard.prev);
	if (TALLY_TRACED(group_exit))
		STAP_PROBE2(tally, group_exit, guard.prev, left);
}

/* Probe arguments in registers: a thread-local operand would be described
 * as %fs:(...), which USDT readers (libbpf among them) cannot fetch. */
#define IN_REGISTER(x) __asm__("" : "+r"(x))

SDK_API void tally_yield(void)
{
	uint32_t g = cur_group;

	__atomic_fetch_add(&tally_registry.yields[g], 1, __ATOMIC_RELAXED);
	if (TALLY_TRACED(yield)) {
		IN_REGISTER(g);
		STAP_PROBE1(tally, yield, g);
	}
}

SDK_API void tally_reject(void)
{
	uint32_t g = cur_group;

	__atomic_fetch_add(&tally_registry.rejects[g], 1, __ATOMIC_RELAXED);
	if (TALLY_TRACED(reject)) {
		IN_REGISTER(g);
		STAP_PROBE1(tally, reject, g);
	}
}
