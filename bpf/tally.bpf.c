// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * tally's kernel side for one traced tree of processes (docs/DESIGN.md §3, §5):
 * the root, and with `follow` every process it starts, in the map `procs`
 * (the probes sit on the libraries' files, for every process that maps
 * them, and keep what comes from the map's processes):
 * - tally:batch, the allocator's hand-over of a batch of records: copied
 *   whole into the ring buffer;
 * - the SDK's probes (group register/enter/exit, yield, reject): passed on,
 *   and a group change splits the thread's CPU time at that instant;
 * - scheduler switches of the tree's threads: each on-CPU interval, by the
 *   thread's own clock (tally_bpf.h), is charged to the process and the
 *   group current on the thread, so CPU is
 *   exclusive per group and costs the program nothing extra per enter/exit;
 * - thread and process creation (a new process joins the map before it
 *   runs), exit, rename and exec;
 * - tally:stats, the allocator's own figures handed over at exit;
 * - the OOM killer's choice of one of them (tally_oom.bpf.h).
 * Every message is submitted without a wakeup: the consumer polls on a short
 * timer (a wakeup costs about 4 us a message here, docs/DESIGN.md §5).
 */
#include "vmlinux.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_core_read.h>
#include <bpf/usdt.bpf.h>

#include "contract/tally_events.h"
#include "tally_bpf.h"
#include "tally_maps.bpf.h"
#include "common.bpf.h"
#include "tally_procs.bpf.h"

char LICENSE[] SEC("license") = "Dual BSD/GPL";

/* include/linux/sched.h: getting shut down (vmlinux.h has no macros) */
#define PF_EXITING 0x00000004

/* CPU nanoseconds per process and group, all threads together. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_CPU_KEYS);
	__type(key, struct tally_bpf_cpu_key);
	__type(value, __u64);
} proc_cpu SEC(".maps");

/* Set by the loader when the sched programs are attached: intervals of
 * threads first seen switching out start here. */
__u64 attach_ns = 0;

/* ... or, for a process added later to a loader whose sched_switch program
 * charges many sessions' CPU (serve --all, loader_cpu_follow), at its own
 * addition: key tgid, value CLOCK_MONOTONIC ns. */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u64);
} added_ns SEC(".maps");

/* Follow the processes the tree starts (-- CMD, or -p PID -f). */
const volatile bool follow = false;

enum lost_what { LOST_MSG, LOST_BAD, LOST_PROC, LOST_CPU };

static __always_inline void count_lost(__u64 words, enum lost_what what)
{
	__u32 zero = 0;
	struct tally_lost *l = bpf_map_lookup_elem(&lost, &zero);

	if (!l)
		return;
	switch (what) {
	case LOST_BAD:
		l->bad++;
		break;
	case LOST_PROC:
		l->procs++;
		break;
	case LOST_CPU:
		l->cpu++;
		break;
	default:
		l->msgs++;
		l->words += words;
	}
}

#include "tally_oom.bpf.h"

SEC("usdt")
int BPF_USDT(tally_batch, void *batch, long bytes)
{
	__u64 hdr = offsetof(struct tally_batch, words);
	struct tally_msg_batch *m;
	__u32 n;

	if (!in_tree())
		return 0;
	if (bytes < (long)hdr || bytes > (long)sizeof(struct tally_batch)) {
		count_lost(0, LOST_BAD);
		return 0;
	}
	/* a fixed size, so that the verifier knows the copy fits */
	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		count_lost(((__u64)bytes - hdr) / sizeof(__u64), LOST_MSG);
		return 0;
	}
	fill_hdr_current(&m->hdr, TALLY_MSG_BATCH, bpf_ktime_get_ns());
	n = (__u32)bytes;
	m->bytes = n;
	m->pad = 0;
	if (n > sizeof(struct tally_batch) || bpf_probe_read_user(&m->batch, n, batch)) {
		bpf_ringbuf_discard(m, BPF_RB_NO_WAKEUP);
		count_lost(0, LOST_BAD);
		return 0;
	}
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	return 0;
}

static __always_inline void cpu_add(struct tally_bpf_thread *t, __u64 ns)
{
	struct tally_bpf_cpu_key k = { .pid = t->pid, .group = t->group };
	__u64 zero = 0, *c;

	if (!ns || t->group >= TALLY_MAX_GROUPS)
		return;
	c = map_lookup_or_init(&proc_cpu, &k, &zero);
	if (c)
		__sync_fetch_and_add(c, ns);
	else
		count_lost(0, LOST_CPU);
}

