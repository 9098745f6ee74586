/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT probe sites of tally's guest libraries (provider "tally").
 *
 * Stock sys/sdt.h emits a 1-byte nop at each site, which the kernel must
 * single-step (about 20 us a hit here). A 5-byte nop is turned into a call
 * into the kernel instead (about 1.4 us, DESIGN.md §5), so redefine it.
 * Each probe has a semaphore: the kernel raises it while a tracer is
 * attached, and untraced code tests it with one predictable branch.
 */
#ifndef TALLY_PROBES_H
#define TALLY_PROBES_H

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#undef _SDT_NOP
#define _SDT_NOP                                                                                   \
	.byte 0x0f;                                                                                \
	.byte 0x1f;                                                                                \
	.byte 0x44;                                                                                \
	.byte 0x00;                                                                                \
	.byte 0x00

#define TALLY_SEMAPHORE(name)                                                                      \
	__attribute__((section(".probes"), used)) unsigned short tally_##name##_semaphore
#define TALLY_TRACED(name) __builtin_expect(tally_##name##_semaphore != 0, 0)

#endif /* TALLY_PROBES_H */
