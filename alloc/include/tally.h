/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * tally's app SDK (libtally.so): named resource groups, cooperative yields and
 * back-pressure rejections. Works with any allocator; with libtally_alloc the
 * allocator also charges each allocation to the current group.
 */
#ifndef TALLY_H
#define TALLY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct tally_group {
	uint32_t id; /* 0 is "root"; TALLY_GROUP_INVALID when the registry is full */
};

struct tally_group_guard {
	uint32_t prev; /* the group current before the matching enter */
};

#define TALLY_GROUP_INVALID UINT32_MAX

/* Same name, same token; "root" is id 0. An empty, NULL or too long name, or a
 * full registry (256 groups), gives TALLY_GROUP_INVALID. */
struct tally_group tally_group_register(const char *name);
struct tally_group tally_group_current(void);
/* Entering TALLY_GROUP_INVALID leaves the current group unchanged. */
struct tally_group_guard tally_group_enter(struct tally_group g);
/* Restores the group current before the matching enter. */
void tally_group_exit(struct tally_group_guard guard);
/* A cooperative yield, for runtimes with their own scheduler. */
void tally_yield(void);
/* Work refused by the application's own back-pressure. */
void tally_reject(void);

#ifdef __cplusplus
}
#endif

#endif /* TALLY_H */
