// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * The symbolizer (user/os/symbols.c) against running programs the Makefile
 * built beside this test (tests/symbols/): a C program built -O2 -g
 * -fomit-frame-pointer, the same stripped, and a C++ one. Each prints where
 * its functions are and return addresses with the lines of their calls; the
 * test reads its maps and checks what the lookups say: names (demangled),
 * files and lines, inlined frames, libc's malloc, the build ID readelf found.
 * Then files that are gone, not ELF, or deleted under a running process.
 */
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "../user/os/symbols.h"

static char fixtures[PATH_MAX]; /* the folder of the fixture programs */
static char tmpdir[] = "/tmp/tally-test-symbols.XXXXXX";

/* One line a fixture printed (tests/symbols/fixture.c says which). */
struct rec {
	char kind[8];
	char fn[64];
	uint64_t addr;
	int line;
	char outer[64];
	int outer_line;
};

struct fixture {
	pid_t pid;
	int in; /* its stdin: closing it ends the fixture */
	FILE *out;
	struct rec recs[16];
	int n;
};

/* dir/name into path (the test's paths fit) */
static void path_join(char *path, size_t len, const char *dir, const char *name)
{
	int n = snprintf(path, len, "%s/%s", dir, name);

	assert_true(n > 0 && (size_t)n < len);
}

static void fixture_path(const char *name, char *path, size_t len)
{
	path_join(path, len, fixtures, name);
}

static void fixture_parse(struct fixture *fx, const char *line)
{
	struct rec *r = &fx->recs[fx->n];
	unsigned long long addr = 0;

	assert_true(fx->n < (int)(sizeof(fx->recs) / sizeof(fx->recs[0])));
	memset(r, 0, sizeof(*r));
	if (sscanf(line, "inl %63s %llx %d %63s %d", r->fn, &addr, &r->line, r->outer,
		   &r->outer_line) == 5)
		strcpy(r->kind, "inl");
	else if (sscanf(line, "ret %63s %llx %d", r->fn, &addr, &r->line) == 3)
		strcpy(r->kind, "ret");
	else if (sscanf(line, "fn %63s %llx", r->fn, &addr) == 2)
		strcpy(r->kind, "fn");
	else if (sscanf(line, "malloc %llx", &addr) == 1)
		strcpy(r->kind, "malloc");
	else
		fail_msg("fixture said: %s", line);
	r->addr = addr;
	fx->n++;
}

/* Starts the program at path and reads what it prints, up to "ready". */
static void fixture_start(const char *path, struct fixture *fx)
{
	int in[2], out[2];
	char line[256];

	memset(fx, 0, sizeof(*fx));
	assert_int_equal(pipe2(in, O_CLOEXEC), 0);
	assert_int_equal(pipe2(out, O_CLOEXEC), 0);
	fx->pid = fork();
	assert_true(fx->pid >= 0);
	if (fx->pid == 0) {
		if (dup2(in[0], 0) < 0 || dup2(out[1], 1) < 0)
			_exit(126);
		execl(path, path, (char *)NULL);
		_exit(127);
	}
	close(in[0]);
	close(out[1]);
	fx->in = in[1];
	fx->out = fdopen(out[0], "r");
	assert_non_null(fx->out);
	while (fgets(line, sizeof(line), fx->out)) {
		if (!strcmp(line, "ready\n"))
			return;
		fixture_parse(fx, line);
	}
	fail_msg("%s ended before it was ready", path);
}

