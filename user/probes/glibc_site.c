// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where glibc mode's probe on a function goes (glibc_site.h): a decoder for
 * the few x86-64 instructions a compiler puts at the start of a malloc
 * entry, and the walk over them. The emulated set is the kernel's
 * (arch/x86/kernel/uprobes.c: push_setup_xol_ops, branch_setup_xol_ops);
 * the instructions walked over are those that write neither memory nor the
 * stack pointer nor an argument's register. Everything else stops the walk.
 */
#include <stdbool.h>
#include <string.h>

#include "glibc_site.h"

/* Register numbers as ModRM and REX give them. */
#define REG_RCX 1
#define REG_RDX 2
#define REG_RSP 4
#define REG_RSI 6
#define REG_RDI 7
#define REG_R8 8
#define REG_R9 9

#define REX_R 0x4
#define REX_B 0x1
#define MODRM_RIP 0x05 /* mod 00, rm 101: disp32 from the next instruction (x86-64) */

/* Sequences known whole: the kernel's nops (x86_nops[], compared byte for
 * byte, emulated as a jump to the next instruction; the 5-byte one is also
 * the one 6.18 can turn into a call, cheaper still) and endbr64, which
 * does nothing outside a CET-enforced process and nothing a probe reads in
 * one. The kernel steps every other nop, so those stop the walk. */
static const struct glibc_known {
	uint8_t len;
	uint8_t kind; /* enum glibc_insn_kind */
	uint8_t bytes[8];
} glibc_known[] = {
	{ 4, GLIBC_INSN_PASS, { 0xf3, 0x0f, 0x1e, 0xfa } }, /* endbr64 */
	{ 1, GLIBC_INSN_EMULATED, { 0x90 } },
	{ 2, GLIBC_INSN_EMULATED, { 0x66, 0x90 } },
	{ 3, GLIBC_INSN_EMULATED, { 0x0f, 0x1f, 0x00 } },
	{ 4, GLIBC_INSN_EMULATED, { 0x0f, 0x1f, 0x40, 0x00 } },
	{ 5, GLIBC_INSN_EMULATED, { 0x0f, 0x1f, 0x44, 0x00, 0x00 } },
	{ 6, GLIBC_INSN_EMULATED, { 0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00 } },
	{ 7, GLIBC_INSN_EMULATED, { 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00 } },
	{ 8, GLIBC_INSN_EMULATED, { 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00 } },
};

/* A register a call's arguments may be in (SysV: rdi, rsi, rdx, rcx, r8,
 * r9), or the stack pointer. */
static bool glibc_reg_is_read(unsigned reg)
{
	return reg == REG_RDI || reg == REG_RSI || reg == REG_RDX || reg == REG_RCX ||
	       reg == REG_R8 || reg == REG_R9 || reg == REG_RSP;
}

/* An instruction without REX or with one (rex: 0 or 0x40..0x4f) whose
 * opcode is op (at p[0], q bytes from there readable), that only compares
 * or moves between registers: its length from the opcode on, or 0 when it
 * is not one of those. */
static size_t glibc_pass_len(uint8_t rex, const uint8_t *p, size_t q)
{
	uint8_t op = p[0], modrm, mod, reg, rm;

	if (q < 2)
		return 0;
	modrm = p[1];
	mod = modrm >> 6;
	reg = (uint8_t)(((modrm >> 3) & 7) | (rex & REX_R ? 8 : 0));
	rm = (uint8_t)((modrm & 7) | (rex & REX_B ? 8 : 0));
	switch (op) {
	case 0x84: /* test r8, r8 */
	case 0x85: /* test r, r */
	case 0x38: /* cmp r8, r8 (both directions) */
	case 0x39:
	case 0x3a:
	case 0x3b:
		return mod == 3 ? 2 : 0;
	case 0x89: /* mov r, r: writes rm */
		return mod == 3 && !glibc_reg_is_read(rm) ? 2 : 0;
	case 0x8b: /* mov r, r: writes reg */
		return mod == 3 && !glibc_reg_is_read(reg) ? 2 : 0;
	case 0x80: /* cmp $imm8 with r/m8 */
	case 0x83: /* cmp $imm8 with r/m */
	case 0x81: /* cmp $imm32 with r/m */
		if (((modrm >> 3) & 7) != 7)
			return 0; /* /7 is cmp; the others write */
		if (mod == 3)
			return op == 0x81 ? 6 : 3;
		if ((modrm & 0xc7) == MODRM_RIP) /* a global, by its address */
			return op == 0x81 ? 10 : 7;
		return 0;
	}
	return 0;
}

/* Emulated with their opcode at p[0] (q bytes readable), after rex (0 or a
 * REX byte): push of a register (REX 0x41 the only prefix the kernel
 * takes), jmp, call and jcc, relative, without any prefix. Their length
 * from the opcode on, or 0. */
static size_t glibc_emulated_len(uint8_t rex, const uint8_t *p, size_t q)
{
	uint8_t op = p[0];

	if (op >= 0x50 && op <= 0x57)
		return rex == 0 || rex == 0x41 ? 1 : 0;
	if (rex)
		return 0;
	if ((op >= 0x70 && op <= 0x7f) || op == 0xeb)
		return 2;
	if (op == 0xe8 || op == 0xe9)
		return 5;
	if (op == 0x0f && q >= 2 && p[1] >= 0x80 && p[1] <= 0x8f)
		return 6;
	return 0;
}

enum glibc_insn_kind glibc_insn_decode(const uint8_t *code, size_t n, size_t *len)
{
	size_t pre, l;
	uint8_t rex;

	*len = 0;
	for (size_t k = 0; k < sizeof(glibc_known) / sizeof(glibc_known[0]); k++) {
		const struct glibc_known *w = &glibc_known[k];

		if (n >= w->len && !memcmp(code, w->bytes, w->len)) {
			*len = w->len;
			return (enum glibc_insn_kind)w->kind;
		}
	}
	if (!n)
		return GLIBC_INSN_STOP;
	rex = (code[0] & 0xf0) == 0x40 ? code[0] : 0;
	pre = rex ? 1 : 0;
	if (n <= pre)
		return GLIBC_INSN_STOP;
	l = glibc_emulated_len(rex, code + pre, n - pre);
	if (l && pre + l <= n) {
		*len = pre + l;
		return GLIBC_INSN_EMULATED;
	}
	l = glibc_pass_len(rex, code + pre, n - pre);
	if (l && pre + l <= n) {
		*len = pre + l;
		return GLIBC_INSN_PASS;
	}
	return GLIBC_INSN_STOP;
}

size_t glibc_site_offset(const uint8_t *code, size_t n)
{
	size_t off = 0, len;

	if (n > GLIBC_SITE_MAX_BYTES)
		n = GLIBC_SITE_MAX_BYTES;
	/* a PASS instruction falls through to the next: the walk stays in
	 * the function and on the one path every call takes */
	while (off < n) {
		enum glibc_insn_kind k = glibc_insn_decode(code + off, n - off, &len);

		if (k == GLIBC_INSN_EMULATED)
			return off;
		if (k != GLIBC_INSN_PASS)
			break;
		off += len;
	}
	return 0;
}
