// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Loading bpf/tally.bpf.c for one target (the libbpf-bootstrap lifecycle:
 * open, set read-only config, load, attach, poll, one cleanup). The maps
 * the objects share are made at the open, so that the others load beside
 * this one; the USDT probes are uprobe_multi links where the kernel has
 * them (uprobe_multi.h: letting them go at the end costs milliseconds, not
 * a grace period each), libbpf's perf-event ones elsewhere.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "../../bpf/tally_bpf.h"
#include "../os/remote.h"
#include "../util/clock.h"
#include "links.h"
#include "heap_rings.h"
#include "loader.h"
#include "loader_internal.h"
#include "tally.skel.h"
#include "../util/timing.h"
#include "uprobe_multi.h"
#include "usdt.h"

#define USDT_MAX_SITES 16	    /* of one probe in one file (copies of an inlined site) */
#define RING_MAX_BYTES (1ULL << 40) /* ring_size's bound: no loop past it */

/* What on_ring returns to stop libbpf's loop, which otherwise runs for as
 * long as the producer keeps up with it: forever on a busy target. */
#define RING_BUDGET_SPENT (-EDQUOT)

static int on_ring(void *ctx, void *data, size_t len)
{
	struct loader *l = ctx;
	/* a heap's batches that came through its shared ring first */
	int before = heap_rings_before(l->rings, data, len);
	int err = l->fn(l->ctx, data, len);
	l->taken++;
	if (before < 0 && err >= 0)
		err = before;
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

/* One of the maps the BPF objects share (tally_maps.bpf.h), made as
 * tally.bpf.c declares it, before its load: another object given it
 * (bpf_map__reuse_fd) may then load at the same time. */
static int share_map(struct bpf_map *m)
{
	LIBBPF_OPTS(bpf_map_create_opts, o, .map_flags = bpf_map__map_flags(m));
	int fd = bpf_map_create(bpf_map__type(m), bpf_map__name(m), bpf_map__key_size(m),
				bpf_map__value_size(m), bpf_map__max_entries(m), &o);
	int err;

	if (fd < 0)
		return -errno;
	err = bpf_map__reuse_fd(m, fd);
	close(fd); /* the object holds a copy */
	return err;
}

/* The USDT programs loaded for uprobe_multi links, where the kernel makes
 * them and this build reads the probes' arguments (usdt.h). Their cookies
 * are the spec ids: libbpf's map from addresses to ids goes unused. */
static int use_multi(struct loader *l)
{
	static const char *const usdt[] = { "usdt", NULL };
	int err;

	l->multi = usdt_supported() && uprobe_multi_supported();
	if (!l->multi)
		return 0;
	err = uprobe_multi_prepare(l->skel->obj, usdt);
	if (!err)
		err = bpf_map__set_max_entries(l->skel->maps.__bpf_usdt_ip_to_spec_id, 1);
	return err;
}

/* What the OOM program needs to read a victim's heaps: this build's layout
 * of them (the target's allocator is the one beside tally, as for every
 * read of user/os/remote.c) and the page size its counters are in. */
static void configure_oom(struct tally_bpf *s)
{
	struct remote_heap_layout h;
	long page = sysconf(_SC_PAGESIZE);

	remote_heap_layout(&h);
	s->rodata->oom_layout.next = h.next;
	s->rodata->oom_layout.id = h.id;
	s->rodata->oom_layout.tid = h.tid;
	s->rodata->oom_layout.seq = h.seq;
	s->rodata->oom_layout.batch = h.batch;
	s->rodata->oom_layout.handing = h.handing;
	s->rodata->oom_layout.hand_free = h.hand_free;
	s->rodata->oom_layout.hand_owner = h.hand_owner;
	s->rodata->oom_page_size = page > 0 ? (uint32_t)page : 4096;
}

static int configure(struct loader *l, pid_t tgid, bool follow, uint64_t ring_bytes)
{
	struct tally_bpf *s = l->skel;
	struct bpf_program *prog;
	int err;

	s->rodata->follow = follow;
	configure_oom(s);
	l->follow = follow;
	l->ring_bytes = ring_size(ring_bytes);
	/* every program is attached by hand, each to its own file and pid */
	bpf_object__for_each_program(prog, s->obj) bpf_program__set_autoattach(prog, false);
	err = bpf_map__set_max_entries(s->maps.events, (uint32_t)l->ring_bytes);
	if (!err)
		err = use_multi(l);
	if (!err)
		err = share_map(s->maps.events);
	if (!err)
		err = share_map(s->maps.lost);
	if (!err)
		err = share_map(s->maps.threads);
	if (!err)
		err = share_map(s->maps.procs);
	if (!err && tgid > 0) /* 0: the charging loader of serve --all, no root */
		err = loader_add_proc(l, tgid, 0);
	return err;
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
	l->rings = heap_rings_new(fn, ctx);
	if (!l->rings) {
		free(l);
		return -ENOMEM;
	}
	l->skel = tally_bpf__open();
	if (!l->skel) {
		err = -errno;
		goto fail;
	}
	err = configure(l, tgid, follow, ring_bytes);
	if (err)
		goto fail;
	timing_mark("tally.bpf.o: open, shared maps");
	*out = l;
	return 0;
fail:
	loader_close(l);
	return err;
}

int loader_load(struct loader *l)
{
	int err;

	loader_log_begin();
	err = tally_bpf__load(l->skel);
	LOADER_LOG_END("tally.bpf.o");
	if (err)
		return err;
	l->rb = ring_buffer__new(bpf_map__fd(l->skel->maps.events), on_ring, l, NULL);
	err = l->rb ? 0 : -errno;
	timing_mark("tally.bpf.o: load");
	return err;
}

int loader_oom_heaps(struct loader *l, pid_t pid, uint64_t heaps_addr)
{
	uint32_t k = (uint32_t)pid;

	if (bpf_map__update_elem(l->skel->maps.oom_heaps, &k, sizeof(k), &heaps_addr,
				 sizeof(heaps_addr), BPF_ANY))
		return -errno;
	return 0;
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
	err = l->no_switch ? 0 : keep_link(l, bpf_program__attach(s->progs.tally_switch));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_fork));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_exit));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_rename));
	if (!err)
		err = keep_link(l, bpf_program__attach(s->progs.tally_exec));
	/* without it (a kernel that has not the tracepoint) a process the OOM
	 * killer takes is flagged as any SIGKILL: said, not fatal */
	int oom = err ? 0 : keep_link(l, bpf_program__attach(s->progs.tally_oom));
	if (oom)
		fprintf(stderr, "tally: the OOM killer's choices are not seen: %s\n",
			strerror(-oom));
	return err;
}

