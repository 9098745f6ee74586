// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Integration test of glibc mode (bpf/glibc.bpf.c, user/probes/glibc.c) on the real
 * kernel and the system's glibc; needs root. Each test starts
 * tests/glibc/workload.c, attaches to the libc it maps, has it run known
 * sequences of the malloc family, and compares the BPF figures with what
 * glibc itself says (malloc_usable_size, mallinfo2) and with the workload's
 * book of requested sizes: they must be equal, not close.
 *
 * Build and run, from the repository root (make test runs it):
 *   make build/tests/test_glibc build/tests/glibc_workload
 *   sudo build/tests/test_glibc build/tests/glibc_workload
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <setjmp.h>
#include <cmocka.h>

#include <bpf/bpf.h>
#include <linux/types.h>

#include "../../user/probes/glibc.h" /* the loader's; bpf/glibc.h is its BPF object's */
#include "../../user/probes/glibc_site.h"
#include "../../user/os/target.h"
#include "tally_bpf.h"
#include "tally.skel.h"

#define WL_SLOTS 6 /* workload.c: slots 0 (phase A), 1 (phase B), 2..5 (threads) */
#define WL_THREADS 4

static char workload_path[PATH_MAX];

struct child {
	pid_t pid;
	int cmd;	 /* write end: commands */
	int rep;	 /* read end: reports */
	int gate;	 /* write end: releases a held child, or -1 */
	char line[4096]; /* the last report */
};

/* Read one report line. */
static int child_read(struct child *c)
{
	size_t n = 0;
	char ch;

	for (;;) {
		ssize_t r = read(c->rep, &ch, 1);
		if (r != 1)
			return -EPIPE;
		if (ch == '\n')
			break;
		if (n + 1 < sizeof(c->line))
			c->line[n++] = ch;
	}
	c->line[n] = 0;
	return 0;
}

/* In the child before exec, when held: wait for the gate, then allocate as a
 * forked tracer would before exec (setenv), a 5 MB mmapped block among them;
 * none of it may count once the workload runs. */
static void child_pre_exec(int gate)
{
	char ch;

	if (read(gate, &ch, 1) != 1)
		_exit(127);
	for (int i = 0; i < 10; i++)
		if (!malloc(1000))
			_exit(127);
	if (!malloc(5 << 20) || !calloc(3, 3000))
		_exit(127);
}

/* Start the workload; held: the child waits before exec until
 * child_release() (c->gate), and allocates then (child_pre_exec). */
static int child_spawn(struct child *c, bool held)
{
	int cmd[2], rep[2], gate[2] = { -1, -1 };

	if (pipe2(cmd, O_CLOEXEC) || pipe2(rep, O_CLOEXEC) || (held && pipe2(gate, O_CLOEXEC)))
		return -errno;
	c->pid = fork();
	if (c->pid < 0)
		return -errno;
	if (c->pid == 0) {
		/* a failed assertion leaves no child behind holding our pipes */
		if (prctl(PR_SET_PDEATHSIG, SIGKILL) || getppid() == 1)
			_exit(127);
		if (held)
			child_pre_exec(gate[0]);
		/* copies above 4 first: a pipe end may sit on 3 or 4 already,
		 * and dup2 onto itself would keep its close-on-exec flag */
		int in = fcntl(cmd[0], F_DUPFD, 10), out = fcntl(rep[1], F_DUPFD, 10);

		if (in < 0 || out < 0 || dup2(in, 3) < 0 || dup2(out, 4) < 0)
			_exit(127);
		execl(workload_path, workload_path, (char *)NULL);
		_exit(127);
	}
	close(cmd[0]);
	close(rep[1]);
	c->cmd = cmd[1];
	c->rep = rep[0];
	c->gate = -1;
	if (held) {
		close(gate[0]);
		c->gate = gate[1];
		return 0;
	}
	return child_read(c); /* "ready" */
}

static int child_start(struct child *c)
{
	return child_spawn(c, false);
}

