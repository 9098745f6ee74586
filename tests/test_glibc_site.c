// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Where glibc mode's probes go (user/probes/glibc_site.c): the decoder of a
 * function's first instructions and the walk to the first one the kernel
 * emulates, on the entries of Debian 12's glibc 2.36 as they are, on the
 * shapes other builds have (CET's endbr64, a move before the first push),
 * and on everything that must keep the probe where it is: a write to an
 * argument's register, the stack pointer or memory, an instruction the
 * decoder does not know, a branch the kernel steps, bytes that end early.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "../user/probes/glibc_site.h"

#define SITE(...)                                                                                  \
	({                                                                                         \
		static const uint8_t code_[] = { __VA_ARGS__ };                                    \
		glibc_site_offset(code_, sizeof(code_));                                           \
	})

/* The kind of the instruction in the bytes given, its length in *len. */
#define DECODE(len, ...)                                                                           \
	({                                                                                         \
		static const uint8_t code_[] = { __VA_ARGS__ };                                    \
		glibc_insn_decode(code_, sizeof(code_), len);                                      \
	})

static void site__glibc_2_36_entries__past_what_the_kernel_steps(void **state)
{
	(void)state;
	/* malloc, calloc, realloc: push %r12 / %r13 / %r15 first, emulated */
	assert_int_equal(SITE(0x41, 0x54, 0x55, 0x53, 0x48, 0x89, 0xfb), 0);
	assert_int_equal(SITE(0x41, 0x55, 0x48, 0x89, 0xf8, 0x41, 0x54), 0);
	assert_int_equal(SITE(0x41, 0x57, 0x41, 0x56, 0x41, 0x55), 0);
	/* free: test %rdi,%rdi; je (free(NULL) takes the je: on it, not past) */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0x00, 0x00, 0x00, 0x55), 3);
	/* memalign: cmpb $0,__malloc_initialized(%rip); je */
	assert_int_equal(SITE(0x80, 0x3d, 0x71, 0x0e, 0x14, 0x00, 0x00, 0x74, 0x07, 0xe9, 0x32,
			      0xf6, 0xff, 0xff),
			 7);
	/* posix_memalign: the cmpb, then push %r12 */
	assert_int_equal(
		SITE(0x80, 0x3d, 0x01, 0x02, 0x14, 0x00, 0x00, 0x41, 0x54, 0x49, 0x89, 0xd4), 7);
	/* valloc, pvalloc: the cmpb, then push %rbx */
	assert_int_equal(SITE(0x80, 0x3d, 0x31, 0x0e, 0x14, 0x00, 0x00, 0x53, 0x48, 0x89, 0xfb), 7);
	/* reallocarray: mov %rsi,%rax; mul %rdx (writes rdx, an argument):
	 * nothing emulated before it, the entry stays */
	assert_int_equal(SITE(0x48, 0x89, 0xf0, 0x48, 0xf7, 0xe2, 0x48, 0x89, 0xc6, 0x70, 0x05), 0);
}

static void site__cet_build__past_endbr64(void **state)
{
	(void)state;
	/* endbr64; push %r12 */
	assert_int_equal(SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x54, 0x55), 4);
	/* endbr64; test %rdi,%rdi; je rel8 */
	assert_int_equal(SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 0x6c), 7);
	/* endbr64; cmpq $0,x(%rip); jne rel32 */
	assert_int_equal(SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x83, 0x3d, 0x10, 0x20, 0x30, 0x00,
			      0x00, 0x0f, 0x85, 0x01, 0x02, 0x00, 0x00),
			 12);
	/* endbr64; nop5 (emulated, and 6.18 may make it a call) */
	assert_int_equal(SITE(0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00), 4);
}

static void site__moves_to_scratch_registers__walked_over(void **state)
{
	(void)state;
	/* mov %rdi,%rbx; push %rbx */
	assert_int_equal(SITE(0x48, 0x89, 0xfb, 0x53), 3);
	/* mov %rdi,%r12 (REX.B); push %rbp */
	assert_int_equal(SITE(0x49, 0x89, 0xfc, 0x55), 3);
	/* mov %rdi,%rbx the other way (8b, REX.W); mov %edx,%eax; push %rbp */
	assert_int_equal(SITE(0x48, 0x8b, 0xdf, 0x89, 0xd0, 0x55), 5);
	/* cmp %rsi,%rdi; cmp $0x10,%rsi; cmp $0x1000,%rdx; jbe */
	assert_int_equal(SITE(0x48, 0x39, 0xf7, 0x48, 0x83, 0xfe, 0x10, 0x48, 0x81, 0xfa, 0x00,
			      0x10, 0x00, 0x00, 0x76, 0x05),
			 14);
}

