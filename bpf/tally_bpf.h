/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Map values of bpf/tally.bpf.c that its loader (user/core/loader.c) reads or
 * seeds. Events themselves are in tally_events.h.
 */
#ifndef TALLY_BPF_H
#define TALLY_BPF_H

#define TALLY_BPF_MAX_THREADS 16384

/* One thread of the traced tree, key: its tid. */
struct tally_bpf_thread {
	__u64 last_ns; /* start of the interval not yet charged (CLOCK_MONOTONIC) */
	__u32 group;   /* group charged for CPU now */
	__u32 running; /* on a CPU since last_ns */
	__u32 pid;     /* its process */
	__u32 pad;
};

/* Processes of the traced tree at once (map `procs`): past it, a new process
 * is not followed and counted (struct tally_lost: procs). */
#define TALLY_BPF_MAX_PROCS 8192

/* CPU nanoseconds (map `proc_cpu`), key: a process and a group. */
struct tally_bpf_cpu_key {
	__u32 pid;
	__u32 group;
};
#define TALLY_BPF_MAX_CPU_KEYS 32768

#endif /* TALLY_BPF_H */
