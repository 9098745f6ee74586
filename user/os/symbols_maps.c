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
#include "../util/proc_maps.h"
#include "../util/grow.h"

/* One line of /proc/PID/maps into *map: 1 when it is kept (executable, and
 * file-backed or the vDSO), 0 when not, -ENOMEM. */
static int map_take(const struct maps_line *l, struct sym_map *map)
{
	size_t len = l->path_len;

	if (l->fields != MAPS_INODE || l->perms[2] != 'x')
		return 0;
	if (l->path[0] != '/' && strcmp(l->path, "[vdso]"))
		return 0;
	map->deleted = l->deleted;
	if (map->deleted)
		len -= strlen(MAPS_DELETED);
	map->path = strndup(l->path, len);
	if (!map->path)
		return -ENOMEM;
	map->start = l->start;
	map->end = l->end;
	map->offset = l->offset;
	map->dev = makedev(l->major, l->minor);
	map->ino = l->inode;
	return 1;
}

static int map_cmp(const void *a, const void *b)
{
	const struct sym_map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static int maps_push(struct sym_maps *m, size_t *cap, const struct sym_map *map)
{
	int err = grow((void **)&m->v, cap, m->n + 1, sizeof(*m->v), 32);

	if (err)
		return err;
	m->v[m->n++] = *map;
	return 0;
}

int sym_maps_read(int pid, struct sym_maps *m)
{
	struct sym_maps got = { 0 };
	struct maps_iter it;
	struct maps_line l;
	size_t cap = 0;
	int err, more;

	err = maps_open_pid(&it, pid);
	if (err)
		return err == -ENOENT ? -ESRCH : err;
	while ((more = maps_next(&it, &l)) > 0) {
		struct sym_map map = { 0 };
		int kept = map_take(&l, &map);

		if (kept < 0 || (kept && maps_push(&got, &cap, &map))) {
			free(map.path);
			err = -ENOMEM;
			goto out;
		}
	}
	if (more < 0) {
		/* the process ended while we read: ESRCH from the kernel */
		err = more;
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
	maps_close(&it);
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