static int child_release(struct child *c)
{
	if (write(c->gate, "g", 1) != 1)
		return -EPIPE;
	close(c->gate);
	c->gate = -1;
	return child_read(c); /* "ready", from the workload */
}

static int child_cmd(struct child *c, const char *cmd)
{
	size_t len = strlen(cmd);

	if (write(c->cmd, cmd, len) != (ssize_t)len || write(c->cmd, "\n", 1) != 1)
		return -EPIPE;
	return child_read(c);
}

static void child_stop(struct child *c)
{
	int status;

	if (c->pid <= 0)
		return;
	if (write(c->cmd, "Q\n", 2) != 2)
		kill(c->pid, SIGKILL);
	waitpid(c->pid, &status, 0);
	close(c->cmd);
	close(c->rep);
	c->pid = 0;
}

/* A key of the last report ("key=value"). */
static uint64_t rep(const struct child *c, const char *key, int idx)
{
	char k[32];
	const char *p;

	if (idx >= 0)
		snprintf(k, sizeof(k), " %s%d=", key, idx);
	else
		snprintf(k, sizeof(k), " %s=", key);
	p = strstr(c->line, k);
	if (!p)
		fail_msg("no %s in report: %s", k, c->line);
	return strtoull(p + strlen(k), NULL, 10);
}

/* The libc the child maps, as /proc/PID/maps names it. */
static int find_libc(pid_t pid, char *path, size_t size)
{
	uint64_t bias;

	return target_find_lib(pid, "libc.so", path, size, &bias);
}

/* Start the workload and trace it; threads_fd as glibc_trace_open's. With
 * before_attach, send that command first (threads are created untraced). */
static struct glibc_trace *trace_child(struct child *c, int threads_fd, uint32_t max_blocks,
				       const char *before_attach)
{
	char libc[PATH_MAX];
	struct glibc_trace *g;
	int err;

	assert_int_equal(child_start(c), 0);
	if (before_attach)
		assert_int_equal(child_cmd(c, before_attach), 0);
	assert_int_equal(find_libc(c->pid, libc, sizeof(libc)), 0);
	g = glibc_trace_open(c->pid, threads_fd, max_blocks, &err);
	if (!g)
		fail_msg("glibc_trace_open: %s", strerror(-err));
	err = glibc_trace_attach(g, c->pid, libc);
	if (err)
		fail_msg("glibc_trace_attach %s: %s%s", libc, strerror(-err),
			 err == -EINVAL ? " (another tracer's uprobe on libc? dmesg: "
					  "\"ref_ctr_offset mismatch\")" :
					  "");
	return g;
}

/* The figures every report must match whatever the groups. */
static void assert_totals(const struct child *c, const struct glibc_figures *f)
{
	uint64_t net = 0;

	assert_int_equal(rep(c, "mismatch", -1), 0); /* header rule == malloc_usable_size */
	assert_int_equal(f->live, rep(c, "live", -1));
	assert_int_equal(f->rounding, rep(c, "rounding", -1));
	assert_int_equal(f->large_count, rep(c, "hblks", -1));
	assert_int_equal(f->large_count, rep(c, "large", -1));
	assert_int_equal(f->calls, rep(c, "calls", -1));
	assert_int_equal(f->unknown_frees, rep(c, "unknown", -1));
	assert_int_equal(f->untracked, 0);
	assert_int_equal(f->lost, 0);
	assert_true(glibc_figures_exact(f));
	for (int g = 0; g < GLIBC_GROUPS; g++)
		net += f->alloc_bytes[g] - f->dealloc_bytes[g];
	assert_int_equal(net, f->live);
}

