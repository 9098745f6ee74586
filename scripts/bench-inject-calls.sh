#!/usr/bin/env bash
# The interposer's cost per call (issue 34), counted rather than timed: bench/inject_calls (the
# churn of alloc_bench: 16..256 B in a ring of 4096) under callgrind, glibc alone and with
# libtally_interpose.so started in the process (no tracer: the probe's semaphore raised by
# hand), at two lengths, so that the difference is the loop's alone: instructions a
# malloc+free pair, glibc's own and the interposer's on top. Then BENCH_RUNS (default 5)
# interleaved timed rounds (thread CPU time, pinned to the last CPU): ns a pair each way and
# their ratio, the median over the rounds. Reports, does not gate.
#
# usage: scripts/bench-inject-calls.sh [LIB] [-h|--help]   (after make; LIB: another build
#        of libtally_interpose.so to measure, default build/libtally_interpose.so)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
	sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
fi
B=${BUILD:-build}
LIB=$(realpath "${1:-$B/libtally_interpose.so}")
RUNS=${BENCH_RUNS:-5}
BIN=$B/inject_calls
make -s "$BIN"
command -v valgrind >/dev/null || { echo "bench-inject-calls: valgrind not installed" >&2; exit 1; }
sem=0x$(nm "$LIB" | awk '$3 == "tally_batch_semaphore" { print $1 }')
begin=0x$(nm "$LIB" | awk '$3 == "tally_interpose_begin" { print $1 }')
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Instructions of a whole run: LIB|- PAIRS
instructions() {
	valgrind --tool=callgrind --callgrind-out-file="$tmp/cg" "$BIN" "$1" "$sem" "$begin" "$2" \
		>/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; exit 1; }
	awk '/^summary:/ { print $2 }' "$tmp/cg"
}
# Instructions a pair: LIB|-
per_pair() {
	local a b
	a=$(instructions "$1" 100000)
	b=$(instructions "$1" 300000)
	awk -v a="$a" -v b="$b" 'BEGIN { printf "%.1f\n", (b - a) / 200000 }'
}
glibc=$(per_pair -)
inj=$(per_pair "$LIB")
echo "instructions a malloc+free pair: glibc $glibc, injected $inj" \
	"($(awk -v g="$glibc" -v i="$inj" 'BEGIN { printf "%.1f over glibc, %.2fx", i - g, i / g }'))"

cpu=$(($(nproc) - 1))
for r in $(seq "$RUNS"); do
	u=$(taskset -c "$cpu" "$BIN" - 0 0 20000000 | awk '{ print $4 }')
	i=$(taskset -c "$cpu" "$BIN" "$LIB" "$sem" "$begin" 20000000 | awk '{ print $4 }')
	echo "round $r: ns a pair: glibc $u, injected $i" >&2
	awk -v u="$u" -v i="$i" 'BEGIN { print i / u }'
done | sort -g | awk '{ x[NR] = $1 }
	END { printf "time (median of %d rounds): %.2fx glibc\n", NR, x[int((NR + 1) / 2)] }'
