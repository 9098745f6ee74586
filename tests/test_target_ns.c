// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where a target lives (user/os/target_ns.c): the container id a cgroup
 * path carries, the cgroup file's format (v2, and a hybrid host's v1 lines),
 * and, against real processes, the mount and PID namespaces a container is
 * made of (built here with unshare, as root; skipped otherwise); and a
 * cgroup's path from its id (user/os/cgroup_id.c), in directories made here
 * that a crafted mountinfo calls the hierarchies.
 */
#include <errno.h>
#include <sched.h>
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
#include <unistd.h>

#include <cmocka.h>
#include "test_skip.h"

#include "../user/os/cgroup_id.h"
#include "../user/os/target.h"

#define ID64 "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID63 "123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
#define ID64B "fedcba9876543210fedcba9876543210fedcba9876543210fedcba9876543210"

static void container_id__each_runtime_s_naming(void **state)
{
	static const char *const paths[] = {
		"/system.slice/docker-" ID64 ".scope",
		"/docker/" ID64,
		"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod1234_5678.slice/"
		"cri-containerd-" ID64 ".scope",
		"/kubepods/burstable/pod0a1b/crio-" ID64 ".scope",
		"/machine.slice/libpod-" ID64 ".scope/container",
	};
	char id[TARGET_CONTAINER_MAX];
	(void)state;
	for (size_t i = 0; i < sizeof(paths) / sizeof(paths[0]); i++) {
		assert_true(target_container_id(paths[i], id, sizeof(id)));
		assert_string_equal(id, ID64);
	}
}

static void container_id__none_or_the_innermost(void **state)
{
	char id[TARGET_CONTAINER_MAX];
	(void)state;
	assert_false(target_container_id("/", id, sizeof(id)));
	assert_false(
		target_container_id("/user.slice/user-0.slice/session-3.scope", id, sizeof(id)));
	/* 63 and 65 hex digits are not an id; nor is a pod's uid */
	assert_false(target_container_id("/docker/" ID64 "0", id, sizeof(id)));
	assert_false(target_container_id("/docker/" ID63, id, sizeof(id)));
	assert_false(target_container_id("/kubepods/pod" ID64 "x", id, 10)); /* no room */
	/* nested (docker in docker): the last one names the process's own */
	assert_true(target_container_id("/docker/" ID64 "/docker/" ID64B, id, sizeof(id)));
	assert_string_equal(id, ID64B);
}

static char *cgroup_file(const char *text)
{
	static char path[] = "/tmp/tally-test-cgroup-XXXXXX";
	int fd;

	strcpy(path + sizeof(path) - 7, "XXXXXX");
	fd = mkstemp(path);
	assert_true(fd >= 0);
	assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
	close(fd);
	return path;
}

static void cgroup_file__v2_path_and_a_hybrid_host_s_v1_id(void **state)
{
	char cg[4096], id[TARGET_CONTAINER_MAX];
	char *f;
	(void)state;
	f = cgroup_file("0::/system.slice/docker-" ID64 ".scope\n");
	assert_int_equal(target_cgroup_file(f, cg, sizeof(cg), id, sizeof(id)), 0);
	assert_string_equal(cg, "/system.slice/docker-" ID64 ".scope");
	assert_string_equal(id, ID64);
	unlink(f);
	/* v1 names the container, v2 does not (docker on a hybrid host) */
	f = cgroup_file("12:memory:/docker/" ID64 "\n3:cpu:/docker/" ID64 "\n0::/\n");
	assert_int_equal(target_cgroup_file(f, cg, sizeof(cg), id, sizeof(id)), 0);
	assert_string_equal(cg, "/");
	assert_string_equal(id, ID64);
	unlink(f);
	/* only v1: no v2 path, which is said */
	f = cgroup_file("4:memory:/\n");
	assert_int_equal(target_cgroup_file(f, cg, sizeof(cg), id, sizeof(id)), -ENOENT);
	assert_string_equal(id, "");
	unlink(f);
	/* a path with colons in it is kept whole */
	f = cgroup_file("0::/a:b/c\n");
	assert_int_equal(target_cgroup_file(f, cg, sizeof(cg), id, sizeof(id)), 0);
	assert_string_equal(cg, "/a:b/c");
	unlink(f);
	assert_int_equal(target_cgroup_file("/nonexistent", cg, sizeof(cg), id, sizeof(id)),
			 -ENOENT);
}