/* Group g's counters are the sum of the workload's slots in mask. */
static void assert_group(const struct child *c, const struct glibc_figures *f, int g,
			 unsigned slot_mask)
{
	uint64_t ab = 0, ao = 0, db = 0, dobj = 0;

	for (int s = 0; s < WL_SLOTS; s++) {
		if (!(slot_mask & (1u << s)))
			continue;
		ab += rep(c, "ab", s);
		ao += rep(c, "ao", s);
		db += rep(c, "db", s);
		dobj += rep(c, "do", s);
	}
	assert_int_equal(f->alloc_bytes[g], ab);
	assert_int_equal(f->alloc_objs[g], ao);
	assert_int_equal(f->dealloc_bytes[g], db);
	assert_int_equal(f->dealloc_objs[g], dobj);
}

static void assert_other_groups_empty(const struct glibc_figures *f, unsigned group_mask_lo,
				      unsigned group_mask_hi)
{
	for (int g = 0; g < GLIBC_GROUPS; g++) {
		bool used = (g < 32 && (group_mask_lo & (1u << g))) ||
			    (g >= 32 && g < 64 && (group_mask_hi & (1u << (g - 32))));
		if (used)
			continue;
		assert_int_equal(f->alloc_objs[g], 0);
		assert_int_equal(f->dealloc_objs[g], 0);
	}
}

static void seed_group(int threads_fd, pid_t tid, uint32_t group)
{
	struct tally_bpf_thread t = { .group = group, .running = 1 };
	__u32 key = (__u32)tid;

	assert_int_equal(bpf_map_update_elem(threads_fd, &key, &t, BPF_ANY), 0);
}

static void glibc_trace__open_read_close__figures_start_at_zero(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct glibc_trace *g;
	int err = 0;

	(void)state;
	assert_non_null(f);
	g = glibc_trace_open(getpid(), -1, 0, &err);
	assert_non_null(g);
	memset(f, 0xff, sizeof(*f));
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_int_equal(f->live + f->rounding + f->large_count + f->calls + f->alloc_objs[0], 0);
	assert_true(glibc_figures_exact(f));
	glibc_trace_close(g);
	glibc_trace_close(NULL);
	free(f);
}

static void glibc_trace_attach__file_without_malloc__enoent(void **state)
{
	struct glibc_trace *g;
	int err = 0;

	(void)state;
	g = glibc_trace_open(getpid(), -1, 0, &err);
	assert_non_null(g);
	/* the workload imports malloc but defines none */
	assert_int_equal(glibc_trace_attach(g, getpid(), workload_path), -ENOENT);
	assert_int_equal(glibc_trace_attach(g, getpid(), "/nonexistent/libc.so.6"), -ENOENT);
	glibc_trace_close(g);
}

/* Everything in group 0 (a private threads map): phase A (every entry),
 * then phase B (frees and reallocs of A's blocks, a free of a block from
 * before the attach). */