/* prog on the sites of tally:name in `path`, in one uprobe_multi link. */
static int attach_usdt_multi(struct loader *l, struct bpf_program *prog, pid_t pid,
			     const char *path, const char *name)
{
	struct bpf_map *specs = l->skel->maps.__bpf_usdt_specs;
	struct usdt_site site[USDT_MAX_SITES];
	uint64_t off[USDT_MAX_SITES], sema[USDT_MAX_SITES], cookie[USDT_MAX_SITES];
	int n = usdt_sites(path, "tally", name, site, USDT_MAX_SITES), fd;

	if (n == 0)
		n = -ENOENT; /* as libbpf says it */
	if (n > 0 &&
	    (l->nufds == MAX_LINKS || l->nspecs + (unsigned)n > bpf_map__max_entries(specs)))
		n = -ENOSPC;
	for (int i = 0; i < n; i++) {
		uint32_t id = l->nspecs + (uint32_t)i;
		if (bpf_map__update_elem(specs, &id, sizeof(id), &site[i].spec,
					 sizeof(site[i].spec), BPF_ANY))
			return -errno;
		off[i] = site[i].off;
		sema[i] = site[i].sema_off;
		cookie[i] = id;
	}
	if (n < 0)
		return n;
	fd = uprobe_multi_link(bpf_program__fd(prog), path, off, sema, cookie, (unsigned)n, pid,
			       false);
	if (fd < 0)
		return fd;
	l->nspecs += (unsigned)n;
	l->ufds[l->nufds++] = fd;
	return 0;
}

