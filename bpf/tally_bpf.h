/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Map values of bpf/tally.bpf.c that its loader (user/probes/loader.c) reads or
 * seeds. Events themselves are in tally_events.h.
 */
#ifndef TALLY_BPF_H
#define TALLY_BPF_H

#define TALLY_BPF_MAX_THREADS 16384

/* One thread of the traced tree, key: its tid. CPU is charged by the
 * thread's own clock (the kernel's sum_exec_runtime, as schedstat and
 * utime+stime say), which leaves out the irq and softirq time the wall clock
 * of its switches holds where the kernel accounts it apart
 * (CONFIG_IRQ_TIME_ACCOUNTING): nginx workers under loopback load were
 * charged 8-9 % more than schedstat. A group change within a time slice
 * splits it by the wall clock (the thread's clock is only current at a
 * switch), and the slice's end evens the thread's total out. */
struct tally_bpf_thread {
	__u64 last_ns; /* start of the interval not yet charged (CLOCK_MONOTONIC) */
	__u32 group;   /* group charged for CPU now */
	__u32 running; /* on a CPU since last_ns */
	__u32 pid;     /* its process */
	__u32 flags;   /* TALLY_BPF_RT_KNOWN: rt_mark holds its clock */
	__u64 rt_mark; /* its sum_exec_runtime when last charged */
	__u64 ahead;   /* charged by the wall clock at group changes since */
};
#define TALLY_BPF_RT_KNOWN 1u

/* Processes of the traced tree at once (map `procs`): past it, a new process
 * is not followed and counted (struct tally_lost: procs). */
#define TALLY_BPF_MAX_PROCS 8192

/* CPU nanoseconds (map `proc_cpu`), key: a process and a group. */
struct tally_bpf_cpu_key {
	__u32 pid;
	__u32 group;
};
#define TALLY_BPF_MAX_CPU_KEYS 32768

/* Where a heap's fields lie in struct heap (alloc/heap.h), as the tracer's
 * own build has them (remote_heap_layout, user/os/remote.c): the OOM
 * program (tally_oom.bpf.h) walks the victim's heaps with it. */
struct tally_bpf_heap_layout {
	__u32 next;		     /* all_next: the list of every heap */
	__u32 id;		     /* id */
	__u32 tid;		     /* tid */
	__u32 seq;		     /* seq: records handed over so far */
	__u32 batch;		     /* batch: the struct tally_batch it fills */
	__u32 handing;		     /* handing: who hands the batch over (a byte), */
	__u32 hand_free, hand_owner; /* ... nobody, or its owner */
};

#endif /* TALLY_BPF_H */
