/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * A cgroup named by its id, as the kernel gives it to BPF (its kernfs node,
 * the inode of its directory): its path in the hierarchy that holds the
 * memory controller, cgroup v2's or v1's.
 */
#ifndef TALLY_CGROUP_ID_H
#define TALLY_CGROUP_ID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The path of cgroup `id` ("/a/b", "/" for the root) in the memory
 * controller's hierarchy (v1: a cgroup mount with the memory option; else
 * cgroup2), as tally's mount namespace shows it: 0, -ENOENT (no such
 * hierarchy mounted, or no directory of that id: the cgroup is gone), or
 * -errno. */
int cgroup_id_path(uint64_t id, bool v1, char *path, size_t len);
/* The same with the mounts read from `mountinfo` (for tests). */
int cgroup_id_path_in(const char *mountinfo, uint64_t id, bool v1, char *path, size_t len);

#endif /* TALLY_CGROUP_ID_H */
