#!/usr/bin/env bash
# What following the dynamic loader costs a program that loads many
# libraries (the probe on _dl_debug_state, README "GPU figures"): a program
# that dlopens N distinct small libraries times itself, untraced and under
# `tally snapshot --`, in interleaved rounds; the median of each and their
# ratio. The same for python3 importing extension modules. TALLY_GPU=on:
# tally follows the loader on a machine with an NVIDIA driver, and only
# there by default; this measures what that costs, on any machine.
# Usage: scripts/bench-loader.sh   (root, after make; BENCH_RUNS rounds, 5)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
RUNS=${BENCH_RUNS:-5}
N=${BENCH_LIBS:-300}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$(id -u)" -ne 0 ]; then
	echo "bench-loader: needs root" >&2
	exit 1
fi
for i in $(seq "$N"); do
	echo "int f$i(void) { return $i; }" >"$tmp/l$i.c"
	cc -shared -fPIC -o "$tmp/libl$i.so" "$tmp/l$i.c" || exit 1
done
cat >"$tmp/loader.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(int argc, char **argv)
{
	struct timespec a, b;
	char path[4096];
	int n = atoi(argv[2]);
	clock_gettime(CLOCK_MONOTONIC, &a);
	for (int i = 1; i <= n; i++) {
		snprintf(path, sizeof(path), "%s/libl%d.so", argv[1], i);
		if (!dlopen(path, RTLD_NOW))
			return 1;
	}
	clock_gettime(CLOCK_MONOTONIC, &b);
	fprintf(stderr, "%.3f\n", (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
	return 0;
}
C
cc -O2 -o "$tmp/loader" "$tmp/loader.c" -ldl || exit 1
PY='import time; t = time.perf_counter()
import json, sqlite3, decimal, ctypes, ssl, hashlib, zlib, bz2, lzma, csv, array, select, mmap, socket, struct, math, cmath, unicodedata, pyexpat, _asyncio, _queue, _multiprocessing, _uuid
import sys; print("%.3f" % ((time.perf_counter() - t) * 1e3), file=sys.stderr)'

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }
row() { # NAME CMD...: medians of the program's own figure, untraced and traced
	local name=$1 u t
	shift
	: >"$tmp/u"
	: >"$tmp/t"
	for _ in $(seq "$RUNS"); do
		"$@" 2>>"$tmp/u" >/dev/null
		TALLY_GPU=on "$TALLY" snapshot --no-sample -- "$@" 2>&1 >/dev/null | grep -E '^[0-9.]+$' >>"$tmp/t"
	done
	u=$(median <"$tmp/u")
	t=$(median <"$tmp/t")
	printf '%-34s %10s ms %10s ms %6.2fx\n' "$name" "$u" "$t" "$(echo "$t / $u" | bc -l)"
}
printf '%-34s %13s %13s %7s\n' "workload" "untraced" "tally" "ratio"
row "dlopen of $N libraries" "$tmp/loader" "$tmp" "$N"
row "python3 imports 23 extension mods" python3 -c "$PY"
