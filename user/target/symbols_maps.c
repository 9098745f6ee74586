// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A traced process's executable mappings, from /proc/PID/maps (symbols.h):
 * the file-backed ones and the vDSO, what the symbolizer needs to go from a
 * process address to an offset in a file.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "symbols.h"

#define DELETED " (deleted)"

/* One line of /proc/PID/maps into *map: 1 when it is kept (executable, and
 * file-backed or the vDSO), 0 when not, -ENOMEM. */
static int maps_parse_line(char *line, struct sym_map *map)
{
	unsigned long long start, end, off, ino;
	unsigned int major, minor;
	size_t len, dl = strlen(DELETED);
	char perms[5], *path;
	int pos = 0;

	if (sscanf(line, "%llx-%llx %4s %llx %x:%x %llu %n", &start, &end, perms, &off, &major,
		   &minor, &ino, &pos) < 7 ||
	    !pos || strlen(perms) < 3 || perms[2] != 'x')
		return 0;
	/* the path is the rest of the line, spaces and all */
	path = line + pos;
	len = strcspn(path, "\n");
	path[len] = 0;
	if (path[0] != '/' && strcmp(path, "[vdso]"))
		return 0;
	map->deleted = len > dl && !strcmp(path + len - dl, DELETED);
	if (map->deleted)
		path[len - dl] = 0;
	map->path = strdup(path);
	if (!map->path)
		return -ENOMEM;
	map->start = start;
	map->end = end;
	map->offset = off;
	map->dev = makedev(major, minor);
	map->ino = ino;
	return 1;
}

static int map_cmp(const void *a, const void *b)
{
	const struct sym_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int maps_push(struct sym_maps *m, size_t *cap, const struct sym_map *map)
{
	if (m->n == *cap) {
		size_t ncap = *cap ? *cap * 2 : 32;
		struct sym_map *v = realloc(m->v, ncap * sizeof(*v));

		if (!v)
			return -ENOMEM;
		m->v = v;
		*cap = ncap;
	}
	m->v[m->n++] = *map;
	return 0;
}

int sym_maps_read(int pid, struct sym_maps *m)
{
	struct sym_maps got = { 0 };
	char file[64], *line = NULL;
	size_t cap = 0, len = 0;
	int err = 0;
	FILE *f;

	snprintf(file, sizeof(file), "/proc/%d/maps", pid);
	f = fopen(file, "re");
	if (!f)
		return errno == ENOENT ? -ESRCH : -errno;
	while (getline(&line, &len, f) >= 0) {
		struct sym_map map = { 0 };
		int kept = maps_parse_line(line, &map);

		if (kept < 0 || (kept && maps_push(&got, &cap, &map))) {
			free(map.path);
			err = -ENOMEM;
			goto out;
		}
	}
	if (ferror(f)) {
		/* the process ended while we read: ESRCH from the kernel */
		err = errno ? -errno : -EIO;
		goto out;
	}
	/* the kernel lists them in order; sorted anyway, find relies on it */
	if (got.n)
		qsort(got.v, got.n, sizeof(*got.v), map_cmp);
	sym_maps_free(m);
	*m = got;
	got = (struct sym_maps){ 0 };
out:
	sym_maps_free(&got);
	free(line);
	fclose(f);
	return err;
}

const struct sym_map *sym_maps_find(const struct sym_maps *m, uint64_t addr)
{
	size_t lo = 0, hi = m ? m->n : 0;

	/* lo: the first mapping starting after addr; the one before may hold it */
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (m->v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || addr >= m->v[lo - 1].end)
		return NULL;
	return &m->v[lo - 1];
}

int sym_maps_copy(struct sym_maps *dst, const struct sym_maps *src)
{
	struct sym_maps got = { 0 };

	if (src->n) {
		got.v = calloc(src->n, sizeof(*got.v));
		if (!got.v)
			return -ENOMEM;
	}
	for (; got.n < src->n; got.n++) {
		got.v[got.n] = src->v[got.n];
		got.v[got.n].path = strdup(src->v[got.n].path);
		if (!got.v[got.n].path) {
			sym_maps_free(&got);
			return -ENOMEM;
		}
	}
	sym_maps_free(dst);
	*dst = got;
	return 0;
}

void sym_maps_free(struct sym_maps *m)
{
	if (!m)
		return;
	for (size_t i = 0; i < m->n; i++)
		free(m->v[i].path);
	free(m->v);
	m->v = NULL;
	m->n = 0;
}