static int attach_usdt(struct loader *l, struct bpf_program *prog, pid_t pid, const char *path,
		       const char *name)
{
	/* following, on the file for every process that maps it: a child is
	 * probed from its first instruction, an exec'd image as it maps the
	 * library; the BPF side keeps what comes from the tree */
	pid = l->follow ? -1 : pid;
	if (l->multi)
		return attach_usdt_multi(l, prog, pid, path, name);
	return keep_link(l, bpf_program__attach_usdt(prog, pid, path, "tally", name, NULL));
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
	/* then what the heaps' rings hold (a stop ends the consume there too) */
	if (err != LOADER_STOP) {
		int n = heap_rings_drain(l->rings, false);
		if (n < 0 && n != LOADER_STOP)
			return n;
		l->taken += n > 0 ? (unsigned)n : 0;
		/* a ring half full or more: the next consume comes at once */
		l->more |= n == LOADER_STOP || n >= TALLY_RING_SLOTS / 2;
	}
	return (int)l->taken;
}

int loader_drain_rings(struct loader *l)
{
	int n = heap_rings_drain(l->rings, true);
	return n == LOADER_STOP ? 0 : n;
}

bool loader_rings_active(const struct loader *l)
{
	return heap_rings_active(l->rings);
}

uint64_t loader_rings_read(const struct loader *l)
{
	return heap_rings_read(l->rings);
}

uint64_t loader_rings_read_pid(struct loader *l, pid_t pid, bool forget)
{
	return heap_rings_read_pid(l->rings, (uint32_t)pid, forget);
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
	/* batches of rings another tracer took */
	sum->msgs += heap_rings_missed(l->rings);
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

/* A running thread's clock now (/proc/PID/task/TID/schedstat's first field,
 * which the kernel brings up to date as it is read); 0 when it cannot. */
static uint64_t thread_clock(pid_t pid, uint32_t tid)
{
	char path[64];
	unsigned long long ns = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/%d/task/%u/schedstat", pid, tid);
	f = fopen(path, "re");
	if (!f)
		return 0;
	if (fscanf(f, "%llu", &ns) != 1)
		ns = 0;
	fclose(f);
	return ns;
}

/* What a running thread has run since its last charge: by its own clock as
 * the BPF side charges it, so that a later charge never takes back what a
 * view showed; by the wall clock where its clock's start is not known. */
static uint64_t running_since(pid_t pid, uint32_t tid, const struct tally_bpf_thread *t,
			      uint64_t now_ns)
{
	uint64_t rt;

	if (!(t->flags & TALLY_BPF_RT_KNOWN))
		return now_ns > t->last_ns ? now_ns - t->last_ns : 0;
	rt = thread_clock(pid, tid);
	return rt > t->rt_mark + t->ahead ? rt - t->rt_mark - t->ahead : 0;
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
		    t.group >= TALLY_MAX_GROUPS)
			continue;
		cpu[t.group] += running_since(pid, key, &t, now_ns);
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
	/* the target's exit has been taken from the ring: its probes go */
	uprobe_multi_close(l->ufds, l->nufds);
	l->nufds = 0;
	links_drop_to(l->links, &l->nlinks, 0);
	timing_mark("close: tally.bpf.o's links");
	ring_buffer__free(l->rb);
	heap_rings_free(l->rings);
	tally_bpf__destroy(l->skel);
	free(l);
	timing_mark("close: tally.bpf.o");
}