static void fixture_stop(struct fixture *fx)
{
	int status;

	close(fx->in);
	fclose(fx->out);
	assert_int_equal(waitpid(fx->pid, &status, 0), fx->pid);
	assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

static const struct rec *fixture_rec(const struct fixture *fx, const char *kind, const char *fn)
{
	for (int i = 0; i < fx->n; i++)
		if (!strcmp(fx->recs[i].kind, kind) && (!fn || !strcmp(fx->recs[i].fn, fn)))
			return &fx->recs[i];
	fail_msg("the fixture printed no %s %s", kind, fn ? fn : "");
	return NULL;
}

static const char *base(const char *path)
{
	const char *slash = path ? strrchr(path, '/') : NULL;

	return slash ? slash + 1 : path;
}

static void assert_line(const struct sym_line *l, const char *fn, const char *file, int line)
{
	assert_non_null(l->function);
	assert_string_equal(l->function, fn);
	assert_non_null(l->file);
	assert_string_equal(base(l->file), file);
	if (line)
		assert_int_equal(l->line, line);
	else
		assert_true(l->line > 0);
}

/* The fixture's own mapping of its executable, the one holding its code. */
static const struct sym_map *exe_map(const struct sym_maps *m, const struct fixture *fx)
{
	const struct sym_map *map = sym_maps_find(m, fixture_rec(fx, "fn", NULL)->addr);

	assert_non_null(map);
	return map;
}

static void maps_read__fixture__executable_mappings_sorted(void **state)
{
	struct sym_maps m = { 0 };
	struct fixture fx;
	char path[PATH_MAX], real[PATH_MAX];
	bool libc = false;

	(void)state;
	fixture_path("fixture", path, sizeof(path));
	assert_non_null(realpath(path, real));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	assert_true(m.n >= 2);
	for (size_t i = 0; i < m.n; i++) {
		assert_true(m.v[i].start < m.v[i].end);
		assert_true(i == 0 || m.v[i - 1].end <= m.v[i].start);
		assert_true(m.v[i].path[0] == '/' || !strcmp(m.v[i].path, "[vdso]"));
		assert_false(m.v[i].deleted);
		libc |= strstr(m.v[i].path, "libc.so") != NULL;
	}
	assert_true(libc);
	const struct sym_map *exe = exe_map(&m, &fx);
	assert_string_equal(exe->path, real);
	assert_true(exe->ino != 0);
	/* the first and last byte of a mapping, and just past it */
	assert_ptr_equal(sym_maps_find(&m, exe->start), exe);
	assert_ptr_equal(sym_maps_find(&m, exe->end - 1), exe);
	assert_ptr_not_equal(sym_maps_find(&m, exe->end), exe);
	assert_null(sym_maps_find(&m, 0x10));
	/* read again into the same: replaced, not leaked (ASan would say) */
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	fixture_stop(&fx);
	sym_maps_free(&m);
	sym_maps_free(&m);
	assert_null(m.v);
	sym_maps_free(NULL);
}

static void maps_read__no_such_process__esrch(void **state)
{
	struct sym_maps m = { 0 };

	(void)state;
	/* beyond any pid_max (2^22) */
	assert_int_equal(sym_maps_read(INT_MAX, &m), -ESRCH);
	assert_int_equal(sym_maps_read(-1, &m), -ESRCH);
	assert_int_equal(m.n, 0);
}

static void maps_copy__equal_and_independent(void **state)
{
	struct sym_maps m = { 0 }, c = { 0 };

	(void)state;
	assert_int_equal(sym_maps_read(getpid(), &m), 0);
	assert_int_equal(sym_maps_copy(&c, &m), 0);
	assert_int_equal(c.n, m.n);
	for (size_t i = 0; i < m.n; i++) {
		assert_int_equal(c.v[i].start, m.v[i].start);
		assert_int_equal(c.v[i].ino, m.v[i].ino);
		assert_string_equal(c.v[i].path, m.v[i].path);
		assert_ptr_not_equal(c.v[i].path, m.v[i].path);
	}
	sym_maps_free(&m);
	assert_int_equal(sym_maps_copy(&c, &c), 0);
	sym_maps_free(&c);
}

/* Every function, return address and inlined call the C fixture printed. */
static void check_c_fixture(struct symbolizer *s, const struct sym_maps *m,
			    const struct fixture *fx)
{
	struct sym_loc loc;

	for (int i = 0; i < fx->n; i++) {
		const struct rec *r = &fx->recs[i];

		if (!strcmp(r->kind, "fn")) {
			assert_int_equal(symbolizer_lookup(s, m, r->addr, false, &loc), 0);
			assert_int_equal(loc.nlines, 1);
			assert_line(&loc.lines[0], r->fn, "fixture.c", 0);
		} else if (!strcmp(r->kind, "ret")) {
			assert_int_equal(symbolizer_lookup(s, m, r->addr, true, &loc), 0);
			assert_int_equal(loc.nlines, 1);
			assert_line(&loc.lines[0], r->fn, "fixture.c", r->line);
		} else if (!strcmp(r->kind, "inl")) {
			/* the inlined function at its line, then where it was called */
			assert_int_equal(symbolizer_lookup(s, m, r->addr, true, &loc), 0);
			assert_int_equal(loc.nlines, 2);
			assert_line(&loc.lines[0], r->fn, "fixture.c", r->line);
			assert_line(&loc.lines[1], r->outer, "fixture.c", r->outer_line);
		}
	}
}

static void lookup__c_fixture__functions_files_lines_inlines(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc a, b;
	struct fixture fx;
	char path[PATH_MAX];

	(void)state;
	assert_non_null(s);
	fixture_path("fixture", path, sizeof(path));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	check_c_fixture(s, &m, &fx);
	/* again, from the cache: the same strings */
	uint64_t ret = fixture_rec(&fx, "ret", "middle")->addr;
	assert_int_equal(symbolizer_lookup(s, &m, ret, true, &a), 0);
	assert_int_equal(symbolizer_lookup(s, &m, ret, true, &b), 0);
	assert_memory_equal(&a, &b, sizeof(a));
	check_c_fixture(s, &m, &fx);
	fixture_stop(&fx);
	/* the process is gone: its maps still answer */
	check_c_fixture(s, &m, &fx);
	sym_maps_free(&m);
	symbolizer_free(s);
	symbolizer_free(NULL);
}

static void lookup__stripped__no_function_or_dynsym_no_lines(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc loc;
	struct fixture fx;
	char path[PATH_MAX];
	bool functions, lines;

	(void)state;
	fixture_path("fixture_stripped", path, sizeof(path));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	for (int i = 0; i < fx.n; i++) {
		if (!strcmp(fx.recs[i].kind, "malloc"))
			continue;
		assert_int_equal(symbolizer_lookup(s, &m, fx.recs[i].addr, true, &loc), 0);
		assert_true(loc.nlines <= 1);
		assert_null(loc.lines[0].file);
		assert_int_equal(loc.lines[0].line, 0);
		if (loc.nlines)
			assert_non_null(loc.lines[0].function); /* a .dynsym name */
	}
	symbolizer_file_info(s, exe_map(&m, &fx)->path, &functions, &lines);
	assert_false(functions);
	assert_false(lines);
	fixture_stop(&fx);
	sym_maps_free(&m);
	symbolizer_free(s);
}

static void lookup__cxx__names_demangled(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc loc;
	struct fixture fx;
	char path[PATH_MAX];

	(void)state;
	fixture_path("fixture_cxx", path, sizeof(path));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	const struct rec *fn = fixture_rec(&fx, "fn", "ns::fn(int)");
	assert_int_equal(symbolizer_lookup(s, &m, fn->addr, false, &loc), 0);
	assert_int_equal(loc.nlines, 1);
	assert_line(&loc.lines[0], "ns::fn(int)", "fixture_cxx.cc", 0);
	const struct rec *ret = fixture_rec(&fx, "ret", "ns::fn(int)");
	assert_int_equal(symbolizer_lookup(s, &m, ret->addr, true, &loc), 0);
	assert_int_equal(loc.nlines, 1);
	assert_line(&loc.lines[0], "ns::fn(int)", "fixture_cxx.cc", ret->line);
	fixture_stop(&fx);
	sym_maps_free(&m);
	symbolizer_free(s);
}

static void lookup__libc_malloc__named_malloc(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc loc;
	struct fixture fx;
	char path[PATH_MAX];
	bool functions, lines;

	(void)state;
	fixture_path("fixture", path, sizeof(path));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	uint64_t addr = fixture_rec(&fx, "malloc", NULL)->addr;
	assert_int_equal(symbolizer_lookup(s, &m, addr, false, &loc), 0);
	assert_true(loc.nlines >= 1);
	const char *fn = loc.lines[loc.nlines - 1].function;
	assert_non_null(fn);
	assert_non_null(strstr(fn, "malloc"));
	/* with libc's debug file (libc6-dbg) the line too; .dynsym alone without */
	print_message("malloc: %s at %s:%d\n", fn, loc.lines[0].file ? loc.lines[0].file : "?",
		      loc.lines[0].line);
	const struct sym_map *libc = sym_maps_find(&m, addr);
	symbolizer_file_info(s, libc->path, &functions, &lines);
	assert_true(functions);
	assert_non_null(symbolizer_build_id(s, libc->path));
	fixture_stop(&fx);
	sym_maps_free(&m);
	symbolizer_free(s);
}

static void lookup__not_mapped__enoent(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc loc;

	(void)state;
	assert_int_equal(symbolizer_lookup(s, &m, 0x400000, false, &loc), -ENOENT);
	assert_int_equal(loc.nlines, 0);
	assert_int_equal(sym_maps_read(getpid(), &m), 0);
	assert_int_equal(symbolizer_lookup(s, &m, 0x10, false, &loc), -ENOENT);
	assert_int_equal(symbolizer_lookup(s, &m, 1, true, &loc), -ENOENT);
	assert_int_equal(loc.nlines, 0);
	sym_maps_free(&m);
	symbolizer_free(s);
}

static void lookup__vdso__no_lines(void **state)
{
	struct symbolizer *s = symbolizer_new();
	struct sym_maps m = { 0 };
	struct sym_loc loc;
	bool found = false;

	(void)state;
	assert_int_equal(sym_maps_read(getpid(), &m), 0);
	for (size_t i = 0; i < m.n; i++) {
		if (strcmp(m.v[i].path, "[vdso]"))
			continue;
		found = true;
		assert_int_equal(symbolizer_lookup(s, &m, m.v[i].start + 16, false, &loc), 0);
		assert_int_equal(loc.nlines, 0);
	}
	if (!found)
		print_message("no [vdso] in this process's maps\n");
	sym_maps_free(&m);
	symbolizer_free(s);
}

/* Maps of one mapping at 0x10000 of the file at path. */
static void one_map(struct sym_maps *m, struct sym_map *map, const char *path)
{
	*map = (struct sym_map){ .start = 0x10000, .end = 0x20000, .path = (char *)path };
	*m = (struct sym_maps){ .v = map, .n = 1 };
}

static void copy_file(const char *from, const char *to, size_t limit)
{
	char buf[65536];
	int in = open(from, O_RDONLY | O_CLOEXEC), out;
	ssize_t n;

	assert_true(in >= 0);
	out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
	assert_true(out >= 0);
	while (limit && (n = read(in, buf, sizeof(buf) < limit ? sizeof(buf) : limit)) > 0) {
		assert_int_equal(write(out, buf, (size_t)n), n);
		limit -= (size_t)n;
	}
	close(in);
	assert_int_equal(close(out), 0);
}

static void lookup__gone_not_elf_truncated__no_lines_no_crash(void **state)
{
	struct symbolizer *s = symbolizer_new();
	char text[PATH_MAX], cut[PATH_MAX], exe[PATH_MAX];
	const char *paths[] = { "/nonexistent/libgone.so", text, cut, "/", "/dev/null" };
	struct sym_map map;
	struct sym_maps m;
	struct sym_loc loc;
	bool functions, lines;

	(void)state;
	path_join(text, sizeof(text), tmpdir, "not-elf.so");
	copy_file("/etc/passwd", text, SIZE_MAX);
	/* the ELF header and a little more: program headers past the end */
	path_join(cut, sizeof(cut), tmpdir, "truncated.so");
	fixture_path("fixture", exe, sizeof(exe));
	copy_file(exe, cut, 100);
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		one_map(&m, &map, paths[i]);
		/* twice: the second from the failure kept */
		for (int k = 0; k < 2; k++) {
			assert_int_equal(symbolizer_lookup(s, &m, 0x10100, k, &loc), 0);
			assert_int_equal(loc.nlines, 0);
		}
		assert_null(symbolizer_build_id(s, paths[i]));
		symbolizer_file_info(s, paths[i], &functions, &lines);
		assert_false(functions || lines);
	}
	symbolizer_free(s);
}

