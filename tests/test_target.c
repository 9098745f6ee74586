// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * What tally reads of a target from /proc and its ELF files (user/os/target.c),
 * against this test's own process (its libc, a library it maps, its
 * executable, its threads and names), against files it writes in /proc's
 * formats with what /proc can hold (paths with spaces, deleted files, long
 * lines) and against broken ELF files; and starting a command held at the
 * door.
 */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>
#include "test_skip.h"

#include "../user/os/target.h"
#include "../user/util/proc_maps.h"

static char tmpdir[] = "/tmp/tally-test-target.XXXXXX";

static pid_t own_tid(void)
{
	return (pid_t)syscall(SYS_gettid);
}

/* Writes `text` to the file `name` in tmpdir; its path in path. */
static void file_write(const char *name, const void *text, size_t len, char *path, size_t plen)
{
	FILE *f;

	snprintf(path, plen, "%s/%s", tmpdir, name);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(text, 1, len, f), len);
	assert_int_equal(fclose(f), 0);
}

static void text_write(const char *name, const char *text, char *path, size_t plen)
{
	file_write(name, text, strlen(text), path, plen);
}

struct loaded {
	const char *suffix;
	char name[TARGET_PATH_MAX];
	uint64_t bias;
};

static int loaded_find(struct dl_phdr_info *info, size_t size, void *data)
{
	struct loaded *l = data;
	size_t n = strlen(info->dlpi_name), k = strlen(l->suffix);

	(void)size;
	if (n < k || strcmp(info->dlpi_name + n - k, l->suffix))
		return 0;
	snprintf(l->name, sizeof(l->name), "%s", info->dlpi_name);
	l->bias = info->dlpi_addr;
	return 1;
}

/* /proc/self/maps against the loader's own list (dl_iterate_phdr): the
 * file and the bias of libc and of libraries linked in. */
static void find_lib__own_libraries_are_where_the_loader_put_them(void **state)
{
	static const char *const libs[][2] = { { "libc.so", "/libc.so.6" },
					       { "libasan.so", "/libasan.so.8" },
					       { "libcmocka.so", "/libcmocka.so.0" } };
	char path[TARGET_PATH_MAX], want[PATH_MAX], real[PATH_MAX];
	uint64_t bias = 0;

	(void)state;
	for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
		struct loaded l = { .suffix = libs[i][1] };
		if (!dl_iterate_phdr(loaded_find, &l) && i > 0)
			continue; /* another soname here; libc's must be there */
		assert_int_equal(target_find_lib(getpid(), libs[i][0], path, sizeof(path), &bias),
				 0);
		assert_non_null(realpath(l.name, want));
		assert_non_null(realpath(path, real));
		assert_string_equal(real, want);
		assert_int_equal(bias, l.bias);
	}
	/* the full name finds it too */
	assert_int_equal(target_find_lib(getpid(), "libc.so.6", path, sizeof(path), &bias), 0);
}

static void find_lib__a_name_is_not_a_prefix_of_another(void **state)
{
	static const char *const absent[] = { "lib",	  "libc.s",   "libc.so.6.1",
					      "libc.so.", "ibc.so.6", "tally-no-such-lib.so" };
	char path[TARGET_PATH_MAX];
	uint64_t bias = 7;

	(void)state;
	for (size_t i = 0; i < sizeof(absent) / sizeof(absent[0]); i++)
		if (target_find_lib(getpid(), absent[i], path, sizeof(path), &bias) != -ENOENT)
			fail_msg("'%s' was found: %s", absent[i], path);
	assert_int_equal(bias, 7);
}

#define MAPS_CRAFTED                                                                               \
	"not a maps line at all\n"                                                                 \
	"\n"                                                                                       \
	"-\n"                                                                                      \
	"7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n"                                       \
	"7f0000001000-7f0000002000 rw-p 00000000 00:00 0                          [heap]\n"        \
	"7f0000002000-7f0000003000 r--p 00000000 08:01 11                         "                \
	"/usr/lib/libtally_alloc.so\n"                                                             \
	"7f0000003000-7f0000004000 r--p 00000000 08:01 12                         "                \
	"/old/libfoo.so (deleted)\n"                                                               \
	"7f0000004000-7f0000005000 r-xp 00001000 08:01 13                         "                \
	"/tmp/my dir/with spaces/libfoo.so.1\n"                                                    \
	"7f0000005000-7f0000006000 r--p 00000000 08:01 13                         "                \
	"/tmp/my dir/with spaces/libfoo.so.1\n"                                                    \
	"7f0000006000-7f0000007000 r--p 00000000 08:01 14                         "                \
	"/usr/lib/libfoo.so.2\n"                                                                   \
	"7f0000007000-7f0000008000 r--p 00000000 08:01 15                         "                \
	"/opt/x/libtally.so"

