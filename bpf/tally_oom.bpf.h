/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * The OOM killer's victim (docs/DESIGN.md §8), a part of tally.bpf.c kept
 * apart: tp_btf/mark_victim fires after the kernel has chosen a process and
 * sent it SIGKILL, before it dies. For a process of the tree:
 * - the records its heaps hold and have not handed over, read from its
 *   memory when the thread that runs the killer shares it (a memory
 *   cgroup's OOM runs in the task that charged, most often the victim
 *   itself), else as its last thread exits (oom_at_exit), sent as
 *   TALLY_MSG_BATCH messages: a SIGKILL leaves no exit hand-over, and
 *   those records would be lost;
 * - then TALLY_MSG_OOM: its memory cgroup, the limit the OOM is for (the
 *   nearest counter at its limit on the cgroup's path), the tracepoint's
 *   figures.
 * The heap list's address comes from the session (map oom_heaps, filled once
 * it has found tally_heaps in the process), its layout from the loader
 * (oom_layout: the tracer's own build of alloc/heap.h, as user/os/remote.c
 * reads it).
 */
#ifndef TALLY_OOM_BPF_H
#define TALLY_OOM_BPF_H

/* key: tgid, value: the address of tally_heaps in it */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, TALLY_BPF_MAX_PROCS);
	__type(key, __u32);
	__type(value, __u64);
} oom_heaps SEC(".maps");

const volatile struct tally_bpf_heap_layout oom_layout = {};
const volatile __u32 oom_page_size = 4096;

/* Heaps read at the kill: a thread's heap each, orphans included. Past it the
 * rest are not read, and the figures say so (TALLY_OOM_HEAPS_ALL unset). */
#define OOM_MAX_HEAPS 256
/* The memory cgroups walked up from the victim's for the one at its limit. */
#define OOM_MAX_DEPTH 16

struct oom_walk {
	__u32 pid;
	__u64 at; /* the next heap (0: the end of the list) */
	__u32 sent;
	bool torn; /* a read failed, or a heap moved during its copy */
};

static __always_inline int oom_heap_pos(__u64 at, __u64 *seq, __u32 *count)
{
	if (bpf_probe_read_user(seq, sizeof(*seq), (void *)(at + oom_layout.seq)))
		return -1;
	return bpf_probe_read_user(
		count, sizeof(*count),
		(void *)(at + oom_layout.batch + offsetof(struct tally_batch, count)));
}

/* One heap's held records as one batch message, sealed as its owner would
 * have at a hand-over; the copy is whole when no flush came during it (seq
 * the same) and the batch only grew, as user/os/remote.c checks its own. */
static __always_inline int oom_send_heap(struct oom_walk *w, __u64 at)
{
	struct tally_msg_batch *m;
	__u64 seq, seq2, id, n;
	__u32 count, count2, tid;
	__u8 handing;

	if (oom_heap_pos(at, &seq, &count) ||
	    bpf_probe_read_user(&id, sizeof(id), (void *)(at + oom_layout.id)) ||
	    bpf_probe_read_user(&tid, sizeof(tid), (void *)(at + oom_layout.tid)) ||
	    bpf_probe_read_user(&handing, sizeof(handing), (void *)(at + oom_layout.handing)))
		return -1;
	/* A hand-over under way: seq and count are not of one moment (a thread
	 * killed between its two stores stays so), and the batch may be out
	 * already; not read. But for this thread's own heap: it is in the
	 * kernel inside the hand-over only before seq moves (a fault of
	 * ring_put's copy into a fresh page of its shared ring, before the
	 * slot is marked full; the probe's trap), so that its batch is whole,
	 * and if it reached tally already, its records are numbered the same
	 * and counted once. */
	if (handing != oom_layout.hand_free &&
	    (handing != oom_layout.hand_owner || tid != (__u32)bpf_get_current_pid_tgid()))
		return -1;
	if (!count)
		return 0;
	if (count > TALLY_BATCH_WORDS)
		return -1;
	m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);
	if (!m) {
		count_lost(count, LOST_MSG);
		return -1;
	}
	n = (__u64)count * sizeof(__u64);
	/* one register for the check and the copy, so the verifier sees it bounded */
	barrier_var(n);
	if (n > sizeof(m->batch.words) ||
	    bpf_probe_read_user(
		    m->batch.words, n,
		    (void *)(at + oom_layout.batch + offsetof(struct tally_batch, words))) ||
	    oom_heap_pos(at, &seq2, &count2) || seq2 != seq || count2 < count) {
		bpf_ringbuf_discard(m, BPF_RB_NO_WAKEUP);
		return -1;
	}
	fill_hdr(&m->hdr, TALLY_MSG_BATCH, tid, w->pid, bpf_ktime_get_ns());
	m->batch.count = count;
	m->bytes = (__u32)tally_batch_seal(&m->batch, TALLY_SRC_ALLOC, tid, id, seq);
	m->pad = 0;
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
	w->sent++;
	return 0;
}

