// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where a target lives (target.h): its mount namespace (a container's
 * libraries are at paths the host does not have: tally reaches them through
 * /proc/PID/root, which libbpf's USDT attach understands), its PID inside
 * its own PID namespace, its cgroup v2 path and the container id that path
 * carries.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "internal.h"
#include "target.h"

/* A container id: Docker, containerd, CRI-O and podman name a container's
 * cgroup after its 64 hex digits ("docker-ID.scope", "cri-containerd-ID.scope",
 * "crio-ID.scope", "libpod-ID.scope", "/docker/ID"). */
#define CONTAINER_ID_LEN 64

bool target_same_mount_ns(pid_t pid)
{
	char path[64];
	struct stat self, them;

	snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
	if (stat("/proc/self/ns/mnt", &self) || stat(path, &them))
		return true; /* not known: the paths as they are */
	return self.st_ino == them.st_ino && self.st_dev == them.st_dev;
}

int target_reach(pid_t pid, char *path, size_t len)
{
	char inside[TARGET_PATH_MAX];

	if (path[0] != '/' || target_same_mount_ns(pid))
		return 0;
	snprintf(inside, sizeof(inside), "%s", path);
	if ((size_t)snprintf(path, len, "/proc/%d/root%s", pid, inside) >= len)
		return -ENAMETOOLONG;
	return 0;
}

pid_t target_ns_pid(pid_t pid)
{
	char path[64], line[256];
	pid_t inner = pid;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/status", pid);
	f = fopen(path, "re");
	if (!f)
		return pid;
	while (fgets(line, sizeof(line), f)) {
		if (strncmp(line, "NSpid:", 6))
			continue;
		/* host PID first, then each nested namespace's: the last is its own */
		for (char *tok = strtok(line + 6, " \t\n"); tok; tok = strtok(NULL, " \t\n"))
			inner = (pid_t)atoi(tok);
		break;
	}
	fclose(f);
	return inner > 0 ? inner : pid;
}

bool target_container_id(const char *path, char *out, size_t len)
{
	const char *found = NULL;
	size_t run = 0;

	/* the last run of exactly 64 hex digits: the innermost container */
	for (const char *c = path;; c++) {
		if (*c && isxdigit((unsigned char)*c)) {
			run++;
			continue;
		}
		if (run == CONTAINER_ID_LEN)
			found = c - run;
		run = 0;
		if (!*c)
			break;
	}
	if (!found || len <= CONTAINER_ID_LEN)
		return false;
	memcpy(out, found, CONTAINER_ID_LEN);
	out[CONTAINER_ID_LEN] = 0;
	return true;
}

int target_cgroup_file(const char *file, char *cgroup, size_t len, char *container, size_t clen)
{
	char line[TARGET_PATH_MAX + 64];
	bool have = false, have_id = false;
	FILE *f = fopen(file, "re");

	if (!f)
		return -errno;
	cgroup[0] = container[0] = 0;
	while (fgets(line, sizeof(line), f)) {
		char *path = strchr(line, ':');
		path = path ? strchr(path + 1, ':') : NULL;
		if (!path)
			continue;
		path++;
		path[strcspn(path, "\n")] = 0;
		/* "0::PATH" is cgroup v2's; a hybrid host may name the container
		 * only in its v1 hierarchies */
		if (!strncmp(line, "0::", 3)) {
			snprintf(cgroup, len, "%s", path);
			have = true;
			if (target_container_id(path, container, clen))
				have_id = true;
		} else if (!have_id) {
			have_id = target_container_id(path, container, clen);
		}
	}
	fclose(f);
	if (!have_id)
		container[0] = 0;
	return have ? 0 : -ENOENT;
}

int target_cgroup(pid_t pid, char *cgroup, size_t len, char *container, size_t clen)
{
	char file[64];

	snprintf(file, sizeof(file), "/proc/%d/cgroup", pid);
	return target_cgroup_file(file, cgroup, len, container, clen);
}

int target_ppid(pid_t pid, pid_t *ppid)
{
	char buf[TARGET_STAT_MAX];
	const char *rest = target_stat(pid, buf, sizeof(buf));
	int parent;

	if (!rest)
		return -errno;
	/* after ") ": state ppid */
	if (sscanf(rest, " %*c %d", &parent) != 1)
		return -EPROTO;
	*ppid = parent;
	return 0;
}
