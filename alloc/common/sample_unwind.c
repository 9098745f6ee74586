// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * A sample's stack from the .eh_frame rules, each rule read once (sample_unwind.h).
 *
 * Why: libgcc's _Unwind_Backtrace finds, decodes and runs each frame's CIE
 * and FDE programs anew on every call, and carries a context of every
 * register from frame to frame. Measured on the churn (alloc_bench churn,
 * 8 frames a sample, 5 of them ours: callgrind on the test-sink build,
 * TALLY_SAMPLE_RATE=65536): 12.8 k instructions an unwind, 1.5 k a frame,
 * 96 % of a sample's cost in the process; about 4 us of the workload's time
 * a sample on this VM, cold caches included. At 512 KiB that alone was 6 %
 * of the traced churn.
 *
 * How: on x86-64 a frame at a call site is, but for signal frames and hand
 * written code, "CFA = rsp or rbp + k; the return address at CFA - 8; rbp
 * unchanged or saved at CFA - 8j". That rule, per return address, packs in
 * 16 bits beside the address in one word of a direct-mapped table shared by
 * all threads (relaxed atomic words: no lock, no torn entry). A hit costs a
 * hash, a compare and two loads from the stack; a miss runs the FDE's
 * program once (_Unwind_Find_FDE finds it, as libgcc does). Any frame whose
 * rule does not fit, any frame without unwind data, and the whole stack
 * goes to libgcc, so the frames are always libgcc's (tests/test_sample.c
 * compares the two). Measured (the same callgrind run): 12.8 k
 * instructions an unwind down to 0.58 k, 0.39 k of them the walk and the
 * rest cache_check; on the churn, the sampling's cost at 64 KiB from +7.6
 * to +5.9 ns an operation (the rest: the free path, free.c).
 *
 * An object unloaded (dlclose) may leave rules for addresses another one
 * takes later: the table is emptied whenever the loader's count of
 * unloaded objects (dl_iterate_phdr's dlpi_subs) moved.
 */
#include <link.h>
#include <stdbool.h>
#include <string.h>

#include "sample_unwind.h"

#if defined(__x86_64__)

/* libgcc's (unwind-dw2-fde.h, exported since GCC 3.0): the FDE for pc */
struct dwarf_eh_bases {
	void *tbase;
	void *dbase;
	void *func;
};
extern const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

enum { REG_RBP = 6, REG_RSP = 7, REG_RA = 16 };

/* A rule in 16 bits: the CFA's register (rbp or rsp) and offset / 8, and
 * where rbp was saved (CFA - 8j, j > 0) if it was. */
#define RULE_CFA_RBP 0x8000u
#define RULE_RBP_SAVED 0x4000u
#define RULE_RBP_SHIFT 10
#define RULE_OFF_MASK 0x3ffu
#define RULE_OFF_MAX 1022u	/* (1023 is RULE_NONE's) */
#define RULE_END RULE_RBP_SAVED /* (j = 0) the return address undefined: the outermost frame */
#define RULE_NONE 0xffffu	/* libgcc's */
#define CACHE_BITS 12		/* 4096 rules, 32 KiB */
#define IP_MAX (1ull << 48)	/* (user addresses on x86-64) */

static uint64_t cache[1u << CACHE_BITS];
static int cache_subs = -1;

/* how a register was saved, as far as a rule needs */
enum how { SAME, OFFSET, UNDEF, OTHER };

struct row {
	uint64_t cfa_reg; /* REG_RSP, REG_RBP, else not followed (an expression: ~0) */
	int64_t cfa_off;
	uint8_t rbp, ra, rsp; /* enum how (rsp: the CFA's, unless a rule says otherwise) */
	int64_t rbp_off, ra_off;
};

struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	bool aug_z, signal;
	const uint8_t *insns, *end;
};

static bool uleb(const uint8_t **p, const uint8_t *end, uint64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;

	while (*p < end && shift < 64) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			*v = r;
			return true;
		}
	}
	return false;
}

static bool sleb(const uint8_t **p, const uint8_t *end, int64_t *v)
{
	uint64_t r = 0;
	unsigned shift = 0;

	while (*p < end && shift < 64) {
		uint8_t b = *(*p)++;
		r |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
		if (!(b & 0x80)) {
			if (shift < 64 && (b & 0x40))
				r |= ~0ull << shift;
			*v = (int64_t)r;
			return true;
		}
	}
	return false;
}

/* The bytes of a pointer in encoding enc (DW_EH_PE_*): 0 for the variable
 * length ones, which FDEs of gcc and clang never use. */