static long oom_heap_step(__u32 i, void *ctx)
{
	struct oom_walk *w = ctx;
	__u64 at = w->at;

	if (!at)
		return 1;
	if (oom_send_heap(w, at))
		w->torn = true;
	if (bpf_probe_read_user(&w->at, sizeof(w->at), (void *)(at + oom_layout.next))) {
		w->torn = true;
		return 1;
	}
	return 0;
}

/* Every heap of the victim, from the list's head: the flags it earned. */
static __always_inline __u32 oom_send_heaps(__u32 pid, __u32 *sent)
{
	struct oom_walk w = { .pid = pid };
	__u64 *head = bpf_map_lookup_elem(&oom_heaps, &pid);

	if (!head || bpf_probe_read_user(&w.at, sizeof(w.at), (void *)*head))
		return 0;
	bpf_loop(OOM_MAX_HEAPS, oom_heap_step, &w, 0);
	*sent = w.sent;
	return TALLY_OOM_HEAPS_READ | (!w.torn && !w.at ? TALLY_OOM_HEAPS_ALL : 0);
}

/* A page counter at its limit: a charge of a few pages failed there (the
 * OOM killer runs for charges of 8 pages at most, order 3), and frees since
 * are few; 1 MiB of slack. */
#define OOM_AT_LIMIT_SLACK (1u << 20)

/* Whether counter `pc` of memory cgroup `css` is at its limit: then its
 * limit and usage in m, and true. */
static __always_inline bool oom_at_limit(struct page_counter *pc, struct cgroup_subsys_state *css,
					 struct tally_msg_oom *m)
{
	/* page_counter's "no limit" is PAGE_COUNTER_MAX, LONG_MAX in pages */
	__u64 none = 0x7fffffffffffffffULL / oom_page_size;
	__u64 max = BPF_CORE_READ(pc, max), usage = BPF_CORE_READ(pc, usage.counter);

	if (max >= none || (usage + OOM_AT_LIMIT_SLACK / oom_page_size) < max)
		return false;
	m->limit = max * oom_page_size;
	m->usage = usage * oom_page_size;
	m->limit_cgroup_id = BPF_CORE_READ(css, cgroup, kn, id);
	return true;
}

/* The victim's memory cgroup, and the cgroup whose limit the OOM is for: the
 * nearest on the path up from the victim's whose memory (or, on v1, memory
 * and swap) counter is at its limit, as the kernel's charge fails at the
 * first counter from the charging task's cgroup up, an ancestor of the
 * victim's. None at its limit: the system's OOM killer (limit none). */
static __always_inline void oom_cgroup(struct task_struct *task, struct tally_msg_oom *m)
{
	int id = bpf_core_enum_value(enum cgroup_subsys_id, memory_cgrp_id);
	struct css_set *cs = BPF_CORE_READ(task, cgroups);
	struct cgroup_subsys_state *css = NULL;

	m->limit = TALLY_OOM_NO_LIMIT;
	if (id < 0 || id >= 32)
		return;
	bpf_probe_read_kernel(&css, sizeof(css), &cs->subsys[id]);
	if (!css)
		return;
	m->cgroup_id = BPF_CORE_READ(css, cgroup, kn, id);
	m->v1 = BPF_CORE_READ(css, cgroup, root, hierarchy_id) != 0;
	for (int i = 0; i < OOM_MAX_DEPTH && css; i++) {
		struct mem_cgroup *mc = (void *)css - bpf_core_field_offset(struct mem_cgroup, css);

		if (oom_at_limit(&mc->memory, css, m))
			return;
		/* v1's memsw shares its place with v2's swap, which kills nobody */
		if (m->v1 && oom_at_limit(&mc->memsw, css, m)) {
			m->memsw = 1;
			return;
		}
		css = BPF_CORE_READ(css, parent);
	}
}

static __always_inline __u64 oom_rss_kb(struct mm_struct *mm, int member)
{
	__s64 pages = BPF_CORE_READ(mm, rss_stat[member].count);

	/* get_mm_counter: a per-CPU sum read without folding, never below 0 */
	return pages > 0 ? (__u64)pages * oom_page_size / 1024 : 0;
}