/* A copy of the fixture at a path with spaces, run, then deleted. */
static void maps_read__spaces_then_deleted__named_and_flagged(void **state)
{
	struct symbolizer *s = symbolizer_new();
	char dir[PATH_MAX], copy[PATH_MAX], exe[PATH_MAX];
	struct sym_maps m = { 0 };
	struct sym_loc loc;
	struct fixture fx;

	(void)state;
	path_join(dir, sizeof(dir), tmpdir, "a dir");
	assert_int_equal(mkdir(dir, 0755), 0);
	path_join(copy, sizeof(copy), dir, "the fixture");
	fixture_path("fixture", exe, sizeof(exe));
	copy_file(exe, copy, SIZE_MAX);
	fixture_start(copy, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	assert_string_equal(exe_map(&m, &fx)->path, copy);
	check_c_fixture(s, &m, &fx);
	assert_int_equal(unlink(copy), 0);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	const struct sym_map *map = exe_map(&m, &fx);
	assert_string_equal(map->path, copy);
	assert_true(map->deleted);
	/* in a fresh symbolizer: a deleted file is not read */
	symbolizer_free(s);
	s = symbolizer_new();
	const struct rec *ret = fixture_rec(&fx, "ret", "middle");
	assert_int_equal(symbolizer_lookup(s, &m, ret->addr, true, &loc), 0);
	assert_int_equal(loc.nlines, 0);
	/* another file now at the path: still not read */
	copy_file("/etc/passwd", copy, SIZE_MAX);
	assert_int_equal(symbolizer_lookup(s, &m, ret->addr, true, &loc), 0);
	assert_int_equal(loc.nlines, 0);
	assert_int_equal(unlink(copy), 0);
	assert_int_equal(rmdir(dir), 0);
	fixture_stop(&fx);
	sym_maps_free(&m);
	symbolizer_free(s);
}

/* What `readelf -n` found in the fixture (the Makefile wrote it beside it). */
static void readelf_build_id(char *id, size_t len)
{
	char path[PATH_MAX];
	FILE *f;

	fixture_path("fixture.build-id", path, sizeof(path));
	f = fopen(path, "r");
	assert_non_null(f);
	assert_non_null(fgets(id, (int)len, f));
	id[strcspn(id, "\n")] = 0;
	fclose(f);
	assert_true(strlen(id) >= 16);
}

static void build_id__fixture__as_readelf_says(void **state)
{
	struct symbolizer *s = symbolizer_new();
	char id[256], path[PATH_MAX];
	bool functions, lines;
	const char *got;

	(void)state;
	readelf_build_id(id, sizeof(id));
	fixture_path("fixture", path, sizeof(path));
	got = symbolizer_build_id(s, path);
	assert_non_null(got);
	assert_string_equal(got, id);
	assert_ptr_equal(symbolizer_build_id(s, path), got); /* cached */
	symbolizer_file_info(s, path, &functions, &lines);
	assert_true(functions && lines);
	/* strip keeps the notes */
	fixture_path("fixture_stripped", path, sizeof(path));
	got = symbolizer_build_id(s, path);
	assert_non_null(got);
	assert_string_equal(got, id);
	symbolizer_free(s);
}

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* 1000 addresses spread over a mapping, looked up in a fresh symbolizer (the
 * file opened, its symbols and DWARF read), then again (from the cache). */
static void time_mapping(const struct sym_maps *m, const struct sym_map *map, const char *what)
{
	struct symbolizer *s = symbolizer_new();
	uint64_t step = (map->end - map->start) / 1000;
	double t0, t1, t2;
	struct sym_loc loc;
	int named = 0;

	assert_true(step > 0);
	t0 = now();
	for (int i = 0; i < 1000; i++) {
		assert_int_equal(symbolizer_lookup(s, m, map->start + i * step, false, &loc), 0);
		named += loc.nlines && loc.lines[loc.nlines - 1].function;
	}
	t1 = now();
	for (int i = 0; i < 1000; i++)
		assert_int_equal(symbolizer_lookup(s, m, map->start + i * step, false, &loc), 0);
	t2 = now();
	print_message("%s: 1000 addresses: %.1f ms the first time, %.2f ms cached (%d named)\n",
		      what, (t1 - t0) * 1e3, (t2 - t1) * 1e3, named);
	assert_true(named > 0);
	symbolizer_free(s);
}

static void lookup__1000_addresses__timed(void **state)
{
	struct sym_maps m = { 0 };
	struct fixture fx;
	char path[PATH_MAX];

	(void)state;
	fixture_path("fixture", path, sizeof(path));
	fixture_start(path, &fx);
	assert_int_equal(sym_maps_read(fx.pid, &m), 0);
	time_mapping(&m, sym_maps_find(&m, fixture_rec(&fx, "malloc", NULL)->addr), "libc");
	time_mapping(&m, exe_map(&m, &fx), "fixture");
	fixture_stop(&fx);
	sym_maps_free(&m);
}

static int setup(void **state)
{
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);

	(void)state;
	if (n <= 0)
		return -1;
	exe[n] = 0;
	snprintf(fixtures, sizeof(fixtures), "%s/symbols", dirname(exe));
	/* no debuginfod servers asked during the test */
	unsetenv("DEBUGINFOD_URLS");
	return mkdtemp(tmpdir) ? 0 : -1;
}

