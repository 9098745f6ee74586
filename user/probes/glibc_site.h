/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * Where glibc mode's probe on a function goes (user/probes/glibc.c): pure code
 * over the function's first bytes, unit-tested by tests/test_glibc_site.c.
 *
 * A uprobe on an instruction the kernel cannot emulate is single-stepped out
 * of line: a second trap on every hit (about 20 us a call on the project's
 * VMs, against 5 to 9 for an emulated one). x86-64's uprobes emulate push of
 * a register, the relative jumps and calls, the conditional jumps and the
 * kernel's own nops; glibc's malloc family often starts with something else
 * (free: `test %rdi,%rdi`; memalign: a `cmpb` on a global; a CET build: an
 * `endbr64` before everything). So the probe goes on the first emulated
 * instruction, reached only over instructions that change nothing a probe
 * reads: not the stack pointer (the nesting test, and a uretprobe's return
 * address at its top), not a register that carries an argument, not
 * memory, and never a branch (a branch could skip the probe). Anything the
 * decoder does not know stops the walk, and the probe stays on the entry.
 */
#ifndef TALLY_GLIBC_SITE_H
#define TALLY_GLIBC_SITE_H

#include <stddef.h>
#include <stdint.h>

/* Bytes of a function worth reading: the walk never goes further. */
#define GLIBC_SITE_MAX_BYTES 32

/* What an instruction is to the walk. */
enum glibc_insn_kind {
	GLIBC_INSN_STOP = 0, /* unknown, a branch the kernel steps, or one that changes what a
			      * probe reads: the walk ends before it */
	GLIBC_INSN_PASS,     /* changes only the flags or a register no argument is in */
	GLIBC_INSN_EMULATED, /* one the kernel emulates: a probe here costs one trap */
};

/* The instruction at code[0] (n bytes readable): its kind, and its length in
 * *len (0 for GLIBC_INSN_STOP). x86-64 only. */
enum glibc_insn_kind glibc_insn_decode(const uint8_t *code, size_t n, size_t *len);

/* The offset from the function's first byte of the first emulated
 * instruction that only GLIBC_INSN_PASS ones precede, when there is one in
 * the first n bytes (code: the function's first bytes, as in its file);
 * 0 (the entry) otherwise. A probe there sees the registers, the stack
 * pointer and the stack the entry had: what bpf/glibc.bpf.c reads. */
size_t glibc_site_offset(const uint8_t *code, size_t n);

#endif /* TALLY_GLIBC_SITE_H */
