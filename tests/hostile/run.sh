#!/usr/bin/env bash
# A hostile target cannot hang root's tally (issue 12, item 2): a target
# whose allocator state loops or lies (tests/hostile/target.c) makes
# `tally snapshot -p` stop within seconds, with bounded memory, one line on
# stderr and a non-zero status; the target runs on.
# TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
ALLOC=$PWD/$BUILD/libtally_alloc.so
TARGET=$PWD/$BUILD/tests/hostile_target
. tests/lib.sh

need_root hostile

# where the tracer finds the heap list: the symbol's address in the library
vaddr=0x$(nm "$ALLOC" | awk '$3 == "tally_heaps" { print $1 }')

for mode in cycle_heaps cycle_segs foreign_seg bad_count; do
	rm -f "$tmp/ready"
	LD_PRELOAD=$ALLOC "$TARGET" "$mode" "$vaddr" "$tmp/ready" 2>"$tmp/t.err" &
	tp=$!
	pids+=("$tp")
	wait_file "$tmp/ready"
	t0=$(date +%s%N)
	# peak memory of tally (kB) by GNU time; a hang ends at the timeout (124)
	/usr/bin/time -f %M -o "$tmp/rss" timeout -s KILL 30 "$TALLY" snapshot -p "$tp" -d 1 \
		>"$tmp/$mode.out" 2>"$tmp/$mode.err"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	rss=$(tail -1 "$tmp/rss" 2>/dev/null)
	# the ring buffer (64 MiB, --ring-mb's default) counts twice, the
	# kernel mapping it twice; 36 MB more is tally itself
	check "$mode: tally stops (rc $rc, ${ms} ms, peak ${rss:-?} kB): under 10 s, the ring and under 36 MB, non-zero status" \
		"$([ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && [ $ms -lt 10000 ] &&
			[ "${rss:-999999}" -lt $((2 * 64 * 1024 + 36000)) ]; echo $?)" "$(head -c 300 "$tmp/$mode.err")"
	check "$mode: one line on stderr that says the state is corrupt, no JSON" \
		"$([ "$(wc -l <"$tmp/$mode.err")" -eq 1 ] &&
			grep -Eq 'loops|malformed|corrupt' "$tmp/$mode.err" && [ ! -s "$tmp/$mode.out" ]; echo $?)" \
		"$(head -c 300 "$tmp/$mode.err")"
	check "$mode: the target runs on" "$(kill -0 "$tp" 2>/dev/null; echo $?)" "pid $tp"
	kill "$tp" 2>/dev/null
	wait "$tp" 2>/dev/null
done
finish
