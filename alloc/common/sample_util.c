// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * Heap profiles' shared parts (sample_util.h). Stacks are unwound with
 * libgcc's unwinder from the .eh_frame tables every x86-64 object carries
 * (Debian builds without frame pointers): 1.5 k instructions a frame here
 * (callgrind), paid once per sample. A cache of each return address's rule
 * cut that to 40, but made a late attach's profile lose its objects' names
 * ten times as often (issue 34's note): not kept.
 */
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <unwind.h>

#include "sample_util.h"

static uint64_t rng_next(uint64_t *rng)
{
	uint64_t x = *rng;
	x ^= x >> 12;
	x ^= x << 25;
	x ^= x >> 27;
	*rng = x;
	return x * 0x2545f4914f6cdd1dULL;
}

/* ln(u) for u in (0, 1], without libm (a guest library keeps its
 * dependencies few): u = m * 2^k with m in [1, 2), ln m = 2 atanh(z) with
 * z = (m - 1) / (m + 1) in [0, 1/3), whose series is within 1e-12 at 12
 * terms. */
static double sample_ln(double u)
{
	uint64_t bits;
	memcpy(&bits, &u, sizeof(bits));
	int k = (int)((bits >> 52) & 0x7ff) - 1023;
	bits = (bits & ((1ULL << 52) - 1)) | (1023ULL << 52);
	double m;
	memcpy(&m, &bits, sizeof(m));
	/* 1 / (2j + 1), by which the terms are multiplied, innermost last
	 * (Horner): twelve divisions were most of a gap's draw (perf on the
	 * churn at 64 KiB: sample_gap 0.6 of the time of an unwind that
	 * read each frame's rule once) */
	static const double inv[12] = {
		1.0,	  1.0 / 3,  1.0 / 5,  1.0 / 7,	1.0 / 9,  1.0 / 11,
		1.0 / 13, 1.0 / 15, 1.0 / 17, 1.0 / 19, 1.0 / 21, 1.0 / 23
	};
	double z = (m - 1) / (m + 1), z2 = z * z, sum = inv[11];
	for (int j = 10; j >= 0; j--)
		sum = sum * z2 + inv[j];
	return k * 0.69314718055994530942 + 2 * z * sum;
}

uint64_t sample_clock_ns(void)
{
	struct timespec ts;

	/* the vDSO's: about 20 ns, once per sampled block and its free */
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int64_t sample_gap(uint64_t *rng, uint64_t rate)
{
	/* u in (0, 1]: 53 random bits */
	double u = (double)((rng_next(rng) >> 11) + 1) * (1.0 / 9007199254740992.0);
	double gap = -sample_ln(u) * (double)rate;
	return gap >= 9.0e18 ? INT64_MAX : (int64_t)gap;
}

/* 1 - exp(-x) for x >= 0, without libm: below 1/2 its Taylor series (no
 * cancellation; 18 terms, the last under 1e-21 of the sum), above it
 * exp(-x) = 2^-n exp(-r) with r = x - n ln 2 in [0, ln 2), whose series
 * is within 1e-17 at 20 terms. */
static double one_minus_exp_neg(double x)
{
	if (x >= 40)
		return 1;
	double term = x, sum = x;
	if (x < 0.5) {
		for (int k = 2; k <= 18; k++) {
			term *= -x / k;
			sum += term;
		}
		return sum;
	}
	int n = (int)(x / 0.69314718055994530942);
	double r = x - n * 0.69314718055994530942, e = 1;
	term = 1;
	for (int k = 1; k <= 20; k++) {
		term *= -r / k;
		e += term;
	}
	return 1 - e / (double)(1ULL << n);
}

uint64_t sample_weight(uint64_t q, uint64_t rate)
{
	/* (at rate 1 every block is sampled: the gaps are truncated to 0) */
	if (!q || rate <= 1)
		return q;
	double w = (double)q / one_minus_exp_neg((double)q / (double)rate);
	return w >= 1.8e19 ? UINT64_MAX : (uint64_t)(w + 0.5);
}

/* the library's code (the Makefile puts all of it in this section): a
 * sample's stack starts at the first frame past it */
extern const char __start_tally_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_tally_text[] __attribute__((weak, visibility("hidden")));

struct backtrace {
	uint64_t *pcs;
	unsigned n;
};

static _Unwind_Reason_Code backtrace_step(struct _Unwind_Context *ctx, void *arg)
{
	struct backtrace *bt = arg;
	uintptr_t ip = _Unwind_GetIP(ctx);

	if (!ip)
		return _URC_END_OF_STACK;
	if (!bt->n && ip >= (uintptr_t)__start_tally_text && ip < (uintptr_t)__stop_tally_text)
		return _URC_NO_REASON;
	bt->pcs[bt->n++] = ip;
	return bt->n == TALLY_SAMPLE_FRAMES_MAX ? _URC_END_OF_STACK : _URC_NO_REASON;
}

unsigned sample_backtrace(uint64_t pcs[TALLY_SAMPLE_FRAMES_MAX])
{
	struct backtrace bt = { pcs, 0 };

	_Unwind_Backtrace(backtrace_step, &bt);
	return bt.n;
}

/* The object's TALLY_EV_MODULE record: its load bias, mapping, path. */
static uint32_t module_record(const struct sample_mods *m, const struct dl_find_object *o,
			      struct tally_ev *e, uint64_t *extra)
{
	const struct link_map *lm = o->dlfo_link_map;
	const char *path = lm->l_name && lm->l_name[0] ? lm->l_name : m->self_exe;
	size_t len = strnlen(path, TALLY_MODULE_PATH_MAX);
	uint32_t words = (uint32_t)(len + 7) / 8;

	/* term 1: the program itself (its link_map has no name) */
	*e = (struct tally_ev){ TALLY_EV_MODULE, path == m->self_exe, 0, (uint32_t)len,
				lm->l_addr };
	extra[0] = (uintptr_t)o->dlfo_map_start;
	extra[1] = (uintptr_t)o->dlfo_map_end;
	extra[1 + words] = 0;
	memcpy(&extra[2], path, len);
	return 2 + words;
}

/* The loader's lock-free lookup (glibc 2.35), a compare per frame after it. */
void sample_announce(struct sample_mods *m, uint64_t epoch, const uint64_t *pcs, unsigned n,
		     void (*put)(void *ctx, const struct tally_ev *e, const uint64_t *extra,
				 uint32_t nextra),
		     void *ctx)
{
	uintptr_t lo = 0, hi = 0;

	if (m->epoch != epoch) {
		m->epoch = epoch;
		m->n = 0;
	}
	if (!m->self_exe[0]) {
		ssize_t len = readlink("/proc/self/exe", m->self_exe, sizeof(m->self_exe) - 1);
		m->self_exe[len > 0 ? len : 0] = 0;
	}
	for (unsigned i = 0; i < n; i++) {
		struct dl_find_object o;
		if ((pcs[i] >= lo && pcs[i] < hi) || _dl_find_object((void *)pcs[i], &o))
			continue;
		lo = (uintptr_t)o.dlfo_map_start;
		hi = (uintptr_t)o.dlfo_map_end;
		unsigned k = 0;
		while (k < m->n && (m->v[k].lm != o.dlfo_link_map || m->v[k].start != lo))
			k++;
		if (k < m->n || m->n == SAMPLE_MODS_MAX)
			continue;
		m->v[m->n].lm = o.dlfo_link_map;
		m->v[m->n++].start = lo;
		struct tally_ev e;
		uint64_t extra[3 + TALLY_MODULE_PATH_MAX / 8];
		uint32_t nextra = module_record(m, &o, &e, extra);
		put(ctx, &e, extra, nextra);
	}
}
