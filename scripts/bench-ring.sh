#!/usr/bin/env bash
# Ring benchmark (issue 12 item 12): does the default ring carry every event of one and two
# threads allocating as fast as they can? tests/tracer_workload churn N (N threads of
# malloc/free, nothing else) under `tally snapshot -d 2`, started by tally and attached to
# with -p; BENCH_RUNS rounds (default 3). Prints each run, then per case the median of lost
# messages and of received ones, and the attach's wall time and tally's peak RSS (-p runs).
# Reports, does not gate: exit status 0 whenever it ran.
#
# usage: scripts/bench-ring.sh [-h|--help]     (as root, after make)
set -u
cd "$(dirname "$0")/.."
if [ "${1:-}" = -h ] || [ "${1:-}" = --help ]; then
	sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
	exit 0
fi
B=${BUILD:-build}
RUNS=${BENCH_RUNS:-3}
WL=$PWD/$B/tests/tracer_workload
TALLY=$PWD/$B/tally
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
[ -x "$WL" ] && [ -x "$TALLY" ] || { echo "bench-ring: build first (make all test-build)" >&2; exit 1; }

median() { sort -n | awk '{ v[NR] = $1 } END { print NR ? v[int((NR + 1) / 2)] : "-" }'; }

for threads in 1 2; do
	for mode in start attach; do
		: >"$tmp/runs"
		for r in $(seq "$RUNS"); do
			if [ $mode = start ]; then
				timeout 60 "$TALLY" snapshot -d 2 -- "$WL" churn "$threads" >"$tmp/s.json" 2>/dev/null
				wall=- rss=-
			else
				LD_PRELOAD=$PWD/$B/libtally_alloc.so "$WL" churn "$threads" &
				wp=$!
				sleep 1
				/usr/bin/time -f "%e %M" -o "$tmp/t" timeout 60 "$TALLY" snapshot -p $wp -d 2 >"$tmp/s.json" 2>/dev/null
				kill $wp 2>/dev/null
				wait $wp 2>/dev/null
				read -r wall rss <"$tmp/t"
				wall=$(awk -v w="$wall" 'BEGIN { printf "%.2f", w - 2 }') # the attach, without -d
			fi
			read -r lost received < <(jq -r '"\(.events.lost) \(.events.received)"' "$tmp/s.json")
			echo "threads=$threads $mode run $r: lost $lost of $((lost + received)) messages, attach ${wall} s, peak RSS ${rss} kB"
			echo "$lost $received $wall $rss" >>"$tmp/runs"
		done
		printf '%s\n' "| $threads | $mode | $(cut -d' ' -f1 "$tmp/runs" | median) | $(cut -d' ' -f2 "$tmp/runs" | median) | $(cut -d' ' -f3 "$tmp/runs" | median) | $(cut -d' ' -f4 "$tmp/runs" | median) |" >>"$tmp/table"
	done
done
echo
echo "| threads | how | lost (median) | received | attach s | peak RSS kB |"
echo "| --- | --- | --- | --- | --- | --- |"
cat "$tmp/table"
