/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * bpf/cuda.bpf.c's probe on the dynamic loader (included there, after the
 * maps and helpers it uses: driver_ready, scratch, events, in_tree): finds
 * a CUDA driver in the objects the loader has just mapped and holds the
 * loading thread until the tracer has attached that process's driver probes.
 */
#ifndef TALLY_DRIVER_LOADER_BPF_H
#define TALLY_DRIVER_LOADER_BPF_H

/*
 * The dynamic loader's debugger hook, _dl_debug_state(): called with
 * _r_debug.r_state RT_CONSISTENT once a set of objects is mapped (at start
 * and at each dlopen), before they are relocated and their constructors
 * run. The cookie is _r_debug's distance from the hook in the loader's file.
 * Sleepable: the hold spins preemptibly (a sleepable program runs without
 * rcu_read_lock), and reads the loader's list with faults allowed.
 */
#define RT_CONSISTENT 0
#define RT_DELETE 2
#define LOADER_MAX_OBJECTS 4096
#define LOADER_NAME_MAX 256
#define HOLD_NS 2000000000ULL /* the most a thread waits for the tracer */

struct rtld_debug { /* glibc's struct r_debug */
	__s32 r_version;
	__u64 r_map;
	__u64 r_brk;
	__s32 r_state;
	__u64 r_ldbase;
};
struct rtld_map { /* the start of glibc's struct link_map */
	__u64 l_addr, l_name, l_ld, l_next, l_prev;
};

struct walk {
	__u64 lm;   /* the next link_map */
	__u64 last; /* the last one read */
	__u64 base; /* the driver's l_addr, once found */
	bool found;
};

/* Where the last walk of a process's list ended (key: tgid). The loader
 * only appends to the list between two dlcloses (RT_DELETE forgets this),
 * so the next walk starts past the objects already looked at: a program
 * that loads n libraries costs n steps, not n * n / 2. `mm` and `head` tell
 * an exec'd image, whose list is another. */
struct walked {
	__u64 mm, head, tail;
};
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, struct walked);
} walked SEC(".maps");

struct name_scan {
	const char *name;
	long len;
	long start; /* after the last '/' */
};

static long name_step(__u64 i, void *ctx)
{
	struct name_scan *n = ctx;

	if ((long)i >= n->len)
		return 1;
	if (n->name[i & (LOADER_NAME_MAX - 1)] == '/')
		n->start = (long)i + 1;
	return 0;
}

/* The object's file name starts with "libcuda.so" (libcuda.so, .so.1,
 * .so.570.86.15; a path's last component). */
static __always_inline bool is_driver(const char *name, long len)
{
	static const char want[] = "libcuda.so";
	struct name_scan n = { .name = name, .len = len };

	bpf_loop(LOADER_NAME_MAX, name_step, &n, 0);
	if (n.start > LOADER_NAME_MAX - (long)sizeof(want))
		return false;
	for (int i = 0; i < (int)sizeof(want) - 1; i++)
		if (name[(n.start + i) & (LOADER_NAME_MAX - 1)] != want[i])
			return false;
	return true;
}

static long walk_step(__u64 i, void *ctx)
{
	struct walk *w = ctx;
	struct rtld_map lm;
	__u32 zero = 0;
	char *buf = bpf_map_lookup_elem(&scratch, &zero);
	long n;

	if (!w->lm || !buf || bpf_copy_from_user(&lm, sizeof(lm), (void *)w->lm))
		return 1;
	w->last = w->lm;
	w->lm = lm.l_next;
	n = lm.l_name ? bpf_probe_read_user_str(buf, LOADER_NAME_MAX, (void *)lm.l_name) : 0;
	if (n > 0 && is_driver(buf, n)) {
		w->base = lm.l_addr;
		w->found = true;
		return 1;
	}
	return 0;
}

struct hold {
	__u32 tgid;
	bool ready;
	__u64 deadline;
};

static long hold_step(__u64 i, void *ctx)
{
	struct hold *h = ctx;

	if (bpf_map_lookup_elem(&driver_ready, &h->tgid)) {
		h->ready = true;
		return 1;
	}
	return bpf_ktime_get_ns() > h->deadline;
}

static long hold_round(__u64 i, void *ctx)
{
	struct hold *h = ctx;

	bpf_loop(1 << 20, hold_step, h, 0);
	return h->ready || bpf_ktime_get_ns() > h->deadline;
}

static __always_inline void driver_msg(__u16 kind, __u16 flags, __u64 base, __u64 waited)
{
	struct tally_msg_driver *m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);

	if (!m) {
		count_lost_msg();
		return;
	}
	fill_hdr_current(&m->hdr, kind, bpf_ktime_get_ns());
	m->hdr.flags = flags;
	m->base = base;
	m->waited_ns = waited;
	bpf_ringbuf_submit(m, 0); /* woken at once: a thread waits on it */
}

SEC("uprobe.s")
int BPF_KPROBE(cuda_loader)
{
	__u32 tgid = (__u32)(bpf_get_current_pid_tgid() >> 32);
	struct rtld_debug rd;
	struct walk w = {};
	struct hold h = { .tgid = tgid };
	__u64 start, waited;
	struct walked *prev, now = { .mm = (__u64)bpf_get_current_task_btf()->mm };
	struct rtld_map tail;

	if (!in_tree() || bpf_map_lookup_elem(&driver_ready, &tgid))
		return 0;
	if (bpf_copy_from_user(&rd, sizeof(rd),
			       (void *)(PT_REGS_IP(ctx) + bpf_get_attach_cookie(ctx))))
		return 0;
	if (rd.r_state == RT_DELETE)
		bpf_map_delete_elem(&walked, &tgid);
	if (rd.r_state != RT_CONSISTENT)
		return 0;
	now.head = rd.r_map;
	w.lm = rd.r_map;
	prev = bpf_map_lookup_elem(&walked, &tgid);
	if (prev && prev->mm == now.mm && prev->head == now.head && prev->tail &&
	    !bpf_copy_from_user(&tail, sizeof(tail), (void *)prev->tail)) {
		w.lm = tail.l_next;
		w.last = prev->tail;
	}
	bpf_loop(LOADER_MAX_OBJECTS, walk_step, &w, 0);
	now.tail = w.last;
	bpf_map_update_elem(&walked, &tgid, &now, BPF_ANY);
	if (!w.found)
		return 0;
	start = bpf_ktime_get_ns();
	h.deadline = start + HOLD_NS;
	driver_msg(TALLY_MSG_DRIVER_LOAD, 0, w.base, 0);
	/* rounds enough for HOLD_NS at any speed: 64 rounds of 2^20 steps
	 * (a map lookup and a clock read each) ran out in 1.77-1.86 s here,
	 * before the deadline; the deadline, not the count, ends the hold */
	bpf_loop(1024, hold_round, &h, 0);
	waited = bpf_ktime_get_ns() - start;
	driver_msg(TALLY_MSG_DRIVER_HELD, h.ready ? 0 : TALLY_DRIVER_TIMED_OUT, w.base, waited);
	return 0;
}

#endif /* TALLY_DRIVER_LOADER_BPF_H */
