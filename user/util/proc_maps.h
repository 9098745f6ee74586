/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * /proc/PID/maps, one line at a time: the one reader of that format in the
 * tracer (the target's libraries and spans, the symbolizer's mappings, the
 * injector's text ranges). Each caller keeps its own rule for which lines it
 * takes; this only splits them into fields.
 *
 * The path is the target's: docs/STYLE.md rule 10. It is the rest of the
 * line, spaces and all, and the kernel writes a newline in it as "\012", so
 * a line is one mapping: the reader takes whole lines of any length (never a
 * piece of one, which a path could make look like a mapping), and a line
 * that is not a mapping parses to fewer fields, never past its end.
 */
#ifndef TALLY_PROC_MAPS_H
#define TALLY_PROC_MAPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* What the kernel appends to the path of a file deleted since it was mapped. */
#define MAPS_DELETED " (deleted)"

/* How many of a line's leading fields were read, in the order they come:
 * "start-end perms offset major:minor inode path". */
enum maps_fields {
	MAPS_NONE = 0,
	MAPS_START = 1,
	MAPS_END = 2,
	MAPS_PERMS = 3,
	MAPS_OFFSET = 4,
	MAPS_DEV = 5,
	MAPS_INODE = 6, /* and the path after it, perhaps "" */
};

struct maps_line {
	uint64_t start, end, offset, inode;
	unsigned int major, minor;
	char perms[5];	      /* "r-xp"; shorter, zero-filled, when the field was */
	const char *path;     /* "" unless fields == MAPS_INODE; its newline removed */
	size_t path_len, len; /* the path's; the line's, without its newline */
	bool deleted;	      /* path ends with MAPS_DELETED (which it still holds) */
	enum maps_fields fields;
};

struct maps_iter {
	FILE *f;
	char *buf;
	size_t cap;
};

/* One line (NUL-terminated, with or without its newline, which is removed)
 * into *l, whose path points into line. Returns l->fields. */
enum maps_fields maps_parse_line(char *line, struct maps_line *l);
/* Whether path ends with MAPS_DELETED (and has a name before it). */
bool maps_path_deleted(const char *path, size_t len);

/* Open a file in maps' format: 0, or -errno. */
int maps_open(struct maps_iter *it, const char *file);
/* Open /proc/PID/maps: 0, or -errno. */
int maps_open_pid(struct maps_iter *it, int pid);
/* The next line into *l (valid until the next call): 1; 0 at the end; -errno
 * when the read failed (-ESRCH when the process ended while it was read). */
int maps_next(struct maps_iter *it, struct maps_line *l);
/* Accepts an iterator never opened (zeroed) or already closed. */
void maps_close(struct maps_iter *it);

#endif /* TALLY_PROC_MAPS_H */