static unsigned enc_size(uint8_t enc)
{
	switch (enc & 0x0f) {
	case 0x00: /* absptr */
	case 0x04: /* udata8 */
	case 0x0c: /* sdata8 */
		return 8;
	case 0x02: /* udata2 */
	case 0x0a: /* sdata2 */
		return 2;
	case 0x03: /* udata4 */
	case 0x0b: /* sdata4 */
		return 4;
	default:
		return 0;
	}
}

/* The CIE's factors and augmentation ("zR", "zPLR", "zRS"...). */
static bool cie_parse(const uint8_t *p, struct cie *c)
{
	uint32_t len, id;
	memcpy(&len, p, 4);
	memcpy(&id, p + 4, 4);
	if (!len || len == 0xffffffffu || id)
		return false;
	const uint8_t *end = p + 4 + len, *aug = p + 9;
	uint64_t ra, alen;
	if (p[8] != 1 && p[8] != 3)
		return false;
	p = aug + strnlen((const char *)aug, (size_t)(end - aug)) + 1;
	*c = (struct cie){ .fde_enc = 0, .end = end };
	if (aug[0] == 'e' && aug[1] == 'h')
		return false;
	if (!uleb(&p, end, &c->code_align) || !sleb(&p, end, &c->data_align))
		return false;
	if (!uleb(&p, end, &ra) || ra != REG_RA)
		return false;
	c->aug_z = aug[0] == 'z';
	c->insns = p;
	if (!c->aug_z)
		return aug[0] == 0;
	if (!uleb(&p, end, &alen) || alen > (uint64_t)(end - p))
		return false;
	c->insns = p + alen;
	for (const uint8_t *a = aug + 1; *a; a++) {
		if (*a == 'R' && p < c->insns) {
			c->fde_enc = *p++;
		} else if (*a == 'L' && p < c->insns) {
			p++;
		} else if (*a == 'P' && p < c->insns) {
			unsigned sz = (*p & 0x70) == 0x50 ? 0 : enc_size(*p); /* (not aligned) */
			if (!sz)
				return false;
			p += 1 + sz;
		} else if (*a == 'S') {
			c->signal = true;
		} else {
			return false;
		}
	}
	return true;
}

/* A register's rule set by an instruction: only rbp's and the return
 * address's matter. */
static void reg_set(struct row *r, uint64_t reg, uint8_t how, int64_t off)
{
	if (reg == REG_RBP) {
		r->rbp = how;
		r->rbp_off = off;
	} else if (reg == REG_RA) {
		r->ra = how;
		r->ra_off = off;
	} else if (reg == REG_RSP) {
		r->rsp = how;
	}
}

/* DW_CFA_restore: the register's rule of the CIE's program. */
static void reg_restore(struct row *r, const struct row *init, uint64_t reg)
{
	if (reg == REG_RBP)
		reg_set(r, reg, init->rbp, init->rbp_off);
	else if (reg == REG_RA)
		reg_set(r, reg, init->ra, init->ra_off);
	else if (reg == REG_RSP)
		reg_set(r, reg, init->rsp, 0);
}

struct prog {
	const struct cie *c;
	const struct row *init; /* the CIE's row (NULL while running it) */
	uintptr_t loc, ip;	/* the row wanted: the last before ip */
	struct row saved[8];	/* DW_CFA_remember_state */
	unsigned nsaved;
};

/* One of the extended instructions (the low six bits zero): false when
 * the rule cannot be followed (or the program is malformed). */
static bool cfa_ext(struct prog *g, struct row *r, uint8_t op, const uint8_t **p,
		    const uint8_t *end)
{
	uint64_t reg = 0, u = 0;

	switch (op) {
	case 0x00: /* nop */
		return true;
	case 0x02:   /* advance_loc1 */
	case 0x03:   /* advance_loc2 */
	case 0x04: { /* advance_loc4 */
		unsigned n = op == 0x02 ? 1 : op == 0x03 ? 2 : 4;
		uint32_t d = 0;
		if ((size_t)(end - *p) < n)
			return false;
		memcpy(&d, *p, n); /* (little-endian) */
		*p += n;
		g->loc += d * g->c->code_align;
		return true;
	}
	case 0x05: /* offset_extended */
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		reg_set(r, reg, OFFSET, (int64_t)u * g->c->data_align);
		return true;
	case 0x06: /* restore_extended */
		if (!uleb(p, end, &reg) || !g->init)
			return false;
		reg_restore(r, g->init, reg);
		return true;
	case 0x07: /* undefined */
	case 0x08: /* same_value */
		if (!uleb(p, end, &reg))
			return false;
		reg_set(r, reg, op == 0x07 ? UNDEF : SAME, 0);
		return true;
	case 0x09: /* register */
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		reg_set(r, reg, OTHER, 0);
		return true;
	case 0x0a: /* remember_state */
		if (g->nsaved == sizeof(g->saved) / sizeof(g->saved[0]))
			return false;
		g->saved[g->nsaved++] = *r;
		return true;
	case 0x0b: /* restore_state */
		if (!g->nsaved)
			return false;
		*r = g->saved[--g->nsaved];
		return true;
	case 0x2e: /* GNU_args_size */
		return uleb(p, end, &u);
	case 0x2f: /* GNU_negative_offset_extended */
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		reg_set(r, reg, OFFSET, -(int64_t)u * g->c->data_align);
		return true;
	default:
		return false; /* set_loc, and the unknown */
	}
}