static void site__writes_what_a_probe_reads__entry_stays(void **state)
{
	(void)state;
	/* mov %rax,%rdi; push %rbp: the first argument changed */
	assert_int_equal(SITE(0x48, 0x89, 0xc7, 0x55), 0);
	/* mov %rdi,%r8 (REX.B): the fifth */
	assert_int_equal(SITE(0x49, 0x89, 0xf8, 0x55), 0);
	/* mov %rdi,%r8 as 8b (REX.R) */
	assert_int_equal(SITE(0x4c, 0x8b, 0xc7, 0x55), 0);
	/* mov %rdi,%rcx: the fourth */
	assert_int_equal(SITE(0x48, 0x89, 0xf9, 0x55), 0);
	/* mov %rbp,%rsp: the stack pointer */
	assert_int_equal(SITE(0x48, 0x89, 0xec, 0x55), 0);
	/* sub $8,%rsp; push %rbp */
	assert_int_equal(SITE(0x48, 0x83, 0xec, 0x08, 0x55), 0);
	/* mov %rdi,(%rsp): memory (the return address's slot) */
	assert_int_equal(SITE(0x48, 0x89, 0x3c, 0x24, 0x55), 0);
	/* cmpq $0,(%rdi): a memory operand other than a global */
	assert_int_equal(SITE(0x48, 0x83, 0x3f, 0x00, 0x74, 0x02), 0);
	/* add $1,x(%rip): group 1 but not cmp, it writes */
	assert_int_equal(SITE(0x83, 0x05, 0x10, 0x20, 0x30, 0x00, 0x01, 0x55), 0);
}

static void site__unknown_or_stepped__entry_stays(void **state)
{
	(void)state;
	/* test %rdi,%rdi; ret: ret is stepped, and nothing is past it */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0xc3, 0x55), 0);
	/* test; a long nop the kernel does not know (cs prefix): stepped */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00,
			      0x00, 0x00, 0x55),
			 0);
	/* test; push with REX.W, which the kernel does not emulate */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x48, 0x55), 0);
	/* test; call with an operand-size prefix */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x66, 0xe8, 0x00, 0x00), 0);
	/* test; lea (not known) */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x48, 0x8d, 0x77, 0xf0, 0x55), 0);
}

static void site__bytes_end_early__entry_stays(void **state)
{
	(void)state;
	assert_int_equal(glibc_site_offset(NULL, 0), 0);
	/* free's, cut inside the je */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf), 0);
	/* cut inside the test */
	assert_int_equal(SITE(0x48, 0x85), 0);
	/* memalign's cmpb, cut inside its disp32 */
	assert_int_equal(SITE(0x80, 0x3d, 0x71, 0x0e), 0);
	/* a lone REX prefix */
	assert_int_equal(SITE(0x48), 0);
}

static void site__walk__ends_at_the_byte_limit(void **state)
{
	(void)state;
	/* ten tests (30 bytes), push at 30: within the 32 bytes read */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85,
			      0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48,
			      0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x55),
			 30);
	/* eleven (33 bytes): the push is past them, the entry stays */
	assert_int_equal(SITE(0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85,
			      0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48,
			      0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff,
			      0x55),
			 0);
}

static void decode__emulated_set__kinds_and_lengths(void **state)
{
	size_t len;

	(void)state;
	assert_int_equal(DECODE(&len, 0x55), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 1);
	assert_int_equal(DECODE(&len, 0x41, 0x57), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 2);
	assert_int_equal(DECODE(&len, 0x74, 0x07), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 2);
	assert_int_equal(DECODE(&len, 0x0f, 0x84, 0x01, 0x00, 0x00, 0x00), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 6);
	assert_int_equal(DECODE(&len, 0xeb, 0x10), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 2);
	assert_int_equal(DECODE(&len, 0xe9, 0x00, 0x01, 0x00, 0x00), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 5);
	assert_int_equal(DECODE(&len, 0xe8, 0x00, 0x01, 0x00, 0x00), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 5);
	assert_int_equal(DECODE(&len, 0x66, 0x90), GLIBC_INSN_EMULATED);
	assert_int_equal(len, 2);
	assert_int_equal(DECODE(&len, 0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00),
			 GLIBC_INSN_EMULATED);
	assert_int_equal(len, 8);
	assert_int_equal(DECODE(&len, 0xf3, 0x0f, 0x1e, 0xfa), GLIBC_INSN_PASS);
	assert_int_equal(len, 4);
	assert_int_equal(DECODE(&len, 0x80, 0x3d, 0x71, 0x0e, 0x14, 0x00, 0x00), GLIBC_INSN_PASS);
	assert_int_equal(len, 7);
	assert_int_equal(DECODE(&len, 0x81, 0x3d, 1, 2, 3, 4, 5, 6, 7, 8), GLIBC_INSN_PASS);
	assert_int_equal(len, 10);
	/* a jcc the bytes cut: nothing, and no length */
	assert_int_equal(DECODE(&len, 0x0f, 0x84, 0x01), GLIBC_INSN_STOP);
	assert_int_equal(len, 0);
	/* pop: stepped */
	assert_int_equal(DECODE(&len, 0x5d), GLIBC_INSN_STOP);
	assert_int_equal(len, 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(site__glibc_2_36_entries__past_what_the_kernel_steps),
		cmocka_unit_test(site__cet_build__past_endbr64),
		cmocka_unit_test(site__moves_to_scratch_registers__walked_over),
		cmocka_unit_test(site__writes_what_a_probe_reads__entry_stays),
		cmocka_unit_test(site__unknown_or_stepped__entry_stays),
		cmocka_unit_test(site__bytes_end_early__entry_stays),
		cmocka_unit_test(site__walk__ends_at_the_byte_limit),
		cmocka_unit_test(decode__emulated_set__kinds_and_lengths),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