/* A group change (or an exec) on the running thread: the wall clock since
 * `t->last_ns` to the group it leaves, as its own clock is only current at a
 * switch; the slice's end takes it off what that clock says (`ahead`). */
static __always_inline void charge_piece(struct tally_bpf_thread *t, __u64 now)
{
	if (t->running && now > t->last_ns) {
		cpu_add(t, now - t->last_ns);
		if (t->flags & TALLY_BPF_RT_KNOWN)
			t->ahead += now - t->last_ns;
	}
	t->last_ns = now;
}

/* The thread's clock says `rt` (task->se.sum_exec_runtime, current at a
 * switch): what it ran since the last charge goes to its group, less what
 * group changes charged ahead. A switch missed (a BPF program's recursion
 * guard) loses nothing: the next one charges the thread's whole run since. */
static __always_inline void charge_rt(struct tally_bpf_thread *t, __u64 rt, __u64 now)
{
	if (!(t->flags & TALLY_BPF_RT_KNOWN)) {
		/* running since before the attach, or first seen in a probe:
		 * where its clock stood then is not known, the wall clock is */
		if (t->running && now > t->last_ns)
			cpu_add(t, now - t->last_ns);
	} else if (rt > t->rt_mark) {
		__u64 d = rt - t->rt_mark;
		if (d > t->ahead) {
			cpu_add(t, d - t->ahead);
			t->ahead = 0;
		} else {
			t->ahead -= d;
		}
	}
	t->rt_mark = rt;
	t->flags |= TALLY_BPF_RT_KNOWN;
	t->last_ns = now;
}

/* A thread of the tree we have no entry for yet: it runs now (it is in a
 * probe), in the group the probe says it was in. */
static __always_inline struct tally_bpf_thread *thread_get(__u32 tid, __u32 pid, __u32 group,
							   __u64 now)
{
	struct tally_bpf_thread fresh = {
		.last_ns = now, .group = group, .running = 1, .pid = pid
	};

	return map_lookup_or_init(&threads, &tid, &fresh);
}

static __always_inline int group_msg(__u16 kind, __u32 group, __u32 other, const char *name)
{
	__u64 now = bpf_ktime_get_ns();
	__u64 id = bpf_get_current_pid_tgid();
	__u32 tid = (__u32)id;
	struct tally_msg_group *m;

	if (kind == TALLY_MSG_GROUP_ENTER || kind == TALLY_MSG_GROUP_EXIT) {
		/* enter: other is the group left; exit: other is the group left too */
		struct tally_bpf_thread *t = thread_get(tid, (__u32)(id >> 32), other, now);
		if (t) {
			charge_piece(t, now);
			t->running = 1;
			t->group = group;
		}
	}
	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		count_lost(0, LOST_MSG);
		return 0;
	}
	fill_hdr(&m->hdr, kind, tid, (__u32)(id >> 32), now);
	m->group = group;
	m->other = other;
	m->name[0] = 0;
	if (name)
		bpf_probe_read_user_str(m->name, sizeof(m->name), name);
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("usdt")
int BPF_USDT(tally_group_register, unsigned int id, const char *name)
{
	if (!in_tree())
		return 0;
	return group_msg(TALLY_MSG_GROUP_REGISTER, id, 0, name);
}

SEC("usdt")
int BPF_USDT(tally_group_enter, unsigned int id, unsigned int prev)
{
	if (!in_tree())
		return 0;
	return group_msg(TALLY_MSG_GROUP_ENTER, id, prev, NULL);
}

SEC("usdt")
int BPF_USDT(tally_group_exit, unsigned int restored, unsigned int left)
{
	if (!in_tree())
		return 0;
	return group_msg(TALLY_MSG_GROUP_EXIT, restored, left, NULL);
}

SEC("usdt")
int BPF_USDT(tally_yield, unsigned int group)
{
	if (!in_tree())
		return 0;
	return group_msg(TALLY_MSG_YIELD, group, 0, NULL);
}

SEC("usdt")
int BPF_USDT(tally_reject, unsigned int group)
{
	if (!in_tree())
		return 0;
	return group_msg(TALLY_MSG_REJECT, group, 0, NULL);
}