static void glibc_trace__every_entry__figures_equal_glibcs_own(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct child c = { 0 };
	struct glibc_trace *g;

	(void)state;
	assert_non_null(f);
	g = trace_child(&c, -1, 0, NULL);

	assert_int_equal(child_cmd(&c, "A"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	print_message("phase A: live %llu rounding %llu large %llu calls %llu nested %llu\n",
		      (unsigned long long)f->live, (unsigned long long)f->rounding,
		      (unsigned long long)f->large_count, (unsigned long long)f->calls,
		      (unsigned long long)f->nested);
	assert_totals(&c, f);
	assert_group(&c, f, 0, 0x3f);
	assert_other_groups_empty(f, 1, 0);
	/* posix_memalign(16), memalign(16), realloc(NULL), realloc(p, 0) and
	 * reallocarray call on into malloc, free or realloc: seen, not counted */
	assert_true(f->nested >= 5);
	assert_true(f->large_count >= 5);

	assert_int_equal(child_cmd(&c, "B"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_totals(&c, f);
	assert_int_equal(f->unknown_frees, 1);
	assert_group(&c, f, 0, 0x3f);
	assert_other_groups_empty(f, 1, 0);

	child_stop(&c);
	glibc_trace_close(g);
	free(f);
}

/* With tally.bpf.c's own threads map: the group is the thread's when it
 * allocates, and a free is charged to the group of the allocation. */
static void glibc_trace__main_threads_map__charges_allocating_group(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct tally_bpf *main_skel;
	struct child c = { 0 };
	struct glibc_trace *g;
	int fd;

	(void)state;
	assert_non_null(f);
	main_skel = tally_bpf__open_and_load();
	assert_non_null(main_skel);
	fd = bpf_map__fd(main_skel->maps.threads);
	g = trace_child(&c, fd, 0, NULL);

	seed_group(fd, c.pid, 5);
	assert_int_equal(child_cmd(&c, "A"), 0);
	seed_group(fd, c.pid, 7);
	assert_int_equal(child_cmd(&c, "B"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_totals(&c, f);
	assert_group(&c, f, 5, 1u << 0); /* A's blocks, freed in A or in B */
	assert_group(&c, f, 7, 1u << 1);
	assert_true(f->dealloc_objs[5] > 0 && f->alloc_objs[7] > 0);
	assert_other_groups_empty(f, (1u << 5) | (1u << 7), 0);

	child_stop(&c);
	glibc_trace_close(g);
	tally_bpf__destroy(main_skel);
	free(f);
}

/* Four threads in four groups allocate at once, free their own blocks and
 * their neighbour's, and realloc. */
static void glibc_trace__threads__per_thread_groups_and_cross_frees(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct tally_bpf *main_skel;
	struct child c = { 0 };
	struct glibc_trace *g;
	int fd;

	(void)state;
	assert_non_null(f);
	main_skel = tally_bpf__open_and_load();
	assert_non_null(main_skel);
	fd = bpf_map__fd(main_skel->maps.threads);
	g = trace_child(&c, fd, 0, "S");
	for (int i = 0; i < WL_THREADS; i++)
		seed_group(fd, (pid_t)rep(&c, "t", i), 40 + (uint32_t)i);

	assert_int_equal(child_cmd(&c, "T"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_totals(&c, f);
	for (int i = 0; i < WL_THREADS; i++) {
		assert_group(&c, f, 40 + i, 1u << (2 + i));
		assert_true(f->dealloc_objs[40 + i] > 0);
	}
	assert_other_groups_empty(f, 0, 0xfu << 8);

	child_stop(&c);
	glibc_trace_close(g);
	tally_bpf__destroy(main_skel);
	free(f);
}

/* A block map too small: the blocks it cannot hold are counted, and the
 * figures say they are not exact. */
static void glibc_trace__block_map_full__untracked_not_exact(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct child c = { 0 };
	struct glibc_trace *g;

	(void)state;
	assert_non_null(f);
	g = trace_child(&c, -1, 8, NULL);
	assert_int_equal(child_cmd(&c, "A"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_true(f->untracked > 0);
	assert_false(glibc_figures_exact(f));
	assert_int_equal(f->calls, rep(&c, "calls", -1));
	assert_true(f->live < rep(&c, "live", -1));
	child_stop(&c);
	glibc_trace_close(g);
	free(f);
}

/* malloc + free in a loop, untraced then traced: every call counted once,
 * nothing left live; prints the cost of a traced pair. */
static void glibc_trace__malloc_free_loop__counted_once_costed(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f));
	struct child c = { 0 };
	struct glibc_trace *g;
	char libc[PATH_MAX];
	const unsigned long n = 20000;
	uint64_t plain_ns, traced_ns, calls0;
	char cmd[32];
	int err;

	(void)state;
	assert_non_null(f);
	snprintf(cmd, sizeof(cmd), "N %lu", n);
	assert_int_equal(child_start(&c), 0);
	assert_int_equal(child_cmd(&c, cmd), 0);
	plain_ns = rep(&c, "ns", -1);
	calls0 = rep(&c, "calls", -1);
	assert_int_equal(find_libc(c.pid, libc, sizeof(libc)), 0);
	g = glibc_trace_open(c.pid, -1, 0, &err);
	assert_non_null(g);
	assert_int_equal(glibc_trace_attach(g, c.pid, libc), 0);
	assert_int_equal(glibc_trace_attach(g, c.pid, libc), -EALREADY);
	assert_int_equal(child_cmd(&c, cmd), 0);
	traced_ns = rep(&c, "ns", -1);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_int_equal(f->calls, rep(&c, "calls", -1) - calls0);
	assert_int_equal(f->calls, 2 * n);
	assert_int_equal(f->nested, 0);
	assert_int_equal(f->live, 0);
	assert_int_equal(f->alloc_objs[0], n);
	assert_int_equal(f->dealloc_objs[0], n);
	assert_true(glibc_figures_exact(f));
	print_message("malloc(64)+free: %.0f ns untraced, %.0f ns traced (3 probe hits)\n",
		      (double)plain_ns / (double)n, (double)traced_ns / (double)n);
	child_stop(&c);
	glibc_trace_close(g);
	free(f);
}

/* The first bytes of function `name` in the ELF file at path: how many read. */
static size_t read_function(const char *path, const char *name, uint8_t *code, size_t size)
{
	uint64_t off;
	ssize_t r;
	int fd;

	assert_int_equal(target_elf_symbol(path, name, &off), 0);
	assert_int_equal(target_elf_file_offsets(path, &off, 1), 0);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	r = pread(fd, code, size, (off_t)off);
	close(fd);
	assert_true(r > 0);
	return (size_t)r;
}

/* Each probe sits where glibc_site.h says, in the libc the workload maps
 * (the loader read the function's bytes from the right place): on its
 * entry, or on an emulated instruction that only instructions changing
 * nothing a probe reads precede (on Debian 12's glibc 2.36: free +3, on its
 * je; memalign, valloc, pvalloc, posix_memalign +7, past a cmpb). The
 * figures are the other tests': as exact wherever the probes sit. */
static void glibc_trace__sites__emulated_past_nothing_read(void **state)
{
	static const char *const names[] = { "free",	"malloc",	"calloc",
					     "realloc", "memalign",	"valloc",
					     "pvalloc", "reallocarray", "posix_memalign" };
	uint8_t code[GLIBC_SITE_MAX_BYTES];
	char libc[PATH_MAX];
	struct child c = { 0 };
	struct glibc_trace *g;
	size_t n, len;

	(void)state;
	g = trace_child(&c, -1, 0, NULL);
	assert_int_equal(find_libc(c.pid, libc, sizeof(libc)), 0);
	for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
		uint64_t site;

		/* glibc has each of them (pvalloc and valloc too, deprecated but
		 * exported): one it lacks is a failure, not a case to pass over */
		if (glibc_trace_site(g, names[k], &site))
			fail_msg("%s: no probe site found in %s", names[k], libc);
		n = read_function(libc, names[k], code, sizeof(code));
		print_message("%s: probe at +%llu\n", names[k], (unsigned long long)site);
#if defined(__x86_64__)
		assert_int_equal(site, glibc_site_offset(code, n));
		if (site) {
			assert_int_equal(glibc_insn_decode(code + site, n - site, &len),
					 GLIBC_INSN_EMULATED);
			for (size_t off = 0; off < site; off += len)
				assert_int_equal(glibc_insn_decode(code + off, n - off, &len),
						 GLIBC_INSN_PASS);
		}
#else
		assert_int_equal(site, 0);
#endif
	}
	child_stop(&c);
	glibc_trace_close(g);
}

/* Attached before exec, as tally attaches to a command it starts: what the
 * child allocated before its exec is gone from the figures, and what the
 * workload does after is counted exactly. */
static void glibc_trace__attached_before_exec__counts_the_new_image_only(void **state)
{
	struct glibc_figures *f = calloc(1, sizeof(*f)), *f0 = calloc(1, sizeof(*f0));
	struct child c = { 0 };
	struct glibc_trace *g;
	char libc[PATH_MAX];
	int err;

	(void)state;
	assert_non_null(f);
	assert_non_null(f0);
	assert_int_equal(child_spawn(&c, true), 0);
	/* before exec the child maps the libc the test maps */
	assert_int_equal(find_libc(getpid(), libc, sizeof(libc)), 0);
	g = glibc_trace_open(c.pid, -1, 0, &err);
	assert_non_null(g);
	assert_int_equal(glibc_trace_attach(g, c.pid, libc), 0);
	assert_int_equal(child_release(&c), 0);

	assert_int_equal(glibc_trace_read(g, f0), 0);
	print_message("after exec, at the workload's start: live %llu in %llu blocks, %llu calls\n",
		      (unsigned long long)f0->live, (unsigned long long)f0->alloc_objs[0],
		      (unsigned long long)f0->calls);
	/* the 5 MB block and the rest died with the old image */
	assert_true(f0->alloc_bytes[0] < 5 << 20);
	assert_int_equal(f0->large_count, 0);
	assert_int_equal(f0->live, f0->alloc_bytes[0] - f0->dealloc_bytes[0]);
	assert_true(glibc_figures_exact(f0));

	/* from here the workload's book is the difference */
	assert_int_equal(child_cmd(&c, "A"), 0);
	assert_int_equal(glibc_trace_read(g, f), 0);
	assert_int_equal(rep(&c, "mismatch", -1), 0);
	assert_int_equal(f->live - f0->live, rep(&c, "live", -1));
	assert_int_equal(f->large_count, rep(&c, "hblks", -1));
	assert_int_equal(f->calls - f0->calls, rep(&c, "calls", -1));
	assert_int_equal(f->alloc_bytes[0] - f0->alloc_bytes[0], rep(&c, "ab", 0));
	assert_int_equal(f->alloc_objs[0] - f0->alloc_objs[0], rep(&c, "ao", 0));
	assert_int_equal(f->dealloc_bytes[0] - f0->dealloc_bytes[0], rep(&c, "db", 0));
	assert_int_equal(f->dealloc_objs[0] - f0->dealloc_objs[0], rep(&c, "do", 0));
	assert_true(glibc_figures_exact(f));

	child_stop(&c);
	glibc_trace_close(g);
	free(f0);
	free(f);
}

int main(int argc, char **argv)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(glibc_trace__open_read_close__figures_start_at_zero),
		cmocka_unit_test(glibc_trace_attach__file_without_malloc__enoent),
		cmocka_unit_test(glibc_trace__every_entry__figures_equal_glibcs_own),
		cmocka_unit_test(glibc_trace__main_threads_map__charges_allocating_group),
		cmocka_unit_test(glibc_trace__threads__per_thread_groups_and_cross_frees),
		cmocka_unit_test(glibc_trace__block_map_full__untracked_not_exact),
		cmocka_unit_test(glibc_trace__attached_before_exec__counts_the_new_image_only),
		cmocka_unit_test(glibc_trace__malloc_free_loop__counted_once_costed),
		cmocka_unit_test(glibc_trace__sites__emulated_past_nothing_read),
	};

	if (geteuid() != 0) {
		/* not what it exists for: a failure (tests/lib.sh's need_root) */
		printf("FAIL - test_glibc: needs root (BPF, uprobes); run it as root\n");
		printf("0 passed, 1 failed, 0 skipped\n");
		return 1;
	}
	if (argc > 1) {
		snprintf(workload_path, sizeof(workload_path), "%s", argv[1]);
	} else {
		ssize_t n = readlink("/proc/self/exe", workload_path, sizeof(workload_path) - 1);
		char *slash;

		if (n < 0)
			return 1;
		workload_path[n] = 0;
		slash = strrchr(workload_path, '/');
		snprintf(slash + 1, sizeof(workload_path) - (size_t)(slash + 1 - workload_path),
			 "glibc_workload");
	}
	signal(SIGPIPE, SIG_IGN);
	return cmocka_run_group_tests_name("glibc", tests, NULL, NULL);
}
