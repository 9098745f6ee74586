// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The app SDK (libtally.so): registry, nesting, per-thread state in process
 * memory, yields and rejections. Built twice: alone under the sanitizers
 * (the SDK with any allocator), and linked with libtally_alloc
 * (WITH_TALLY_ALLOC), where allocations are charged to the current group.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cmocka.h>

#include "../bpf/contract/sdk_registry.h"
#include "../alloc/include/tally.h"
#ifdef WITH_TALLY_ALLOC
#include "../alloc/include/tally_alloc.h"
#endif

extern struct tally_registry tally_registry;

static struct tally_registry_thread *my_slot(void)
{
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	for (int i = 0; i < TALLY_MAX_THREADS; i++)
		if (tally_registry.threads[i].tid == tid)
			return &tally_registry.threads[i];
	return NULL;
}

static void sdk__register_same_name_same_token_root_is_zero(void **state)
{
	(void)state;
	assert_int_equal(tally_group_register("root").id, 0);
	struct tally_group a = tally_group_register("alpha"), b = tally_group_register("beta");
	assert_int_not_equal(a.id, 0);
	assert_int_not_equal(a.id, b.id);
	assert_int_equal(tally_group_register("alpha").id, a.id);
	assert_string_equal(tally_registry.names[a.id], "alpha");
	assert_true(tally_registry.ngroups > b.id);
	assert_int_equal(tally_registry.magic, TALLY_REGISTRY_MAGIC);
}

static void sdk__bad_names_give_the_invalid_token(void **state)
{
	(void)state;
	char longname[TALLY_GROUP_NAME_MAX + 1];
	memset(longname, 'x', sizeof(longname) - 1);
	longname[sizeof(longname) - 1] = '\0';
	assert_int_equal(tally_group_register(NULL).id, TALLY_GROUP_INVALID);
	assert_int_equal(tally_group_register("").id, TALLY_GROUP_INVALID);
	assert_int_equal(tally_group_register(longname).id, TALLY_GROUP_INVALID);
	/* entering the invalid token changes nothing */
	struct tally_group_guard g = tally_group_enter((struct tally_group){ TALLY_GROUP_INVALID });
	assert_int_equal(tally_group_current().id, 0);
	tally_group_exit(g);
	assert_int_equal(tally_group_current().id, 0);
}

static void sdk__nested_enter_exit_restores_and_is_visible_in_memory(void **state)
{
	(void)state;
	struct tally_group a = tally_group_register("outer"), b = tally_group_register("inner");
	struct tally_group_guard ga = tally_group_enter(a);
	assert_int_equal(tally_group_current().id, a.id);
	assert_non_null(my_slot());
	assert_int_equal(my_slot()->group, a.id);
	struct tally_group_guard gb = tally_group_enter(b);
	assert_int_equal(tally_group_current().id, b.id);
	assert_int_equal(my_slot()->group, b.id);
	struct tally_group_guard gb2 = tally_group_enter(b); /* re-entering is fine */
	tally_group_exit(gb2);
	assert_int_equal(tally_group_current().id, b.id);
	tally_group_exit(gb);
	assert_int_equal(tally_group_current().id, a.id);
	tally_group_exit(ga);
	assert_int_equal(tally_group_current().id, 0);
	assert_int_equal(my_slot()->group, 0);
}

/* OTEP 4947's thread context (alloc/sdk/sdk.c), read as its readers do: the
 * exported TLS pointer, then the record's bytes at the OTEP's offsets. */
extern __thread const uint8_t *otel_thread_ctx_v1;

static void otel_expect(const char *name)
{
	const uint8_t *r = otel_thread_ctx_v1;
	size_t len = strlen(name);
	uint16_t size;

	assert_non_null(r);
	assert_int_equal((uintptr_t)r % 2, 0);
	for (int i = 0; i < 24; i++) /* no trace-id, no span-id */
		assert_int_equal(r[i], 0);
	assert_int_equal(r[24], 1); /* valid */
	assert_int_equal(r[25], 0); /* trace-flags */
	memcpy(&size, &r[26], sizeof(size));
	assert_int_equal(size, 2 + len);
	assert_int_equal(r[28], 0); /* key index 0: tally.group */
	assert_int_equal(r[29], len);
	assert_memory_equal(&r[30], name, len);
}

