// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/* /proc/PID/maps, one line at a time (proc_maps.h). */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "proc_maps.h"

static bool blank(char c)
{
	return c == ' ' || c == '\t';
}

/* A field ends at a blank or at the end of the line. */
static bool field_end(char c)
{
	return !c || blank(c);
}

static const char *skip_blanks(const char *s)
{
	while (blank(*s))
		s++;
	return s;
}

/* Up to `max` digits of `base` (16 or 10) at *s into *v, without overflow:
 * true when at least one was read and no digit follows. */
static bool number(const char **s, unsigned int base, unsigned int max, uint64_t *v)
{
	const char *p = *s;
	uint64_t x = 0;
	unsigned int n = 0;

	for (;; p++, n++) {
		unsigned int d;

		if (*p >= '0' && *p <= '9')
			d = (unsigned int)(*p - '0');
		else if (base == 16 && *p >= 'a' && *p <= 'f')
			d = (unsigned int)(*p - 'a' + 10);
		else if (base == 16 && *p >= 'A' && *p <= 'F')
			d = (unsigned int)(*p - 'A' + 10);
		else
			break;
		if (n == max || x > (UINT64_MAX - d) / base)
			return false;
		x = x * base + d;
	}
	if (!n)
		return false;
	*s = p;
	*v = x;
	return true;
}

/* "major:minor" in hex, each at most 8 digits. */
static bool dev(const char **s, struct maps_line *l)
{
	const char *p = *s;
	uint64_t major, minor;

	if (!number(&p, 16, 8, &major) || *p++ != ':' || !number(&p, 16, 8, &minor))
		return false;
	l->major = (unsigned int)major;
	l->minor = (unsigned int)minor;
	*s = p;
	return true;
}

/* The fields before the path; returns how many were read, and leaves *s
 * after the last. */
static enum maps_fields fields(const char **s, struct maps_line *l)
{
	const char *p = *s;
	size_t n;

	if (!number(&p, 16, 16, &l->start))
		return MAPS_NONE;
	if (*p++ != '-' || !number(&p, 16, 16, &l->end) || !field_end(*p))
		return MAPS_START;
	p = skip_blanks(p);
	for (n = 0; n < sizeof(l->perms) - 1 && !field_end(p[n]); n++)
		l->perms[n] = p[n];
	if (!n || !field_end(p[n]))
		return MAPS_END;
	p = skip_blanks(p + n);
	if (!number(&p, 16, 16, &l->offset) || !field_end(*p))
		return MAPS_PERMS;
	p = skip_blanks(p);
	if (!dev(&p, l) || !field_end(*p))
		return MAPS_OFFSET;
	p = skip_blanks(p);
	if (!number(&p, 10, 20, &l->inode) || !field_end(*p))
		return MAPS_DEV;
	*s = p;
	return MAPS_INODE;
}

bool maps_path_deleted(const char *path, size_t len)
{
	size_t d = strlen(MAPS_DELETED);

	return len > d && !strcmp(path + len - d, MAPS_DELETED);
}

enum maps_fields maps_parse_line(char *line, struct maps_line *l)
{
	const char *p = line;

	*l = (struct maps_line){ .path = "" };
	l->len = strcspn(line, "\n");
	line[l->len] = 0;
	l->fields = fields(&p, l);
	if (l->fields != MAPS_INODE)
		return l->fields;
	/* the path is the rest of the line, spaces and all, after the blanks
	 * that align it */
	while (isspace((unsigned char)*p))
		p++;
	l->path = p;
	l->path_len = strlen(p);
	l->deleted = maps_path_deleted(p, l->path_len);
	return l->fields;
}

int maps_open(struct maps_iter *it, const char *file)
{
	*it = (struct maps_iter){ 0 };
	it->f = fopen(file, "re");
	return it->f ? 0 : -errno;
}

int maps_open_pid(struct maps_iter *it, int pid)
{
	char file[32];

	snprintf(file, sizeof(file), "/proc/%d/maps", pid);
	return maps_open(it, file);
}

int maps_next(struct maps_iter *it, struct maps_line *l)
{
	/* getline: the whole line, however long; the error flag on ENOMEM too */
	if (getline(&it->buf, &it->cap, it->f) < 0)
		return ferror(it->f) ? (errno ? -errno : -EIO) : 0;
	maps_parse_line(it->buf, l);
	return 1;
}

void maps_close(struct maps_iter *it)
{
	if (it->f)
		fclose(it->f);
	free(it->buf);
	*it = (struct maps_iter){ 0 };
}
