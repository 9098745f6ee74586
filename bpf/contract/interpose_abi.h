/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * What tally (user/os/inject.c) and libtally_interpose.so (interpose.c)
 * agree on for the start: the function the injector calls in the process,
 *
 *   void tally_interpose_begin(uint64_t sample_rate, uint64_t flags,
 *                              uint32_t token);
 *
 * and where it tells its outcome: the library's 8-byte variable
 * tally_interpose_outcome, token << 32 | (uint32_t)(0 or -errno), written
 * once the start is done. The call returns through rt_sigreturn, which puts
 * every register back (user/os/inject_call.c), and tally has let go of
 * the thread by then: its return value would reach nobody.
 */
#ifndef TALLY_ALLOC_INTERPOSE_ABI_H
#define TALLY_ALLOC_INTERPOSE_ABI_H

#define TALLY_INTERPOSE_BEGIN "tally_interpose_begin"
#define TALLY_INTERPOSE_OUTCOME "tally_interpose_outcome"
/* the injecting tally holds the target's lock (user/os/target_lock.c): a
 * recording found running is an earlier tally's that died, and is taken
 * over instead of refused */
#define TALLY_INTERPOSE_TAKEOVER 1ULL

#endif