/* The CFA's instructions, and those that name a register with a block or
 * a signed offset. */
static bool cfa_def(struct prog *g, struct row *r, uint8_t op, const uint8_t **p,
		    const uint8_t *end)
{
	uint64_t reg = 0, u = 0;
	int64_t s = 0;

	switch (op) {
	case 0x0c: /* def_cfa */
		if (!uleb(p, end, &r->cfa_reg) || !uleb(p, end, &u))
			return false;
		r->cfa_off = (int64_t)u;
		return true;
	case 0x0d: /* def_cfa_register */
		return uleb(p, end, &r->cfa_reg);
	case 0x0e: /* def_cfa_offset */
		if (!uleb(p, end, &u))
			return false;
		r->cfa_off = (int64_t)u;
		return true;
	case 0x0f: /* def_cfa_expression */
		r->cfa_reg = ~0ull;
		if (!uleb(p, end, &u) || u > (uint64_t)(end - *p))
			return false;
		*p += u;
		return true;
	case 0x10: /* expression */
	case 0x16: /* val_expression */
		if (!uleb(p, end, &reg) || !uleb(p, end, &u) || u > (uint64_t)(end - *p))
			return false;
		*p += u;
		reg_set(r, reg, OTHER, 0);
		return true;
	case 0x11: /* offset_extended_sf */
	case 0x15: /* val_offset_sf */
		if (!uleb(p, end, &reg) || !sleb(p, end, &s))
			return false;
		reg_set(r, reg, op == 0x11 ? OFFSET : OTHER, s * g->c->data_align);
		return true;
	case 0x12: /* def_cfa_sf */
		if (!uleb(p, end, &r->cfa_reg) || !sleb(p, end, &s))
			return false;
		r->cfa_off = s * g->c->data_align;
		return true;
	case 0x13: /* def_cfa_offset_sf */
		if (!sleb(p, end, &s))
			return false;
		r->cfa_off = s * g->c->data_align;
		return true;
	case 0x14: /* val_offset */
		if (!uleb(p, end, &reg) || !uleb(p, end, &u))
			return false;
		reg_set(r, reg, OTHER, 0);
		return true;
	default:
		return cfa_ext(g, r, op, p, end);
	}
}

/* The program from p to end into r, up to the row for g->ip; true when
 * every instruction was understood (set_loc, the only one this leaves to
 * libgcc, is never emitted by gcc or clang for x86-64). */
static bool cfa_run(struct prog *g, struct row *r, const uint8_t *p, const uint8_t *end)
{
	while (p < end && g->loc < g->ip) {
		uint8_t op = *p++;
		uint64_t u;

		switch (op >> 6) {
		case 1: /* advance_loc */
			g->loc += (op & 0x3f) * g->c->code_align;
			break;
		case 2: /* offset */
			if (!uleb(&p, end, &u))
				return false;
			reg_set(r, op & 0x3f, OFFSET, (int64_t)u * g->c->data_align);
			break;
		case 3: /* restore */
			if (!g->init)
				return false;
			reg_restore(r, g->init, op & 0x3f);
			break;
		default:
			if (!cfa_def(g, r, op, &p, end))
				return false;
		}
	}
	return true;
}

/* The row, packed (RULE_NONE when it does not fit a rule). */
static uint16_t rule_pack(const struct row *r)
{
	if (r->ra == UNDEF)
		return RULE_END;
	if ((r->cfa_reg != REG_RSP && r->cfa_reg != REG_RBP) || r->rsp != SAME || r->cfa_off < 8 ||
	    r->cfa_off % 8 || r->cfa_off / 8 > RULE_OFF_MAX || r->ra != OFFSET || r->ra_off != -8)
		return RULE_NONE;
	uint16_t rule = (uint16_t)(r->cfa_off / 8) | (r->cfa_reg == REG_RBP ? RULE_CFA_RBP : 0);
	if (r->rbp == SAME)
		return rule;
	if (r->rbp != OFFSET || r->rbp_off >= 0 || r->rbp_off % 8 || r->rbp_off < -8 * 15)
		return RULE_NONE;
	return rule | RULE_RBP_SAVED | (uint16_t)(-r->rbp_off / 8) << RULE_RBP_SHIFT;
}

