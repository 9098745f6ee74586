/* SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause) */
/*
 * USDT probe sites of tally's guest libraries (provider "tally").
 *
 * Stock sys/sdt.h emits a 1-byte nop at each site, which the kernel must
 * single-step (about 20 us a hit here). A 5-byte nop is turned into a call
 * into the kernel instead (about 1.4 us, docs/DESIGN.md §5), so redefine it.
 * Each probe has a semaphore: the kernel raises it while a tracer is
 * attached, and untraced code tests it with one predictable branch.
 *
 * Every site's address and every semaphore's address is also kept in a
 * section of the library's own (tally_probe_sites, tally_probe_sems), so that
 * a forked child can undo what the kernel did to its parent's sites
 * (probe_guard.c); TALLY_TRACED asks that guard before a probe fires.
 */
#ifndef TALLY_PROBES_H
#define TALLY_PROBES_H

#include <stdbool.h>
#include <stdint.h>

#define _SDT_HAS_SEMAPHORES 1
#include <sys/sdt.h>
#undef _SDT_NOP
/*
 * sys/sdt.h places this inside _SDT_ASM_1(990: _SDT_NOP), which stringifies
 * its argument, so the directive that records the site (it needs commas)
 * cannot simply follow the nop: the expansion closes that stringification,
 * adds the directive as a string of its own and opens an empty one (which
 * _SDT_ASM_1's own parenthesis closes). TALLY_DEFER keeps that last _SDT_S
 * from being expanded while the argument itself is.
 */
#define TALLY_DEFER()
#define _SDT_NOP                                                                                    \
	.byte 0x0f;                                                                                 \
	.byte 0x1f;                                                                                 \
	.byte 0x44;                                                                                 \
	.byte 0x00;                                                                                 \
	.byte 0x00;                                                                                 \
	) "\n\t.pushsection tally_probe_sites, \"aw\"\n\t.balign 8\n\t.8byte 990b\n\t.popsection\n" \
		_SDT_S TALLY_DEFER()(

/* The five bytes every site holds while no tracer has touched it. */
#define TALLY_PROBE_NOP5                                                                           \
	{                                                                                          \
		0x0f, 0x1f, 0x44, 0x00, 0x00                                                       \
	}

/* A semaphore in the section the probe notes point into, and its address in
 * the library's list of them. */
#define TALLY_SEMAPHORE_REF(name)                                                                  \
	__attribute__((section("tally_probe_sems"),                                                \
		       used)) static unsigned short *const tally_##name##_semaphore_ref =          \
		&tally_##name##_semaphore
#define TALLY_SEMAPHORE(name)                                                                      \
	__attribute__((section(".probes"), used)) unsigned short tally_##name##_semaphore;         \
	TALLY_SEMAPHORE_REF(name)

/* probe_guard.c: whether this process may reach its probe sites; false, once,
 * in a child that has just been made untraced. */
enum probe_guard_state { PROBE_GUARD_CHILD = 0, PROBE_GUARD_LIVE = 1, PROBE_GUARD_FIXING = 2 };
extern int *tally_probe_guard __attribute__((visibility("hidden")));
bool probe_guard_slow(void) __attribute__((visibility("hidden"), cold));
/* What a library does in a child beside its semaphores and sites, told
 * whether the child can be traced (the allocator: its pending records,
 * which the parent hands over itself, dropped when not; its parent's shared
 * rings let go of); may be NULL. */
void probe_guard_init(void (*on_child)(bool traced)) __attribute__((visibility("hidden")));
/* Whether a child however forked is caught (the guard word is in a
 * MADV_WIPEONFORK page), not only glibc's fork's. */
bool probe_guard_wipes(void) __attribute__((visibility("hidden")));
static inline bool probe_guard_ok(void)
{
	int *g = tally_probe_guard;
	if (__builtin_expect(g && __atomic_load_n(g, __ATOMIC_ACQUIRE) == PROBE_GUARD_LIVE, 1))
		return true;
	return probe_guard_slow();
}

#define TALLY_TRACED(name) (__builtin_expect(tally_##name##_semaphore != 0, 0) && probe_guard_ok())

#endif /* TALLY_PROBES_H */
