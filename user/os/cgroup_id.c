// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A cgroup's path from its id (cgroup_id.h): the hierarchy's mount found in
 * /proc/self/mountinfo, then its directories walked until one's inode is
 * the id (kernfs gives readdir the node's id as d_ino, so no stat is needed).
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cgroup_id.h"

/* A walk's bounds: a cgroup tree deeper or larger than this is not searched
 * further (the path is then not known, and said so). */
#define WALK_MAX_DEPTH 32
#define WALK_MAX_DIRS 100000

struct walk {
	uint64_t id;
	unsigned dirs;
	char *path; /* the directories below the mount, as walked */
	size_t len;
};

/* Whether the comma-separated list `opts` has `word`. */
static bool has_opt(const char *opts, const char *word)
{
	size_t n = strlen(word);

	for (const char *p = opts; p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL)
		if (!strncmp(p, word, n) && (p[n] == ',' || p[n] == 0 || p[n] == '\n'))
			return true;
	return false;
}

/* The mount point and root of the hierarchy wanted, from one mountinfo
 * line: "ID PARENT MAJ:MIN ROOT POINT OPTS [TAGS...] - TYPE SOURCE SUPER". */
static bool mount_of(char *line, bool v1, char *point, size_t plen, char *root, size_t rlen)
{
	char *sep = strstr(line, " - "), *f[5], *save = NULL;
	char type[32], source[64], super[512];

	if (!sep || sscanf(sep + 3, "%31s %63s %511s", type, source, super) != 3)
		return false;
	*sep = 0;
	f[0] = strtok_r(line, " ", &save);
	for (int i = 1; i < 5; i++)
		f[i] = f[i - 1] ? strtok_r(NULL, " ", &save) : NULL;
	if (!f[4])
		return false;
	if (v1 ? strcmp(type, "cgroup") || !has_opt(super, "memory") : strcmp(type, "cgroup2"))
		return false;
	snprintf(root, rlen, "%s", strcmp(f[3], "/") ? f[3] : "");
	snprintf(point, plen, "%s", f[4]);
	return true;
}

/* Depth first below the directory open as fd, whose path below the mount
 * is w->path: 1 when found (w->path holds it), 0 when not, -errno. */
static int walk_dir(struct walk *w, int fd, unsigned depth)
{
	DIR *d = fdopendir(fd);
	struct dirent *e;
	size_t at = strlen(w->path);
	int found = 0;

	if (!d) {
		close(fd);
		return -errno;
	}
	while (!found && (e = readdir(d))) {
		if (e->d_type != DT_DIR || e->d_name[0] == '.')
			continue;
		if (++w->dirs > WALK_MAX_DIRS)
			break;
		if (at + 1 + strlen(e->d_name) >= w->len)
			continue;
		snprintf(w->path + at, w->len - at, "/%s", e->d_name);
		if (e->d_ino == w->id) {
			found = 1;
			break;
		}
		int sub = depth < WALK_MAX_DEPTH ?
				  openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_CLOEXEC) :
				  -1;
		if (sub >= 0)
			found = walk_dir(w, sub, depth + 1) > 0;
		if (!found)
			w->path[at] = 0;
	}
	closedir(d);
	return found;
}

int cgroup_id_path_in(const char *mountinfo, uint64_t id, bool v1, char *path, size_t len)
{
	char point[512], root[512], under[4096] = "";
	struct walk w = { .id = id, .path = under, .len = sizeof(under) };
	char *line = NULL;
	size_t cap = 0;
	bool mounted = false;
	int fd, found;
	FILE *f = fopen(mountinfo, "re");

	if (!f)
		return -errno;
	while (!mounted && getline(&line, &cap, f) > 0)
		mounted = mount_of(line, v1, point, sizeof(point), root, sizeof(root));
	free(line);
	fclose(f);
	if (!mounted)
		return -ENOENT;
	/* the hierarchy's root directory: kernfs numbers it 1 */
	if (id == 1 && !root[0]) {
		snprintf(path, len, "/");
		return 0;
	}
	fd = open(point, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	found = walk_dir(&w, fd, 0);
	if (found <= 0)
		return found < 0 ? found : -ENOENT;
	snprintf(path, len, "%s%s", root, under);
	return 0;
}

int cgroup_id_path(uint64_t id, bool v1, char *path, size_t len)
{
	return cgroup_id_path_in("/proc/self/mountinfo", id, v1, path, len);
}