static void own_process__same_namespaces_paths_as_they_are(void **state)
{
	char path[256] = "/usr/lib/libc.so.6";
	pid_t ppid = 0;
	(void)state;
	assert_true(target_same_mount_ns(getpid()));
	assert_int_equal(target_reach(getpid(), path, sizeof(path)), 0);
	assert_string_equal(path, "/usr/lib/libc.so.6");
	assert_int_equal(target_ns_pid(getpid()), getpid());
	assert_int_equal(target_ppid(getpid(), &ppid), 0);
	assert_int_equal(ppid, getppid());
	assert_int_equal(target_ppid(999999999, &ppid), -ENOENT);
}

/* A container without a runtime: new mount and PID namespaces. The child
 * reports its child's host PID (PID 1 inside), which waits for the pipe. */
static void namespaced_process__reached_through_proc_root(void **state)
{
	int up[2], hold[2];
	pid_t pid, inner;
	(void)state;
	if (geteuid())
		skip_because("needs root (namespaces)");
	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(hold), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		char c;
		if (unshare(CLONE_NEWNS | CLONE_NEWPID))
			_exit(1);
		pid_t k = fork();
		if (k == 0) {
			read(hold[0], &c, 1); /* until the parent has looked */
			_exit(0);
		}
		write(up[1], &k, sizeof(k));
		waitpid(k, NULL, 0);
		_exit(0);
	}
	assert_int_equal(read(up[0], &inner, sizeof(inner)), sizeof(inner));
	char path[256] = "/lib/x.so", want[256];
	assert_false(target_same_mount_ns(inner));
	assert_int_equal(target_reach(inner, path, sizeof(path)), 0);
	snprintf(want, sizeof(want), "/proc/%d/root/lib/x.so", inner);
	assert_string_equal(path, want);
	assert_int_equal(target_ns_pid(inner), 1);
	char small[16] = "/lib/x.so";
	assert_int_equal(target_reach(inner, small, sizeof(small)), -ENAMETOOLONG);
	assert_int_equal(write(hold[1], "x", 1), 1);
	assert_int_equal(waitpid(pid, NULL, 0), pid);
}

static uint64_t inode_of(const char *path)
{
	struct stat st;

	assert_int_equal(stat(path, &st), 0);
	return st.st_ino;
}

static void cgroup_id__the_memory_hierarchy_s_directory_of_that_inode(void **state)
{
	char top[] = "/tmp/tally-test-cgroups-XXXXXX", d[256], info[2048], path[256];
	char *f;
	(void)state;
	assert_non_null(mkdtemp(top));
	snprintf(d, sizeof(d), "%s/v1", top);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/v1/a", top);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/v1/a/b", top);
	assert_int_equal(mkdir(d, 0700), 0);
	uint64_t b = inode_of(d);
	snprintf(d, sizeof(d), "%s/v2", top);
	assert_int_equal(mkdir(d, 0700), 0);
	snprintf(d, sizeof(d), "%s/v2/c", top);
	assert_int_equal(mkdir(d, 0700), 0);
	uint64_t c = inode_of(d);
	/* a v1 hierarchy without memory first: not the one searched */
	snprintf(info, sizeof(info),
		 "31 30 0:28 / %s/v2 rw - cgroup cgroup rw,cpu\n"
		 "34 30 0:31 /inner %s/v1 rw,relatime shared:9 - cgroup cgroup rw,memory\n"
		 "40 30 0:37 / %s/v2 rw,relatime - cgroup2 cgroup2 rw\n",
		 top, top, top);
	f = cgroup_file(info);
	/* v1's path starts at its mount's root in the hierarchy */
	assert_int_equal(cgroup_id_path_in(f, b, true, path, sizeof(path)), 0);
	assert_string_equal(path, "/inner/a/b");
	assert_int_equal(cgroup_id_path_in(f, c, false, path, sizeof(path)), 0);
	assert_string_equal(path, "/c");
	assert_int_equal(cgroup_id_path_in(f, 1, false, path, sizeof(path)), 0);
	assert_string_equal(path, "/");
	/* gone, or in the other hierarchy: not found, said */
	assert_int_equal(cgroup_id_path_in(f, c, true, path, sizeof(path)), -ENOENT);
	unlink(f);
	f = cgroup_file("40 30 0:37 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n");
	assert_int_equal(cgroup_id_path_in(f, c, false, path, sizeof(path)), -ENOENT);
	unlink(f);
	snprintf(d, sizeof(d), "rm -r %s", top);
	assert_int_equal(system(d), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(container_id__each_runtime_s_naming),
		cmocka_unit_test(container_id__none_or_the_innermost),
		cmocka_unit_test(cgroup_file__v2_path_and_a_hybrid_host_s_v1_id),
		cmocka_unit_test(own_process__same_namespaces_paths_as_they_are),
		cmocka_unit_test(namespaced_process__reached_through_proc_root),
		cmocka_unit_test(cgroup_id__the_memory_hierarchy_s_directory_of_that_inode),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
