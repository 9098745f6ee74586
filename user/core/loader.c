// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading bpf/tally.bpf.c for one target (the libbpf-bootstrap lifecycle:
 * open, set read-only config, load, attach, poll, one cleanup).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/tally_bpf.h"
#include "clock.h"
#include "links.h"
#include "loader.h"
#include "tally.skel.h"

#define MAX_LINKS 32
#define RING_MAX_BYTES (1ULL << 40) /* ring_size's bound: no loop past it */

struct loader {
	struct tally_bpf *skel;
	struct ring_buffer *rb;
	struct bpf_link *links[MAX_LINKS];
	unsigned nlinks;
	loader_msg_fn fn;
	void *ctx;
	uint64_t ring_bytes;
	bool follow;	 /* the probes fire in every process: the map says which are ours */
	uint64_t budget; /* bytes this consume may still take */
	unsigned taken;
	bool more; /* the last consume stopped with records left */
};

/* What on_ring returns to stop libbpf's loop, which otherwise runs for as
 * long as the producer keeps up with it: forever on a busy target. */
#define RING_BUDGET_SPENT (-EDQUOT)

static int on_ring(void *ctx, void *data, size_t len)
{
	struct loader *l = ctx;
	int err = l->fn(l->ctx, data, len);
	l->taken++;
	if (err < 0) /* LOADER_STOP, or the callback's error: libbpf hands it on */
		return err;
	if (len + BPF_RINGBUF_HDR_SZ >= l->budget) /* a record's header too */
		return RING_BUDGET_SPENT;
	l->budget -= len + BPF_RINGBUF_HDR_SZ;
	return 0;
}

static uint64_t ring_size(uint64_t bytes)
{
	uint64_t page = (uint64_t)sysconf(_SC_PAGESIZE), n = page;

	while (n < bytes && n < RING_MAX_BYTES)
		n <<= 1;
	return n;
}

static bool libbpf_verbose;

/* libbpf's own lines (warnings on a failed attach, and the like) only with
 * -v: every failure is said once, in tally's own words, by the caller. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (!libbpf_verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void loader_libbpf_messages(bool verbose)
{
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);
}

int loader_open(struct loader **out, pid_t tgid, bool follow, uint64_t ring_bytes, loader_msg_fn fn,
		void *ctx)
{
	struct loader *l = calloc(1, sizeof(*l));
	int err;

	if (!l)
		return -ENOMEM;
	l->fn = fn;
	l->ctx = ctx;
	l->skel = tally_bpf__open();
	if (!l->skel) {
		err = -errno;
		goto fail;
	}
	l->skel->rodata->follow = follow;
	l->follow = follow;
	l->ring_bytes = ring_size(ring_bytes);
	err = bpf_map__set_max_entries(l->skel->maps.events, (uint32_t)l->ring_bytes);
	if (err)
		goto fail;
	/* every program is attached by hand, each to its own file and pid */
	struct bpf_program *prog;
	bpf_object__for_each_program(prog, l->skel->obj) bpf_program__set_autoattach(prog, false);
	err = tally_bpf__load(l->skel);
	if (!err)
		err = loader_add_proc(l, tgid, 0);
	if (err)
		goto fail;
	l->rb = ring_buffer__new(bpf_map__fd(l->skel->maps.events), on_ring, l, NULL);
	if (!l->rb) {
		err = -errno;
		goto fail;
	}
	*out = l;
	return 0;
fail:
	loader_close(l);
	return err;
}

int loader_add_proc(struct loader *l, pid_t pid, pid_t ppid)
{
	uint32_t k = (uint32_t)pid, v = (uint32_t)ppid;

	if (bpf_map__update_elem(l->skel->maps.procs, &k, sizeof(k), &v, sizeof(v), BPF_ANY))
		return -errno;
	return 0;
}

static int keep_link(struct loader *l, struct bpf_link *link)
{
	return links_keep(l->links, &l->nlinks, MAX_LINKS, link);
}

int loader_attach_sched(struct loader *l)
{
	struct tally_bpf *s = l->skel;
	int err;

	s->bss->attach_ns = clock_now_ns();
	err = keep_link(l, bpf_program__attach(s->progs.tally_switch));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_fork));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_exit));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_rename));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_exec));
	return err;
}

static int attach_usdt(struct loader *l, struct bpf_program *prog, pid_t pid, const char *path,
		       const char *name)
{
	/* following, on the file for every process that maps it: a child is
	 * probed from its first instruction, an exec'd image as it maps the
	 * library; the BPF side keeps what comes from the tree */
	return keep_link(
		l, bpf_program__attach_usdt(prog, l->follow ? -1 : pid, path, "tally", name, NULL));
}

int loader_attach_alloc(struct loader *l, pid_t pid, const char *path)
{
	int err = attach_usdt(l, l->skel->progs.tally_batch, pid, path, "batch");

	if (!err)
		err = attach_usdt(l, l->skel->progs.tally_stats, pid, path, "stats");
	return err;
}

int loader_attach_batch(struct loader *l, pid_t pid, const char *path)
{
	return attach_usdt(l, l->skel->progs.tally_batch, pid, path, "batch");
}