/* What the tracepoint saw, into m (zeroed): all but the flags and heaps. */
static __always_inline void oom_fill(struct tally_msg_oom *m, struct task_struct *task,
				     struct mm_struct *mm, __u32 pid)
{
	fill_hdr(&m->hdr, TALLY_MSG_OOM, BPF_CORE_READ(task, pid), pid, bpf_ktime_get_ns());
	m->uid = BPF_CORE_READ(task, real_cred, uid.val);
	m->oom_score_adj = BPF_CORE_READ(task, signal, oom_score_adj);
	oom_cgroup(task, m);
	if (mm) {
		m->total_vm_kb = BPF_CORE_READ(mm, total_vm) * oom_page_size / 1024;
		m->anon_rss_kb = oom_rss_kb(mm, MM_ANONPAGES);
		m->file_rss_kb = oom_rss_kb(mm, MM_FILEPAGES);
		m->shmem_rss_kb = oom_rss_kb(mm, MM_SHMEMPAGES);
		m->pgtables_kb = (__u64)BPF_CORE_READ(mm, pgtables_bytes.counter) / 1024;
	}
	BPF_CORE_READ_STR_INTO(&m->comm, task, comm);
}

/* The message, from `from` (a stash entry) or filled here (from NULL). */
static __always_inline void oom_submit(const struct tally_msg_oom *from, struct task_struct *task,
				       struct mm_struct *mm, __u32 pid, __u32 flags, __u32 sent)
{
	struct tally_msg_oom *m = bpf_ringbuf_reserve(&events, sizeof(*m), 0);

	if (!m) {
		count_lost(0, LOST_MSG);
		return;
	}
	if (from) {
		__builtin_memcpy(m, from, sizeof(*m));
	} else {
		__builtin_memset(m, 0, sizeof(*m));
		oom_fill(m, task, mm, pid);
	}
	m->hdr.flags = (__u16)flags;
	m->heaps = sent;
	bpf_ringbuf_submit(m, BPF_RB_NO_WAKEUP);
}

/* Victims chosen by a thread of another process (the system's OOM, another
 * member of the cgroup charging), whose memory cannot be read from there:
 * what the tracepoint saw, until their last thread exits (oom_at_exit). */
struct {
	__uint(type, BPF_MAP_TYPE_HASH);
	__uint(max_entries, 256);
	__type(key, __u32);
	__type(value, struct tally_msg_oom);
} oom_stash SEC(".maps");

SEC("tp_btf/mark_victim")
/* (task, uid) since 6.7, (task) before: the uid is read from the task, as
 * the tracepoint takes it (task_uid: the real credentials' uid) */
int BPF_PROG(tally_oom, struct task_struct *task)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	__u32 pid = BPF_CORE_READ(task, tgid), sent = 0, flags;
	struct mm_struct *mm = BPF_CORE_READ(task, mm);
	struct tally_msg_oom zero = {}, *st;

	if (!tgid_in_tree(pid))
		return 0;
	/* bpf_probe_read_user reads the current task's memory: only when it
	 * is the victim's can its heaps be read now */
	if (mm && cur->mm == mm) {
		flags = TALLY_OOM_SHARES_MM | oom_send_heaps(pid, &sent);
		oom_submit(NULL, task, mm, pid, flags, sent);
		return 0;
	}
	/* else at its exit, in its own memory (a full stash: said now, unread) */
	if (!bpf_map_update_elem(&oom_stash, &pid, &zero, BPF_ANY) &&
	    (st = bpf_map_lookup_elem(&oom_stash, &pid))) {
		oom_fill(st, task, mm, pid);
		return 0;
	}
	oom_submit(NULL, task, mm, pid, 0, 0);
	return 0;
}

/* The last thread of a victim chosen from another process exits (called by
 * tally_exit before its THREAD_EXIT, so that its model has the records
 * first): sched_process_exit comes before exit_mm since 6.16, so that its
 * memory is the current one, as it was at the choice (after its SIGKILL
 * none of its code ran). Where the memory is gone already, unread. */
static __always_inline void oom_at_exit(__u32 pid)
{
	struct task_struct *cur = bpf_get_current_task_btf();
	struct tally_msg_oom *st = bpf_map_lookup_elem(&oom_stash, &pid);
	__u32 sent = 0, flags = 0;

	if (!st)
		return;
	if (cur->mm)
		flags = TALLY_OOM_AT_EXIT | oom_send_heaps(pid, &sent);
	oom_submit(st, NULL, NULL, pid, flags, sent);
	bpf_map_delete_elem(&oom_stash, &pid);
}

#endif /* TALLY_OOM_BPF_H */