SEC("usdt")
int BPF_USDT(tally_stats, const __u64 *stats, __u64 resident, __u64 flags)
{
	struct tally_msg_stats *m;

	if (!in_tree())
		return 0;
	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		count_lost(0, LOST_MSG);
		return 0;
	}
	fill_hdr_current(&m->hdr, TALLY_MSG_STATS, bpf_ktime_get_ns());
	if (bpf_probe_read_user(m->stats, sizeof(m->stats), stats)) {
		bpf_ringbuf_discard(m, BPF_RB_NO_WAKEUP);
		count_lost(0, LOST_BAD);
		return 0;
	}
	m->resident = resident;
	m->hdr.flags = (__u16)flags;
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_switch")
int BPF_PROG(tally_switch, bool preempt, struct task_struct *prev, struct task_struct *next)
{
	__u64 now = bpf_ktime_get_ns();
	__u32 prev_pid = BPF_CORE_READ(prev, tgid), next_pid = BPF_CORE_READ(next, tgid);

	if (tgid_in_tree(prev_pid)) {
		__u32 tid = BPF_CORE_READ(prev, pid);
		/* running since before we looked: from the attach on, in root
		 * unless the loader seeded another group; but a thread past its
		 * exit (its entry went there, its CPU charged) switches out once
		 * more, and must not start again from the attach */
		struct tally_bpf_thread fresh = { .last_ns = attach_ns,
						  .running = 1,
						  .pid = prev_pid };
		struct tally_bpf_thread *t = bpf_map_lookup_elem(&threads, &tid);
		if (!t && !(BPF_CORE_READ(prev, flags) & PF_EXITING)) {
			__u64 *added = bpf_map_lookup_elem(&added_ns, &prev_pid);
			if (added)
				fresh.last_ns = *added;
			t = map_lookup_or_init(&threads, &tid, &fresh);
		}
		if (t) {
			/* put_prev_task has brought prev's clock up to now */
			charge_rt(t, BPF_CORE_READ(prev, se.sum_exec_runtime), now);
			t->running = 0;
		}
	}
	if (tgid_in_tree(next_pid)) {
		__u32 tid = BPF_CORE_READ(next, pid);
		__u64 rt = BPF_CORE_READ(next, se.sum_exec_runtime);
		struct tally_bpf_thread fresh = {
			.last_ns = now, .pid = next_pid, .flags = TALLY_BPF_RT_KNOWN, .rt_mark = rt
		};
		struct tally_bpf_thread *t = map_lookup_or_init(&threads, &tid, &fresh);
		if (t) {
			/* off CPU its clock stood still, unless a switch out
			 * was missed: then that run is charged now */
			if (t->flags & TALLY_BPF_RT_KNOWN)
				charge_rt(t, rt, now);
			t->rt_mark = rt;
			t->flags |= TALLY_BPF_RT_KNOWN;
			t->last_ns = now;
			t->running = 1;
		}
	}
	return 0;
}

/* kind about task; hdr.pid its process, m->pid: `pid` */
/* The task's thread-group id as its own PID namespace numbers it. */
static __always_inline __u32 ns_tgid(struct task_struct *task)
{
	struct pid *p = BPF_CORE_READ(task, group_leader, thread_pid);
	unsigned int level = BPF_CORE_READ(p, level);
	struct upid up = {};

	if (level > 32)
		return 0;
	bpf_probe_read_kernel(&up, sizeof(up), &p->numbers[level]);
	return (__u32)up.nr;
}

static __always_inline void thread_msg(__u16 kind, __u16 flags, struct task_struct *task, __u32 pid,
				       __u32 parent)
{
	struct tally_msg_thread *m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);

	if (!m) {
		count_lost(0, LOST_MSG);
		return;
	}
	fill_hdr(&m->hdr, kind, BPF_CORE_READ(task, pid), BPF_CORE_READ(task, tgid),
		 bpf_ktime_get_ns());
	m->hdr.flags = flags;
	/* a new process: where its own PID namespace numbers it (a container) */
	if (kind == TALLY_MSG_PROC_FORK)
		m->hdr.ns_pid = ns_tgid(task);
	m->pid = pid;
	m->parent_tid = parent;
	BPF_CORE_READ_STR_INTO(&m->comm, task, comm);
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
}

/*
 * A new process of the tree: in the map before it runs its first
 * instruction (this runs in the parent, before the child is woken), so that
 * every probe it passes counts. Its first thread starts in the group of the
 * thread that forked it, as the SDK's copy in its memory says.
 */
