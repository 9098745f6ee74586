// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * uprobe_multi links (uprobe_multi.h): the attribute of BPF_LINK_CREATE as
 * kernels since 6.6 read it, the feature probe libbpf 1.3 does, and the
 * closing of many links at once.
 */
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <linux/bpf.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "uprobe_multi.h"

#define UPROBE_MULTI_F_RETURN 1
#define UPROBE_MULTI_CLOSE_THREADS 64 /* past it, the rest close on the caller's */

struct uprobe_multi_attr {
	uint32_t prog_fd, target_fd, attach_type, flags;
	uint64_t path, offsets, ref_ctr_offsets, cookies;
	uint32_t cnt, multi_flags, pid, pad;
};

int uprobe_multi_link(int prog_fd, const char *path, const uint64_t *off, const uint64_t *ref_ctr,
		      const uint64_t *cookies, unsigned n, pid_t pid, bool ret)
{
	struct uprobe_multi_attr a = {
		.prog_fd = (uint32_t)prog_fd,
		.attach_type = UPROBE_MULTI_ATTACH_TYPE,
		.path = (uint64_t)(uintptr_t)path,
		.offsets = (uint64_t)(uintptr_t)off,
		.ref_ctr_offsets = (uint64_t)(uintptr_t)ref_ctr,
		.cookies = (uint64_t)(uintptr_t)cookies,
		.cnt = n,
		.multi_flags = ret ? UPROBE_MULTI_F_RETURN : 0,
		.pid = pid > 0 ? (uint32_t)pid : 0,
	};
	int fd = (int)syscall(__NR_bpf, BPF_LINK_CREATE, &a, sizeof(a));

	return fd < 0 ? -errno : fd;
}

int uprobe_multi_prepare(struct bpf_object *obj, const char *const *sections)
{
	struct bpf_program *prog;
	int err = 0;

	bpf_object__for_each_program(prog, obj)
	{
		const char *sec = bpf_program__section_name(prog);
		for (const char *const *s = sections; !err && *s; s++)
			if (!strcmp(sec, *s))
				err = bpf_program__set_expected_attach_type(
					prog, UPROBE_MULTI_ATTACH_TYPE);
	}
	return err;
}

/* A program that does nothing, linked on "/": a kernel that knows
 * uprobe_multi says EBADF (not a regular file), one that does not EINVAL. */
static bool probe(void)
{
	struct bpf_insn insns[] = {
		{ .code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0 },
		{ .code = BPF_JMP | BPF_EXIT },
	};
	LIBBPF_OPTS(bpf_prog_load_opts, o, .expected_attach_type = UPROBE_MULTI_ATTACH_TYPE);
	uint64_t off = 0;
	int prog = bpf_prog_load(BPF_PROG_TYPE_KPROBE, NULL, "GPL", insns, 2, &o), fd, err;

	if (prog < 0)
		return false;
	fd = uprobe_multi_link(prog, "/", &off, NULL, NULL, 1, 0, false);
	err = fd;
	if (fd >= 0)
		close(fd);
	close(prog);
	return err == -EBADF;
}

bool uprobe_multi_supported(void)
{
	static int known; /* 0: not probed yet, 1: yes, -1: no */
	const char *e = getenv("TALLY_UPROBE_MULTI");

	if (!known)
		known = (!e || strcmp(e, "off")) && probe() ? 1 : -1;
	return known > 0;
}

static void *close_one(void *arg)
{
	close((int)(intptr_t)arg);
	return NULL;
}

void uprobe_multi_close(const int *fds, unsigned n)
{
	pthread_t t[UPROBE_MULTI_CLOSE_THREADS];
	bool started[UPROBE_MULTI_CLOSE_THREADS];
	unsigned nt = n < UPROBE_MULTI_CLOSE_THREADS ? n : UPROBE_MULTI_CLOSE_THREADS;

	/* the last on this thread: one thread fewer to start */
	for (unsigned i = 0; i + 1 < nt; i++)
		started[i] = fds[i] >= 0 &&
			     !pthread_create(&t[i], NULL, close_one, (void *)(intptr_t)fds[i]);
	for (unsigned i = 0; i < n; i++)
		if (fds[i] >= 0 && (i + 1 >= nt || !started[i]))
			close(fds[i]);
	for (unsigned i = 0; i + 1 < nt; i++)
		if (started[i])
			pthread_join(t[i], NULL);
}
