/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * libtally.so's tally_group_current, seen from a library tally puts in
 * someone else's process (the interposer, the CUPTI library): the group the
 * calling thread is in, when the program uses the SDK.
 *
 * - A weak reference, bound when the library is loaded to the process's
 *   tally_group_current (libtally.so's, or a program's own), NULL without
 *   one.
 * - No dlsym: one that fails (RTLD_DEFAULT in a process without the SDK)
 *   leaves the thread a dlerror message the program did not cause, and a
 *   CUDA program checking dlerror() after its own dlopen read ours.
 * - Nothing is loaded: a process without the SDK stays so.
 */
#ifndef TALLY_SDK_LOOKUP_H
#define TALLY_SDK_LOOKUP_H

#include "../include/tally.h"

extern __attribute__((weak)) struct tally_group tally_group_current(void);

/* tally_group_current of the process, or NULL without one. */
static inline struct tally_group (*sdk_lookup_group_current(void))(void)
{
	return tally_group_current;
}

#endif