static void sdk__otel_thread_ctx_holds_the_current_group(void **state)
{
	(void)state;
	struct tally_group a = tally_group_register("otel_outer");
	struct tally_group b = tally_group_register("otel_inner_group_31_bytes_long_");

	assert_int_not_equal(b.id, TALLY_GROUP_INVALID);
	assert_null(otel_thread_ctx_v1); /* the root group: no context */
	struct tally_group_guard ga = tally_group_enter(a);
	otel_expect("otel_outer");
	struct tally_group_guard gb = tally_group_enter(b);
	otel_expect("otel_inner_group_31_bytes_long_");
	tally_group_exit(gb);
	otel_expect("otel_outer");
	tally_group_exit(ga);
	assert_null(otel_thread_ctx_v1);
}

static void sdk__yields_and_rejects_count_per_group(void **state)
{
	(void)state;
	struct tally_group g = tally_group_register("sched");
	uint64_t y0 = tally_registry.yields[g.id], r0 = tally_registry.rejects[g.id];
	uint64_t yroot = tally_registry.yields[0];
	struct tally_group_guard guard = tally_group_enter(g);
	for (int i = 0; i < 5; i++)
		tally_yield();
	tally_reject();
	tally_group_exit(guard);
	tally_yield();
	assert_int_equal(tally_registry.yields[g.id] - y0, 5);
	assert_int_equal(tally_registry.rejects[g.id] - r0, 1);
	assert_int_equal(tally_registry.yields[0] - yroot, 1);
}

static void *thread_in_group(void *arg)
{
	struct tally_group *g = arg;
	tally_group_enter(*g);
	struct tally_registry_thread *slot = my_slot();
	return slot && slot->group == g->id ? slot : NULL;
}

static void sdk__threads_have_their_own_group_and_free_their_slot(void **state)
{
	(void)state;
	struct tally_group g = tally_group_register("worker");
	pthread_t th;
	void *slot;
	assert_int_equal(pthread_create(&th, NULL, thread_in_group, &g), 0);
	assert_int_equal(pthread_join(th, &slot), 0);
	assert_non_null(slot);
	/* the thread is gone: its slot is free again */
	assert_int_equal(((struct tally_registry_thread *)slot)->tid, 0);
	assert_int_equal(tally_group_current().id, 0);
}

static void sdk__registry_full_gives_invalid(void **state)
{
	(void)state;
	char name[16];
	uint32_t last = 0;
	for (int i = 0; i < TALLY_MAX_GROUPS + 5; i++) {
		snprintf(name, sizeof(name), "g%d", i);
		uint32_t id = tally_group_register(name).id;
		if (id != TALLY_GROUP_INVALID)
			last = id;
	}
	assert_int_equal(last, TALLY_MAX_GROUPS - 1);
	assert_int_equal(tally_group_register("one-too-many").id, TALLY_GROUP_INVALID);
	assert_int_equal(tally_registry.ngroups, TALLY_MAX_GROUPS);
}

#ifdef WITH_TALLY_ALLOC
static void sdk__allocator_charges_the_current_group(void **state)
{
	(void)state;
	struct tally_group g = tally_group_register("alloc");
	assert_true(g.id < TALLY_MAX_GROUPS);
	struct tally_group_stats before, after;
	assert_int_equal(tally_alloc_group_stats(g.id, &before), 0);
	struct tally_group_guard guard = tally_group_enter(g);
	/* volatile: the compiler may not drop an unused malloc/free pair */
	char *volatile p = malloc(1000), *volatile big = malloc(1 << 20);
	tally_group_exit(guard);
	free(p); /* from root: still charged to "alloc" */
	tally_alloc_group_stats(g.id, &after);
	assert_int_equal(after.allocated_bytes - before.allocated_bytes, 1000 + (1 << 20));
	assert_int_equal(after.deallocated_bytes - before.deallocated_bytes, 1000);
	free(big);
	tally_alloc_group_stats(g.id, &after);
	assert_int_equal(after.allocated_bytes - after.deallocated_bytes, 0);
}
#endif

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(sdk__register_same_name_same_token_root_is_zero),
		cmocka_unit_test(sdk__bad_names_give_the_invalid_token),
		cmocka_unit_test(sdk__nested_enter_exit_restores_and_is_visible_in_memory),
		cmocka_unit_test(sdk__yields_and_rejects_count_per_group),
		cmocka_unit_test(sdk__otel_thread_ctx_holds_the_current_group),
		cmocka_unit_test(sdk__threads_have_their_own_group_and_free_their_slot),
#ifdef WITH_TALLY_ALLOC
		cmocka_unit_test(sdk__allocator_charges_the_current_group),
#endif
		/* last: it fills the registry */
		cmocka_unit_test(sdk__registry_full_gives_invalid),
	};
#ifdef WITH_TALLY_ALLOC
	return cmocka_run_group_tests_name("sdk_with_tally_alloc", tests, NULL, NULL);
#else
	return cmocka_run_group_tests_name("sdk", tests, NULL, NULL);
#endif
}