int loader_attach_sdk(struct loader *l, pid_t pid, const char *path)
{
	struct tally_bpf *s = l->skel;
	int err = attach_usdt(l, s->progs.tally_group_register, pid, path, "group_register");

	if (!err)
		err = attach_usdt(l, s->progs.tally_group_enter, pid, path, "group_enter");
	if (!err)
		err = attach_usdt(l, s->progs.tally_group_exit, pid, path, "group_exit");
	if (!err)
		err = attach_usdt(l, s->progs.tally_yield, pid, path, "yield");
	if (!err)
		err = attach_usdt(l, s->progs.tally_reject, pid, path, "reject");
	return err;
}

int loader_consume(struct loader *l)
{
	int err;

	l->budget = l->ring_bytes;
	l->taken = 0;
	err = ring_buffer__consume(l->rb);
	l->more = err == RING_BUDGET_SPENT || err == LOADER_STOP;
	if (err < 0 && !l->more)
		return err;
	return (int)l->taken;
}

bool loader_more(const struct loader *l)
{
	return l->more;
}

void loader_lost(struct loader *l, struct tally_lost *sum)
{
	int ncpu = libbpf_num_possible_cpus();
	uint32_t zero = 0;

	memset(sum, 0, sizeof(*sum));
	if (ncpu <= 0)
		return;
	struct tally_lost *v = calloc((size_t)ncpu, sizeof(*v));
	if (!v)
		return;
	if (!bpf_map__lookup_elem(l->skel->maps.lost, &zero, sizeof(zero), v,
				  (size_t)ncpu * sizeof(*v), 0)) {
		for (int i = 0; i < ncpu; i++) {
			sum->msgs += v[i].msgs;
			sum->words += v[i].words;
			sum->bad += v[i].bad;
			sum->procs += v[i].procs;
			sum->cpu += v[i].cpu;
		}
	}
	free(v);
}

int loader_group_cpu(struct loader *l, pid_t pid, uint64_t cpu[TALLY_MAX_GROUPS], bool forget)
{
	int fd = bpf_map__fd(l->skel->maps.proc_cpu);
	struct tally_bpf_cpu_key key, next;
	uint32_t found[TALLY_MAX_GROUPS];
	unsigned nfound = 0;
	bool first = true;

	memset(cpu, 0, TALLY_MAX_GROUPS * sizeof(cpu[0]));
	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		uint64_t ns;
		first = false;
		key = next;
		if (key.pid != (uint32_t)pid || key.group >= TALLY_MAX_GROUPS ||
		    bpf_map_lookup_elem(fd, &key, &ns))
			continue;
		cpu[key.group] = ns;
		found[nfound++] = key.group;
	}
	/* deleted after the walk, which a deletion would restart */
	for (unsigned i = 0; forget && i < nfound; i++) {
		key = (struct tally_bpf_cpu_key){ .pid = (uint32_t)pid, .group = found[i] };
		bpf_map_delete_elem(fd, &key);
	}
	return 0;
}

void loader_running_cpu(struct loader *l, pid_t pid, uint64_t now_ns,
			uint64_t cpu[TALLY_MAX_GROUPS])
{
	int fd = bpf_map__fd(l->skel->maps.threads);
	uint32_t key, next;
	bool first = true;

	/* the interval a running thread is in is charged at its next switch:
	 * a view adds it now, so that a busy thread shows its CPU as it goes */
	while (!bpf_map_get_next_key(fd, first ? NULL : &key, &next)) {
		struct tally_bpf_thread t;
		first = false;
		key = next;
		if (bpf_map_lookup_elem(fd, &key, &t) || !t.running || t.pid != (uint32_t)pid ||
		    t.group >= TALLY_MAX_GROUPS || now_ns <= t.last_ns)
			continue;
		cpu[t.group] += now_ns - t.last_ns;
	}
}

int loader_set_thread_group(struct loader *l, pid_t pid, uint32_t tid, uint32_t group)
{
	int fd = bpf_map__fd(l->skel->maps.threads);
	struct tally_bpf_thread t;

	if (bpf_map_lookup_elem(fd, &tid, &t)) {
		/* not seen yet: from the attach on, as if it had run since */
		t = (struct tally_bpf_thread){ .last_ns = l->skel->bss->attach_ns,
					       .running = 1,
					       .pid = (uint32_t)pid };
	}
	/* a racing update by the BPF side is lost at worst for one interval */
	t.group = group;
	if (bpf_map_update_elem(fd, &tid, &t, BPF_ANY))
		return -errno;
	return 0;
}

void loader_shared_fds(struct loader *l, int *events_fd, int *lost_fd, int *threads_fd)
{
	*events_fd = bpf_map__fd(l->skel->maps.events);
	*lost_fd = bpf_map__fd(l->skel->maps.lost);
	*threads_fd = bpf_map__fd(l->skel->maps.threads);
}

int loader_procs_fd(struct loader *l)
{
	return bpf_map__fd(l->skel->maps.procs);
}

void loader_close(struct loader *l)
{
	if (!l)
		return;
	links_drop_to(l->links, &l->nlinks, 0);
	ring_buffer__free(l->rb);
	tally_bpf__destroy(l->skel);
	free(l);
}
