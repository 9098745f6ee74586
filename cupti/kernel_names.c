// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Kernel names travel with launches, interned: each distinct name gets an id
 * (1, 2, ... process-wide) and a TALLY_EV_GPU_KERNEL_NAME record carries the
 * text once per batch (gpu_records.c); launches carry only the id.
 *
 * A launch names its kernel by CUfunction handle, so the path is
 *   handle -> per-thread cache (no lock) -> process table of handles -> name
 * and only a handle's first launch looks at its text (the callback's
 * symbolName, or the driver's cuFuncGetName). Unloading a module or library
 * may free handles the driver later reuses for other kernels, so an unload
 * forgets every handle (a generation number voids the per-thread caches);
 * names and their ids are kept for the life of the process.
 *
 * Names are the traced program's strings: untrusted, cut to
 * TALLY_KERNEL_NAME_MAX bytes here, escaped by whoever shows them. Two names
 * alike in their first TALLY_KERNEL_NAME_MAX bytes share an id.
 */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "../alloc/common/hash.h"

#define FCACHE_SLOTS 64	 /* per thread, direct-mapped by handle */
#define NAMES_MIN_CAP 64 /* slots of the name table, a power of two */
#define KIND_FUNCTION 1	 /* the only kind in the handle table */

struct fcache_entry {
	CUfunction f;
	const struct tally_cupti_name *name;
	uint32_t gen; /* handles_gen when cached; another value: void */
};

static __thread struct fcache_entry fcache[FCACHE_SLOTS];

/* Everything below under names_lock. Invariant: names_count <= names_cap / 2. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;
static struct tally_cupti_name **names; /* open addressing by text */
static size_t names_cap;
static uint32_t names_count;		 /* also the last id given */
static struct tally_cupti_map handles;	 /* CUfunction -> (uintptr_t)name */
static _Atomic uint32_t handles_gen = 1; /* bumped when handles are forgotten */

static uint64_t text_hash(const char *text, uint32_t len)
{
	return hash_fnv1a64(text, len);
}

static int names_grow(void)
{
	size_t cap = names_cap ? names_cap * 2 : NAMES_MIN_CAP;
	struct tally_cupti_name **t = calloc(cap, sizeof(*t));

	if (!t)
		return -ENOMEM;
	for (size_t i = 0; i < names_cap; i++) {
		struct tally_cupti_name *nm = names[i];
		if (!nm)
			continue;
		size_t j = text_hash(nm->text, nm->len) & (cap - 1);
		while (t[j])
			j = (j + 1) & (cap - 1);
		t[j] = nm;
	}
	free(names);
	names = t;
	names_cap = cap;
	return 0;
}

/* The interned name of text (len bytes); NULL without memory. */
static const struct tally_cupti_name *names_intern(const char *text, uint32_t len)
{
	struct tally_cupti_name *nm;
	size_t i;

	if ((names_count + 1) * 2 > names_cap && names_grow())
		return NULL;
	for (i = text_hash(text, len) & (names_cap - 1); names[i]; i = (i + 1) & (names_cap - 1))
		if (names[i]->len == len && !memcmp(names[i]->text, text, len))
			return names[i];
	nm = malloc(sizeof(*nm) + len);
	if (!nm)
		return NULL;
	nm->id = ++names_count;
	nm->len = len;
	memcpy(nm->text, text, len);
	names[i] = nm;
	return nm;
}

/* The name of f by its text, asking the driver if the callback had none. */
static const char *kernel_text(CUfunction f, const char *symbol)
{
	const char *text = NULL;

	if (symbol && symbol[0])
		return symbol;
	if (f && tally_cupti_hooks.func_get_name &&
	    tally_cupti_hooks.func_get_name(&text, f) == CUDA_SUCCESS && text && text[0])
		return text;
	return NULL;
}

const struct tally_cupti_name *tally_cupti_kernel_name(CUfunction f, const char *symbol)
{
	uint32_t gen = atomic_load_explicit(&handles_gen, memory_order_acquire);
	struct fcache_entry *c = &fcache[((uintptr_t)f >> 4) % FCACHE_SLOTS];
	const struct tally_cupti_slot *s;
	const struct tally_cupti_name *nm = NULL;
	const char *text;

	if (f && c->f == f && c->gen == gen)
		return c->name;
	if (f) {
		pthread_mutex_lock(&names_lock);
		s = tally_cupti_map_get(&handles, KIND_FUNCTION, (uintptr_t)f);
		if (s)
			nm = (const struct tally_cupti_name *)(uintptr_t)s->value;
		pthread_mutex_unlock(&names_lock);
	}
	if (!nm) {
		/* outside the lock: cuFuncGetName is a call into the driver */
		text = kernel_text(f, symbol);
		if (!text)
			return NULL;
		pthread_mutex_lock(&names_lock);
		nm = names_intern(text, (uint32_t)strnlen(text, TALLY_KERNEL_NAME_MAX));
		/* without memory for the handle, the next launch asks again */
		if (nm && f)
			tally_cupti_map_put(&handles, KIND_FUNCTION, (uintptr_t)f, (uintptr_t)nm,
					    0);
		pthread_mutex_unlock(&names_lock);
		if (!nm)
			return NULL;
	}
	if (f)
		*c = (struct fcache_entry){ f, nm, gen };
	return nm;
}

void tally_cupti_kernel_names_forget_handles(void)
{
	pthread_mutex_lock(&names_lock);
	tally_cupti_map_clear(&handles);
	atomic_fetch_add_explicit(&handles_gen, 1, memory_order_release);
	pthread_mutex_unlock(&names_lock);
}

uint32_t tally_cupti_kernel_names_count(void)
{
	uint32_t n;

	pthread_mutex_lock(&names_lock);
	n = names_count;
	pthread_mutex_unlock(&names_lock);
	return n;
}

void tally_cupti_kernel_names_reset(void)
{
	pthread_mutex_lock(&names_lock);
	for (size_t i = 0; i < names_cap; i++)
		free(names[i]);
	free(names);
	names = NULL;
	names_cap = 0;
	names_count = 0;
	tally_cupti_map_clear(&handles);
	atomic_fetch_add_explicit(&handles_gen, 1, memory_order_release);
	pthread_mutex_unlock(&names_lock);
}
