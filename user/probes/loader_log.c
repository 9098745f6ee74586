// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
/*
 * libbpf's messages (loader.h): on stderr with -v, and, while timing is on
 * (timing.h), read for the phases of a BPF object's load, which libbpf
 * does in one call: the kernel's BTF parsed ("loading kernel BTF"), the
 * object's BTF and maps made (a "created successfully" per map), then the
 * CO-RE relocations and the verifier, program by program.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <bpf/libbpf.h>

#include "loader.h"
#include "../util/timing.h"

static bool libbpf_verbose;

/* The load this thread is in (an object may load on a thread of its own),
 * and when each of its phases ended; 0: not seen. */
static __thread struct {
	bool on;
	uint64_t t0, btf, maps;
} loading;

static void note(const char *fmt)
{
	if (strstr(fmt, "loading kernel BTF"))
		loading.btf = timing_now();
	else if (strstr(fmt, "created successfully"))
		loading.maps = timing_now();
}

/* libbpf's own lines (warnings on a failed attach, and the like) only with
 * -v: every failure is said once, in tally's own words, by the caller. */
static int libbpf_print(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	if (loading.on && level == LIBBPF_DEBUG)
		note(fmt);
	if (!libbpf_verbose || level == LIBBPF_DEBUG)
		return 0;
	return vfprintf(stderr, fmt, ap);
}

void loader_libbpf_messages(bool verbose)
{
	libbpf_verbose = verbose;
	libbpf_set_print(libbpf_print);
}

void loader_log_begin(void)
{
	loading.on = timing_on();
	loading.t0 = timing_now();
	loading.btf = loading.maps = 0;
}

void loader_log_end(const char *btf, const char *maps, const char *progs)
{
	uint64_t t = loading.t0;

	if (!loading.on)
		return;
	loading.on = false;
	if (loading.btf) {
		timing_span_to(btf, t, loading.btf);
		t = loading.btf;
	}
	if (loading.maps) {
		timing_span_to(maps, t, loading.maps);
		t = loading.maps;
	}
	timing_span(progs, t);
}