/* The rule at return address ip (the row before it), from its FDE. */
static uint16_t rule_parse(uintptr_t ip)
{
	struct dwarf_eh_bases bases;
	const uint8_t *fde = _Unwind_Find_FDE((void *)(ip - 1), &bases);
	uint32_t len;
	int32_t cie_off;
	struct cie c;

	if (!fde)
		return RULE_NONE;
	memcpy(&len, fde, 4);
	memcpy(&cie_off, fde + 4, 4);
	if (!len || len == 0xffffffffu || !cie_parse(fde + 4 - cie_off, &c) || c.signal)
		return RULE_NONE;
	const uint8_t *p = fde + 8, *end = fde + 4 + len;
	unsigned sz = enc_size(c.fde_enc);
	uint64_t alen = 0;
	if (!sz || (size_t)(end - p) < 2 * sz)
		return RULE_NONE;
	p += 2 * sz; /* pc_begin (bases.func) and pc_range */
	if (c.aug_z && (!uleb(&p, end, &alen) || alen > (uint64_t)(end - p)))
		return RULE_NONE;
	p += alen;
	struct row r = { .cfa_reg = ~0ull, .rbp = SAME, .ra = SAME, .rsp = SAME }, init;
	struct prog g = { .c = &c, .loc = 0, .ip = UINTPTR_MAX };
	if (!cfa_run(&g, &r, c.insns, c.end) || g.nsaved)
		return RULE_NONE;
	init = r;
	g = (struct prog){ .c = &c, .init = &init, .loc = (uintptr_t)bases.func, .ip = ip };
	if (!cfa_run(&g, &r, p, end))
		return RULE_NONE;
	return rule_pack(&r);
}

static inline uint64_t *cache_slot(uintptr_t ip)
{
	return &cache[(ip * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS)];
}

static uint16_t rule_get(uintptr_t ip)
{
	uint64_t *slot = cache_slot(ip);
	uint64_t e = __atomic_load_n(slot, __ATOMIC_RELAXED);

	if (__builtin_expect(e >> 16 == ip, 1))
		return (uint16_t)e;
	uint16_t rule = rule_parse(ip);
	if (ip < IP_MAX)
		__atomic_store_n(slot, (uint64_t)ip << 16 | rule, __ATOMIC_RELAXED);
	return rule;
}

static int subs_first(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	*(unsigned long long *)arg = info->dlpi_subs;
	return 1;
}

/* The rules of unloaded objects go (about 60 ns: the loader's lock). */
static void cache_check(void)
{
	unsigned long long subs = 0;

	dl_iterate_phdr(subs_first, &subs);
	if ((int)subs == __atomic_load_n(&cache_subs, __ATOMIC_RELAXED))
		return;
	for (size_t i = 0; i < sizeof(cache) / sizeof(cache[0]); i++)
		__atomic_store_n(&cache[i], 0, __ATOMIC_RELAXED);
	__atomic_store_n(&cache_subs, (int)subs, __ATOMIC_RELAXED);
}

int unwind_cached(uint64_t *pcs, unsigned max, uintptr_t lo, uintptr_t hi)
{
	uintptr_t ip, sp, bp;
	unsigned n = 0;

	cache_check();
	/* this frame's state: an address inside it, its rsp and rbp there */
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
			 : "=r"(ip), "=r"(sp), "=r"(bp));
	/* (the ours that lead are at most a few: a bound against a loop) */
	for (unsigned i = 0; i < max + 64 && ip; i++) {
		if (n || ip < lo || ip >= hi) {
			pcs[n++] = ip;
			if (n == max)
				return (int)n;
		}
		uint16_t rule = rule_get(ip);
		if (rule == RULE_END)
			return (int)n;
		if (rule == RULE_NONE)
			return -1;
		uintptr_t cfa = ((rule & RULE_CFA_RBP) ? bp : sp) + (rule & RULE_OFF_MASK) * 8;
		if (cfa <= sp)
			return -1; /* (a stack grows down) */
		if (rule & RULE_RBP_SAVED)
			bp = *(const uintptr_t *)(cfa - 8 * ((rule >> RULE_RBP_SHIFT) & 0xf));
		ip = *(const uintptr_t *)(cfa - 8);
		sp = cfa;
	}
	return ip ? -1 : (int)n;
}

#else

int unwind_cached(uint64_t *pcs, unsigned max, uintptr_t lo, uintptr_t hi)
{
	(void)pcs, (void)max, (void)lo, (void)hi;
	return -1;
}

#endif