static int teardown(void **state)
{
	char path[PATH_MAX];
	const char *names[] = { "not-elf.so", "truncated.so" };

	(void)state;
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		path_join(path, sizeof(path), tmpdir, names[i]);
		unlink(path);
	}
	return rmdir(tmpdir);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(maps_read__fixture__executable_mappings_sorted),
		cmocka_unit_test(maps_read__no_such_process__esrch),
		cmocka_unit_test(maps_copy__equal_and_independent),
		cmocka_unit_test(maps_read__spaces_then_deleted__named_and_flagged),
		cmocka_unit_test(lookup__c_fixture__functions_files_lines_inlines),
		cmocka_unit_test(lookup__stripped__no_function_or_dynsym_no_lines),
		cmocka_unit_test(lookup__cxx__names_demangled),
		cmocka_unit_test(lookup__libc_malloc__named_malloc),
		cmocka_unit_test(lookup__not_mapped__enoent),
		cmocka_unit_test(lookup__vdso__no_lines),
		cmocka_unit_test(lookup__gone_not_elf_truncated__no_lines_no_crash),
		cmocka_unit_test(build_id__fixture__as_readelf_says),
		cmocka_unit_test(lookup__1000_addresses__timed),
	};

	/* a fixture that ends early must not end the test with SIGPIPE */
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests(tests, setup, teardown);
}