/* Paths with spaces, deleted files, anonymous mappings, lines that are no
 * mapping, a last line without its newline. */
static void find_lib__crafted_maps(void **state)
{
	char maps[PATH_MAX], path[TARGET_PATH_MAX];
	uint64_t bias = 0;

	(void)state;
	text_write("maps", MAPS_CRAFTED, maps, sizeof(maps));
	/* the first mapping at offset 0, spaces and all; not the deleted one */
	assert_int_equal(target_maps_find_lib(maps, "libfoo.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/tmp/my dir/with spaces/libfoo.so.1");
	assert_int_equal(bias, 0x7f0000005000);
	/* libtally.so is not libtally_alloc.so */
	assert_int_equal(target_maps_find_lib(maps, "libtally.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/opt/x/libtally.so");
	assert_int_equal(bias, 0x7f0000007000);
	assert_int_equal(target_maps_find_lib(maps, "libtally_alloc.so", path, sizeof(path), &bias),
			 0);
	assert_string_equal(path, "/usr/lib/libtally_alloc.so");
	assert_int_equal(bias, 0x7f0000002000);
	/* anonymous and special mappings are no library */
	assert_int_equal(target_maps_find_lib(maps, "[heap]", path, sizeof(path), &bias), -ENOENT);
	assert_int_equal(target_maps_find_lib(maps, "heap]", path, sizeof(path), &bias), -ENOENT);
}

/* A deleted file's mapping has " (deleted)" after its name: found when no
 * file that is still there has the name, its path with the marker
 * (target_find_lib then reaches the file through /proc/PID/map_files). */
static void find_lib__a_deleted_library(void **state)
{
	char maps[PATH_MAX], path[TARGET_PATH_MAX];
	uint64_t bias = 0;

	(void)state;
	text_write("maps-deleted",
		   "7f0000003000-7f0000004000 r--p 00000000 08:01 12          "
		   "/usr/lib/libgone.so (deleted)\n",
		   maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libgone.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/usr/lib/libgone.so (deleted)");
	assert_int_equal(bias, 0x7f0000003000);
	assert_int_equal(target_maps_find_lib(maps, "libgon", path, sizeof(path), &bias), -ENOENT);
	text_write("maps-deleted",
		   "7f0000003000-7f0000004000 r--p 00000000 08:01 12          "
		   "/usr/lib/libgone.so (deleted)\n"
		   "7f0000004000-7f0000005000 r--p 00000000 08:01 12          "
		   "/usr/lib/libgone.so.1 (deleted)\n",
		   maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libgone.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/usr/lib/libgone.so (deleted)");
	assert_int_equal(bias, 0x7f0000003000);
	text_write("maps-deleted",
		   "7f0000003000-7f0000004000 r--p 00000000 08:01 12          "
		   "/usr/lib/libgone.so (deleted)\n"
		   "7f0000004000-7f0000005000 r--p 00000000 08:01 12          "
		   "/usr/lib/libgone.so.1\n",
		   maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libgone.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/usr/lib/libgone.so.1");
	assert_int_equal(bias, 0x7f0000004000);
}

/* The longest path the kernel writes (PATH_MAX - 1 bytes) fits the line
 * buffer; a buffer too small for it is -ENAMETOOLONG, not a cut path. */
static void find_lib__the_longest_path(void **state)
{
	static char text[3 * TARGET_PATH_MAX];
	char maps[PATH_MAX], dir[TARGET_PATH_MAX], small[64];
	static char path[TARGET_PATH_MAX];
	const char *base = "/libhuge.so.1";
	size_t dlen = TARGET_PATH_MAX - 1 - strlen(base);
	uint64_t bias = 0;

	(void)state;
	memset(dir, 'd', dlen);
	for (size_t i = 0; i < dlen; i += 200)
		dir[i] = '/';
	dir[dlen] = 0;
	snprintf(text, sizeof(text),
		 "7f0000004000-7f0000005000 r--p 00001000 08:01 12                         %s%s\n"
		 "7f0000005000-7f0000006000 r--p 00000000 08:01 12                         %s%s\n",
		 dir, base, dir, base);
	text_write("maps-long", text, maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libhuge.so", path, sizeof(path), &bias), 0);
	assert_int_equal(strlen(path), TARGET_PATH_MAX - 1);
	assert_int_equal(bias, 0x7f0000005000);
	assert_int_equal(target_maps_find_lib(maps, "libhuge.so", small, sizeof(small), &bias),
			 -ENAMETOOLONG);
}

/* A line longer than any the kernel writes for a file that can be opened
 * (past LIB_LINE_MAX) names no library and is skipped whole, and the lines
 * after it are read as they are. */
static void find_lib__a_line_past_the_buffer(void **state)
{
	static char text[4 * TARGET_PATH_MAX];
	char maps[PATH_MAX], path[TARGET_PATH_MAX], dir[2 * TARGET_PATH_MAX];
	uint64_t bias = 0;

	(void)state;
	memset(dir, 'z', sizeof(dir) - 1);
	dir[0] = '/';
	dir[sizeof(dir) - 1] = 0;
	snprintf(text, sizeof(text),
		 "7f0000004000-7f0000005000 r--p 00000000 08:01 12      %s/libbar.so\n"
		 "7f0000006000-7f0000007000 r--p 00000000 08:01 13      /lib/libbar.so\n",
		 dir);
	text_write("maps-past", text, maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libbar.so", path, sizeof(path), &bias), 0);
	assert_string_equal(path, "/lib/libbar.so");
	assert_int_equal(bias, 0x7f0000006000);
}

/* The piece of a long line past where it was once cut (a 4224-byte buffer)
 * was read as a line of its own: a path could hold what looks like a
 * mapping there. Read whole, the line is one mapping, too long to be a
 * library. */
static void find_lib__a_mapping_inside_a_long_path_is_none(void **state)
{
	static const char head[] = "7f0000004000-7f0000005000 r--p 00000000 08:01 12 ";
	static char text[3 * TARGET_PATH_MAX];
	char maps[PATH_MAX], path[TARGET_PATH_MAX];
	size_t fill = TARGET_PATH_MAX + 127 - strlen(head);
	uint64_t bias = 7;

	(void)state;
	memcpy(text, head, strlen(head));
	memset(text + strlen(head), 'z', fill);
	text[strlen(head)] = '/';
	strcpy(text + strlen(head) + fill,
	       "7f0000009000-7f000000a000 r--p 00000000 08:01 99 /lib/libfake.so\n");
	text_write("maps-inside", text, maps, sizeof(maps));
	assert_int_equal(target_maps_find_lib(maps, "libfake.so", path, sizeof(path), &bias),
			 -ENOENT);
	assert_int_equal(bias, 7);
}

static enum maps_fields parse(const char *text, struct maps_line *l)
{
	static char line[256];

	snprintf(line, sizeof(line), "%s", text);
	return maps_parse_line(line, l);
}

/* The kernel's lines: every field, the path after its padding, spaces and
 * " (deleted)" and all; none after an anonymous mapping. */
static void maps_parse__the_kernels_lines(void **state)
{
	struct maps_line l;

	(void)state;
	assert_int_equal(parse("7f0000004000-7f0000005000 r-xp 00001000 fd:01 13     "
			       "            /tmp/my dir/libfoo.so.1 (deleted)\n",
			       &l),
			 MAPS_INODE);
	assert_true(l.start == 0x7f0000004000 && l.end == 0x7f0000005000);
	assert_true(l.offset == 0x1000 && l.major == 0xfd && l.minor == 1 && l.inode == 13);
	assert_string_equal(l.perms, "r-xp");
	assert_string_equal(l.path, "/tmp/my dir/libfoo.so.1 (deleted)");
	assert_int_equal(l.path_len, strlen(l.path));
	assert_true(l.deleted);
	assert_int_equal(parse("ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0  "
			       "[vsyscall]",
			       &l),
			 MAPS_INODE);
	assert_true(l.start == 0xffffffffff600000 && !l.deleted);
	assert_string_equal(l.path, "[vsyscall]");
	assert_int_equal(parse("7f0000000000-7f0000001000 rw-p 00000000 00:00 0 \n", &l),
			 MAPS_INODE);
	assert_string_equal(l.path, "");
	assert_int_equal(parse("1-2 rw-p 0 0:0 0", &l), MAPS_INODE);
	assert_int_equal(parse("1-2 rw-p 0 0:0 0 (deleted)", &l), MAPS_INODE);
	assert_false(l.deleted); /* the marker alone: no name before it */
}

/* A line that is no mapping stops at its first bad field; its path is ""
 * and no field past it is read. */
static void maps_parse__broken_lines_stop_at_the_bad_field(void **state)
{
	static const struct {
		const char *line;
		enum maps_fields fields;
	} cases[] = {
		{ "", MAPS_NONE },
		{ "\n", MAPS_NONE },
		{ "-", MAPS_NONE },
		{ "not a maps line at all", MAPS_NONE },
		{ "7f00", MAPS_START },
		{ "7f00-", MAPS_START },
		{ "7f00-7fzz r-xp", MAPS_START },
		{ "7f0000000000000000-1 r-xp", MAPS_NONE }, /* past 64 bits */
		{ "7f00-7fff", MAPS_END },
		{ "7f00-7fff r-xpp 0 08:01 1 /x", MAPS_END },
		{ "7f00-7fff r-xp", MAPS_PERMS },
		{ "7f00-7fff r-xp 0 0801 1 /x", MAPS_OFFSET },
		{ "7f00-7fff r-xp 0 08: 1 /x", MAPS_OFFSET },
		{ "7f00-7fff r-xp 0 08:01", MAPS_DEV },
		{ "7f00-7fff r-xp 0 08:01 99999999999999999999999 /x", MAPS_DEV },
		{ "7f00-7fff r-xp 0 08:01 12x /x", MAPS_DEV },
	};
	struct maps_line l;

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		if (parse(cases[i].line, &l) != cases[i].fields)
			fail_msg("'%s': %d fields, not %d", cases[i].line, l.fields,
				 cases[i].fields);
		assert_string_equal(l.path, "");
	}
	/* a short perms field: zero-filled, never 'x' past its end */
	assert_int_equal(parse("7f00-7fff r 0 08:01 1 /x", &l), MAPS_INODE);
	assert_int_equal(l.perms[2], 0);
}

/* Lines of any length are read whole, one mapping each, and the file need
 * not end in a newline. */
static void maps_next__whole_lines_of_any_length(void **state)
{
	static char text[3 * 65536];
	char maps[PATH_MAX];
	size_t head = (size_t)sprintf(text, "1000-2000 r-xp 00000000 08:01 5 /");
	struct maps_iter it;
	struct maps_line l;

	(void)state;
	memset(text + head, 'y', 2 * 65536);
	strcpy(text + head + 2 * 65536, "\n3000-4000 r--p 0 08:01 6 /b\n\n5000-6000 ---p 0 0:0 0");
	text_write("maps-any", text, maps, sizeof(maps));
	assert_int_equal(maps_open(&it, maps), 0);
	assert_int_equal(maps_next(&it, &l), 1);
	assert_true(l.fields == MAPS_INODE && l.start == 0x1000 && l.path_len == 2 * 65536 + 1);
	assert_int_equal(maps_next(&it, &l), 1);
	assert_true(l.fields == MAPS_INODE && l.start == 0x3000 && !strcmp(l.path, "/b"));
	assert_int_equal(maps_next(&it, &l), 1);
	assert_int_equal(l.fields, MAPS_NONE);
	assert_int_equal(maps_next(&it, &l), 1);
	assert_true(l.fields == MAPS_INODE && l.start == 0x5000 && !strcmp(l.path, ""));
	assert_int_equal(maps_next(&it, &l), 0);
	maps_close(&it);
	maps_close(&it);
	assert_int_equal(maps_open(&it, "/nonexistent/maps"), -ENOENT);
	maps_close(&it);
}

/* Defined here so that the executable's own symbol table has it. */
void target_test_marker(void);
void target_test_marker(void)
{
}

/* A symbol's address in its file plus the file's bias is where it runs:
 * libc's from its dynamic symbols, the executable's from its symbol table. */
static void elf_symbol__plus_the_bias_is_the_running_address(void **state)
{
	static const char *const names[] = { "getppid", "tally_no_such_symbol", "getpid",
					     "getppid" };
	char path[TARGET_PATH_MAX];
	uint64_t bias, addr = 0, addrs[4] = { 1, 1, 1, 1 };
	void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);

	(void)state;
	assert_non_null(libc);
	assert_int_equal(target_find_lib(getpid(), "libc.so", path, sizeof(path), &bias), 0);
	assert_int_equal(target_elf_symbol(path, "getppid", &addr), 0);
	assert_int_equal(bias + addr, (uintptr_t)dlsym(libc, "getppid"));
	dlclose(libc);
	/* several at once: 0 for a name not defined, a name asked twice found twice */
	assert_int_equal(target_elf_symbols(path, names, 4, addrs), 0);
	assert_int_equal(addrs[0], addr);
	assert_int_equal(addrs[1], 0);
	assert_int_equal(target_elf_symbol(path, "getpid", &addr), 0);
	assert_int_equal(addrs[2], addr);
	assert_int_equal(addrs[3], addrs[0]);
	assert_int_equal(target_elf_symbol(path, names[1], &addr), -ENOENT);

	assert_int_equal(target_find_lib(getpid(), "test_target", path, sizeof(path), &bias), 0);
	assert_int_equal(target_elf_symbol(path, "target_test_marker", &addr), 0);
	assert_int_equal(bias + addr, (uintptr_t)&target_test_marker);
	/* imported here, defined in libc: not the executable's */
	assert_int_equal(target_elf_symbol(path, "getppid", &addr), -ENOENT);
}

/* The first `len` bytes of this process's libc, as the file `name`; its
 * path in out. */
static void libc_cut(const char *name, size_t len, char *out, size_t olen)
{
	char libc[TARGET_PATH_MAX];
	uint64_t bias;
	struct stat st;
	char *buf;
	int fd;

	assert_int_equal(target_find_lib(getpid(), "libc.so", libc, sizeof(libc), &bias), 0);
	fd = open(libc, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	if (len > (size_t)st.st_size)
		len = (size_t)st.st_size;
	buf = malloc(len);
	assert_non_null(buf);
	assert_int_equal(pread(fd, buf, len, 0), (ssize_t)len);
	close(fd);
	file_write(name, buf, len, out, olen);
	free(buf);
}

/* Files that are no ELF, or a cut one: no symbol and no crash. */
static void elf_symbol__broken_files_have_no_symbols(void **state)
{
	static const char junk[] = "\x7f"
				   "ELF this is no ELF file at all, only its magic";
	char path[PATH_MAX];
	uint64_t addr = 1, addrs[2] = { 1, 1 };
	const char *const names[] = { "getppid", "malloc" };

	(void)state;
	assert_int_equal(target_elf_symbol("/nonexistent/libx.so", "getppid", &addr), -ENOENT);

	text_write("empty.so", "", path, sizeof(path));
	assert_int_equal(target_elf_symbol(path, "getppid", &addr), -ENOENT);
	text_write("text.so", "#!/bin/sh\necho not an ELF\n", path, sizeof(path));
	assert_int_equal(target_elf_symbol(path, "getppid", &addr), -ENOENT);
	file_write("magic.so", junk, sizeof(junk), path, sizeof(path));
	assert_int_equal(target_elf_symbol(path, "getppid", &addr), -ENOENT);
	/* the ELF header alone; its first page; its first 600 kB (the
	 * section headers, at the end, cut off) */
	static const size_t cuts[] = { 16, 64, 4096, 600000 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		libc_cut("cut.so", cuts[i], path, sizeof(path));
		if (target_elf_symbol(path, "getppid", &addr) != -ENOENT)
			fail_msg("libc cut at %zu bytes has getppid at %#lx", cuts[i],
				 (unsigned long)addr);
		assert_int_equal(target_elf_symbols(path, names, 2, addrs), 0);
		assert_int_equal(addrs[0], 0);
		assert_int_equal(addrs[1], 0);
	}
	/* a directory opens, and libelf refuses it */
	assert_int_equal(target_elf_symbol(tmpdir, "getppid", &addr), -EINVAL);
}

/* A name chosen to break a parser that looks for the first ')' of
 * /proc/PID/stat: "t) Z (": a zombie, to it. */
#define ODD_COMM "t) Z ( 1 2 3"

static void comm_and_alive__own_process_with_an_odd_name(void **state)
{
	char old[16], buf[64];

	(void)state;
	assert_int_equal(prctl(PR_GET_NAME, old), 0);
	assert_int_equal(prctl(PR_SET_NAME, ODD_COMM), 0);
	assert_int_equal(target_comm(getpid(), own_tid(), buf, sizeof(buf)), 0);
	assert_string_equal(buf, ODD_COMM);
	assert_true(target_alive(getpid()));
	assert_false(target_is_kthread(getpid()));
	assert_false(target_exiting(getpid()));
	/* a short buffer: what fits, terminated */
	assert_int_equal(target_comm(getpid(), own_tid(), buf, 4), 0);
	assert_string_equal(buf, "t) ");
	assert_int_equal(prctl(PR_SET_NAME, old), 0);
}

/* ps's rendering of /proc/PID/cmdline: arguments joined, a title padded
 * with NULs (PostgreSQL) trimmed, odd bytes and the backslash as \xNN, cut
 * with "..." where a whole byte's rendering ends. */
static void cmdline_format__as_ps_shows_it(void **state)
{
	char out[32], big[300];
	static const char pg[] = "postgres: bench db 127.0.0.1(5) idle\0\0\0\0";
	static const char odd[] = "a\tb\\c\xff\0d\0";

	(void)state;
	target_cmdline_format(pg, sizeof(pg) - 1, big, sizeof(big));
	assert_string_equal(big, "postgres: bench db 127.0.0.1(5) idle");
	target_cmdline_format(odd, sizeof(odd) - 1, big, sizeof(big));
	assert_string_equal(big, "a\\x09b\\x5cc\\xff d");
	assert_int_equal(target_cmdline_format("", 0, big, sizeof(big)), 0);
	assert_string_equal(big, "");
	/* 40 bytes into 32: 28 of them and "..." */
	assert_int_equal(target_cmdline_format("0123456789012345678901234567890123456789", 40, out,
					       sizeof(out)),
			 31);
	assert_string_equal(out, "0123456789012345678901234567...");
	/* an escape is never cut: "\x01" whole or not at all */
	memset(big, 1, 40);
	target_cmdline_format(big, 40, out, sizeof(out));
	assert_string_equal(out, "\\x01\\x01\\x01\\x01\\x01\\x01\\x01...");
	/* this process's own, as the kernel gives it */
	assert_int_equal(target_cmdline(getpid(), big, sizeof(big)), 0);
	assert_non_null(strstr(big, "test_target"));
	assert_int_equal(target_cmdline(999999999, big, sizeof(big)), -ENOENT);
}

static void *thread_wait(void *arg)
{
	pthread_barrier_t *b = arg;

	pthread_barrier_wait(b);
	pthread_barrier_wait(b);
	return NULL;
}

static void threads__own_threads_and_their_names(void **state)
{
	pthread_barrier_t b;
	pthread_t th[2];
	pid_t tids[64];
	char buf[32];
	int n;

	(void)state;
	assert_int_equal(pthread_barrier_init(&b, NULL, 3), 0);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_create(&th[i], NULL, thread_wait, &b), 0);
	assert_int_equal(pthread_setname_np(th[1], "tally-second"), 0);
	pthread_barrier_wait(&b);
	n = target_threads(getpid(), tids, 64);
	assert_true(n >= 3);
	bool own = false;
	int named = 0;
	for (int i = 0; i < n; i++) {
		own |= tids[i] == own_tid();
		if (!target_comm(getpid(), tids[i], buf, sizeof(buf)) &&
		    !strcmp(buf, "tally-second"))
			named++;
	}
	assert_true(own);
	assert_int_equal(named, 1);
	/* at most max */
	assert_int_equal(target_threads(getpid(), tids, 1), 1);
	assert_int_equal(target_threads(getpid(), tids, 0), 0);
	pthread_barrier_wait(&b);
	for (int i = 0; i < 2; i++)
		assert_int_equal(pthread_join(th[i], NULL), 0);
	pthread_barrier_destroy(&b);
}

/* A child that has exited is no longer alive, reaped or not; once reaped,
 * every reader says its /proc entry is gone. */
static void a_process_that_is_gone__every_reader_says_so(void **state)
{
	pid_t pid = fork(), tids[4];
	char buf[32], path[TARGET_PATH_MAX];
	uint64_t bytes = 5;
	siginfo_t si;

	(void)state;
	assert_true(pid >= 0);
	if (pid == 0)
		_exit(0);
	/* the exit waited for, the zombie left */
	assert_int_equal(waitid(P_PID, (id_t)pid, &si, WEXITED | WNOWAIT), 0);
	assert_false(target_alive(pid));
	assert_true(target_exiting(pid));
	assert_int_equal(waitpid(pid, NULL, 0), pid);
	assert_false(target_alive(pid));
	assert_true(target_exiting(pid));
	assert_false(target_is_kthread(pid));
	assert_int_equal(target_find_lib(pid, "libc.so", path, sizeof(path), &bytes), -ENOENT);
	assert_int_equal(target_comm(pid, pid, buf, sizeof(buf)), -ENOENT);
	assert_int_equal(target_threads(pid, tids, 4), -ENOENT);
	assert_int_equal(target_alloc_resident(pid, &bytes), -ENOENT);
	assert_int_equal(bytes, 5);
	assert_int_equal(target_maps_find_lib("/nonexistent", "libc.so", path, 64, &bytes),
			 -ENOENT);
	assert_int_equal(target_smaps_alloc_resident("/nonexistent", &bytes), -ENOENT);
}

/* kthreadd, where this process's /proc shows the kernel's threads. */
static void is_kthread__kthreadd(void **state)
{
	char buf[32];

	(void)state;
	if (target_comm(2, 2, buf, sizeof(buf)) || strcmp(buf, "kthreadd"))
		skip_because("PID 2 is not kthreadd: in a PID namespace of its own");
	assert_true(target_is_kthread(2));
	assert_true(target_alive(2));
}

/* The allocator's mappings are marked MADV_NOHUGEPAGE and MADV_RANDOM
 * (alloc/os.c): resident bytes of such a mapping made here are counted,
 * and only those. */
static void alloc_resident__own_marked_mapping(void **state)
{
	const size_t len = 64 * 4096, touched = 16 * 4096;
	uint64_t before, during, after;
	char *p, *q;

	(void)state;
	assert_int_equal(target_alloc_resident(getpid(), &before), 0);
	p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	q = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	assert_true(p != MAP_FAILED && q != MAP_FAILED);
	assert_int_equal(madvise(p, len, MADV_NOHUGEPAGE), 0);
	assert_int_equal(madvise(p, len, MADV_RANDOM), 0);
	assert_int_equal(madvise(q, len, MADV_NOHUGEPAGE), 0); /* only one of the two */
	memset(p, 1, touched);
	memset(q, 1, touched);
	assert_int_equal(target_alloc_resident(getpid(), &during), 0);
	munmap(p, len);
	munmap(q, len);
	assert_int_equal(target_alloc_resident(getpid(), &after), 0);
	assert_int_equal(during - before, touched);
	assert_int_equal(after, before);
}

#define SMAPS_CRAFTED                                                                              \
	"7f0000000000-7f0000010000 rw-p 00000000 00:00 0 \n"                                       \
	"Size:                 64 kB\n"                                                            \
	"Rss:                  12 kB\n"                                                            \
	"VmFlags: rd wr mr mw me ac nh rr \n"                                                      \
	"7f0000010000-7f0000020000 rw-p 00000000 00:00 0 \n"                                       \
	"Rss:                 100 kB\n"                                                            \
	"VmFlags: rd wr mr mw me ac nh \n"                                                         \
	"7f0000020000-7f0000030000 rw-p 00000000 00:00 0 /tmp/a file with spaces\n"                \
	"Rss:                   8 kB\n"                                                            \
	"Pss:                   8 kB\n"                                                            \
	"VmFlags: rr nh\n"                                                                         \
	"7f0000030000-7f0000040000 rw-p 00000000 00:00 0 \n"                                       \
	"VmFlags: rd wr nh rr\n"                                                                   \
	"garbage line\n"                                                                           \
	"Rss: lots kB\n"                                                                           \
	"VmFlags: nh rr\n"                                                                         \
	"7f0000040000-7f0000050000 rw-p 00000000 00:00 0 \n"                                       \
	"Rss:                1000 kB\n"

/* Each mapping's Rss counts when its VmFlags carry both marks; a mapping
 * without an Rss line, or one cut off before its VmFlags, adds nothing. */
static void alloc_resident__crafted_smaps(void **state)
{
	char smaps[PATH_MAX];
	uint64_t bytes = 0;

	(void)state;
	text_write("smaps", SMAPS_CRAFTED, smaps, sizeof(smaps));
	assert_int_equal(target_smaps_alloc_resident(smaps, &bytes), 0);
	assert_int_equal(bytes, (12 + 8) * 1024);
	text_write("smaps-empty", "", smaps, sizeof(smaps));
	assert_int_equal(target_smaps_alloc_resident(smaps, &bytes), 0);
	assert_int_equal(bytes, 0);
}

/* A mapping's path is the target's: one long enough that a reader in
 * pieces would take its tail for an Rss line adds nothing. */
static void alloc_resident__rss_inside_a_long_path(void **state)
{
	char smaps[PATH_MAX], text[2048];
	uint64_t bytes = 1;
	const char *head = "7f0000000000-7f0000010000 rw-p 00000000 00:00 0 /";
	size_t pad;

	(void)state;
	/* the line's bytes 511 on: what a 512-byte fgets would start its next read with */
	pad = 511 - strlen(head);
	snprintf(
		text, sizeof(text), "%s%.*sRss: 4096 kB\nVmFlags: rd wr nh rr\n", head, (int)pad,
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz"
		"zzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzzz");
	text_write("smaps-long", text, smaps, sizeof(smaps));
	assert_int_equal(target_smaps_alloc_resident(smaps, &bytes), 0);
	assert_int_equal(bytes, 0);
}

/* This process's mask of ignored signals, as /proc/self/status writes it. */
static void own_sigign(char *buf, size_t len)
{
	char line[128];
	FILE *f = fopen("/proc/self/status", "r");

	assert_non_null(f);
	buf[0] = 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "SigIgn: %63s", buf) == 1)
			break;
	fclose(f);
	assert_true(len > 16 && strlen(buf) == 16);
}

/* Held before exec until released; then it runs with tally's LD_PRELOAD in
 * front of its own, the extra environment, the given file as stdio, and the
 * signals ignored that were when tally started: not SIGPIPE, which tally
 * ignores for itself. */
static void spawn__held_then_run_with_its_environment(void **state)
{
	char out[PATH_MAX], libc[TARGET_PATH_MAX], want[2 * TARGET_PATH_MAX + 32], got[256] = "";
	char env[] = "TALLY_TEST_ENV=yes";
	char *const env_extra[] = { env, NULL };
	char *const argv[] = { "sh", "-c",
			       "printf '%s|%s|' \"$TALLY_TEST_ENV\" \"$LD_PRELOAD\"; "
			       "sed -n 's/^SigIgn:[[:space:]]*//p' /proc/self/status",
			       NULL };
	const char *saved = getenv("LD_PRELOAD");
	char *old = saved ? strdup(saved) : NULL;
	struct target_child c;
	char ignored[64];
	uint64_t bias;
	int status;

	(void)state;
	own_sigign(ignored, sizeof(ignored)); /* what a harness may ignore already */
	target_ignore_sigpipe();	      /* as tally does before it starts a command */
	assert_int_equal(target_find_lib(getpid(), "libc.so", libc, sizeof(libc), &bias), 0);
	text_write("spawn-out", "", out, sizeof(out));
	/* the child's own LD_PRELOAD: a library any program has loaded already */
	assert_int_equal(setenv("LD_PRELOAD", libc, 1), 0);
	int err = target_spawn(argv, libc, env_extra, out, false, &c);
	if (old)
		setenv("LD_PRELOAD", old, 1);
	else
		unsetenv("LD_PRELOAD");
	free(old);
	assert_int_equal(err, 0);
	assert_true(c.pid > 0);
	assert_true(target_alive(c.pid)); /* held at the door */
	assert_int_equal(target_release(&c), 0);
	assert_int_equal(waitpid(c.pid, &status, 0), c.pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);

	FILE *f = fopen(out, "r");
	assert_non_null(f);
	assert_non_null(fgets(got, sizeof(got), f));
	fclose(f);
	snprintf(want, sizeof(want), "yes|%s:%s|%s\n", libc, libc, ignored);
	assert_string_equal(got, want);
}

/* A command that cannot be run is the exec's errno at release, reaped; a
 * child aborted before release is killed and reaped. */
static void spawn__refused_or_aborted(void **state)
{
	char *const nocmd[] = { "/nonexistent/tally-test-cmd", NULL }, *const cmd[] = { "true",
											NULL };
	struct target_child c;
	pid_t pid;

	(void)state;
	assert_int_equal(target_spawn(nocmd, NULL, NULL, NULL, false, &c), 0);
	assert_int_equal(target_release(&c), -ENOENT);
	assert_int_equal(waitpid(c.pid, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);

	assert_int_equal(target_spawn(cmd, NULL, NULL, NULL, false, &c), 0);
	pid = c.pid;
	target_abort(&c);
	assert_int_equal(c.pid, -1);
	assert_int_equal(c.gate_fd, -1);
	assert_int_equal(c.status_fd, -1);
	assert_int_equal(kill(pid, 0), -1);
	assert_int_equal(errno, ESRCH);
}

static int setup(void **state)
{
	(void)state;
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[sizeof(tmpdir) + 16];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
	return system(cmd) ? -1 : 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(find_lib__own_libraries_are_where_the_loader_put_them),
		cmocka_unit_test(find_lib__a_name_is_not_a_prefix_of_another),
		cmocka_unit_test(find_lib__crafted_maps),
		cmocka_unit_test(find_lib__a_deleted_library),
		cmocka_unit_test(find_lib__the_longest_path),
		cmocka_unit_test(find_lib__a_line_past_the_buffer),
		cmocka_unit_test(find_lib__a_mapping_inside_a_long_path_is_none),
		cmocka_unit_test(maps_parse__the_kernels_lines),
		cmocka_unit_test(maps_parse__broken_lines_stop_at_the_bad_field),
		cmocka_unit_test(maps_next__whole_lines_of_any_length),
		cmocka_unit_test(elf_symbol__plus_the_bias_is_the_running_address),
		cmocka_unit_test(elf_symbol__broken_files_have_no_symbols),
		cmocka_unit_test(comm_and_alive__own_process_with_an_odd_name),
		cmocka_unit_test(cmdline_format__as_ps_shows_it),
		cmocka_unit_test(threads__own_threads_and_their_names),
		cmocka_unit_test(a_process_that_is_gone__every_reader_says_so),
		cmocka_unit_test(is_kthread__kthreadd),
		cmocka_unit_test(alloc_resident__own_marked_mapping),
		cmocka_unit_test(alloc_resident__crafted_smaps),
		cmocka_unit_test(alloc_resident__rss_inside_a_long_path),
		cmocka_unit_test(spawn__held_then_run_with_its_environment),
		cmocka_unit_test(spawn__refused_or_aborted),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