static __always_inline void proc_forked(struct task_struct *parent, struct task_struct *child,
					__u32 ppid)
{
	__u32 pid = BPF_CORE_READ(child, tgid), tid = BPF_CORE_READ(child, pid);
	__u32 ptid = BPF_CORE_READ(parent, pid);
	struct tally_bpf_thread *pt = bpf_map_lookup_elem(&threads, &ptid);
	/* its clock starts at 0 (__sched_fork) */
	struct tally_bpf_thread fresh = { .group = pt ? pt->group : 0,
					  .pid = pid,
					  .flags = TALLY_BPF_RT_KNOWN };
	bool shared = BPF_CORE_READ(child, mm) == BPF_CORE_READ(parent, mm);

	if (bpf_map_update_elem(&procs, &pid, &ppid, BPF_NOEXIST)) {
		count_lost(0, LOST_PROC);
		return;
	}
	bpf_map_update_elem(&threads, &tid, &fresh, BPF_ANY);
	thread_msg(TALLY_MSG_PROC_FORK, shared ? TALLY_PROC_SHARED_VM : 0, child, ppid, ptid);
}

SEC("tp_btf/sched_process_fork")
int BPF_PROG(tally_fork, struct task_struct *parent, struct task_struct *child)
{
	__u32 ppid = BPF_CORE_READ(parent, tgid);

	if (!tgid_in_tree(ppid))
		return 0;
	if (BPF_CORE_READ(child, tgid) == ppid)
		thread_msg(TALLY_MSG_THREAD_NEW, 0, child, ppid, BPF_CORE_READ(parent, pid));
	else if (follow)
		proc_forked(parent, child, ppid);
	return 0;
}

SEC("tp_btf/sched_process_exit")
int BPF_PROG(tally_exit, struct task_struct *p, bool group_dead)
{
	__u32 tid, pid = BPF_CORE_READ(p, tgid);

	if (!tgid_in_tree(pid))
		return 0;
	tid = BPF_CORE_READ(p, pid);
	/* the exiting thread is on CPU: its last interval ends here, and its
	 * entry goes (a tree of short-lived processes must not fill the map) */
	struct tally_bpf_thread *t = bpf_map_lookup_elem(&threads, &tid);
	if (t) {
		/* its clock as of its last tick (the kernel's own sum for the
		 * process takes it there too, __exit_signal) */
		charge_rt(t, BPF_CORE_READ(p, se.sum_exec_runtime), bpf_ktime_get_ns());
		t->running = 0;
		bpf_map_delete_elem(&threads, &tid);
	}
	/* an OOM victim chosen from another process: its heaps, read now */
	if (group_dead)
		oom_at_exit(pid);
	/* the last thread carries the process's wait status (exit code << 8, or
	 * the signal), which an attached tally cannot wait for */
	thread_msg(TALLY_MSG_THREAD_EXIT, group_dead ? TALLY_THREAD_GROUP_DEAD : 0, p, pid,
		   group_dead ? (__u32)BPF_CORE_READ(p, exit_code) : 0);
	if (group_dead) {
		bpf_map_delete_elem(&procs, &pid);
		bpf_map_delete_elem(&oom_heaps, &pid);
		bpf_map_delete_elem(&added_ns, &pid);
	}
	return 0;
}

SEC("tp_btf/task_rename")
int BPF_PROG(tally_rename, struct task_struct *task, const char *comm)
{
	struct tally_msg_thread *m;
	__u32 pid = BPF_CORE_READ(task, tgid);

	if (!tgid_in_tree(pid))
		return 0;
	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		count_lost(0, LOST_MSG);
		return 0;
	}
	fill_hdr(&m->hdr, TALLY_MSG_THREAD_NAME, BPF_CORE_READ(task, pid), pid, bpf_ktime_get_ns());
	m->pid = pid;
	m->parent_tid = 0;
	bpf_probe_read_kernel_str(m->comm, sizeof(m->comm), comm);
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	return 0;
}

SEC("tp_btf/sched_process_exec")
int BPF_PROG(tally_exec, struct task_struct *p, pid_t old_pid, struct linux_binprm *bprm)
{
	__u32 pid = BPF_CORE_READ(p, tgid), tid = BPF_CORE_READ(p, pid);
	struct tally_bpf_thread *t;

	if (!tgid_in_tree(pid))
		return 0;
	/* its heaps are the new image's, found anew by the session */
	bpf_map_delete_elem(&oom_heaps, &pid);
	/* a new image starts in root: its SDK has no groups yet */
	t = bpf_map_lookup_elem(&threads, &tid);
	if (t) {
		charge_piece(t, bpf_ktime_get_ns());
		t->group = 0;
	}
	thread_msg(TALLY_MSG_THREAD_NAME, TALLY_THREAD_EXEC, p, pid, 0);
	return 0;
}
