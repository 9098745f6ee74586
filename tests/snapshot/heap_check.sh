# shellcheck shell=bash
# Sourced by the snapshot, container and serve suites: a late attach's or a
# running target's Stats against truths alloc/stats_walk.h does not produce
# (the allocator and tally's reader share it, so comparing the two cannot
# catch a wrong term). The target must be quiet (no thread allocating, and
# TALLY_ALLOC_PURGE_MS long: the purger unmaps and hands back pages on its own).

# heap_check PID STATS-FILE [--live N]: sets hc to "ok" or to what is wrong.
# tests/heap_truth.py: mapped equal to the allocator's mappings in smaps, the
# identity summed apart, Rss within mapped - virgin - returned, live the
# workload's own count (--live). Its Rss bound needs a slack: a page partly
# used is resident whole while its unused part is counted virgin, one page
# at most at each span's bump, each large block's end and each segment
# header's end (measured: python3's heap 16 to 27 KiB over, 71 spans, 4
# large blocks, 3 segments; tracer_workload's 0). measured_resident, read
# from the same smaps, must equal the kernel's Rss exactly (the slack is
# not its).
heap_check() {
	local pid=$1 st=$2 slack out rss mr
	shift 2
	slack=$(jq '4096 * (.spans_assigned + .large_count + ((.mapped + 4194303) / 4194304 | floor))' \
		"$st" 2>&1)
	out=$(python3 tests/heap_truth.py "$pid" "$st" --rss-slack "${slack:-0}" "$@" 2>&1)
	if [[ $out != "heap truth: ok"* ]]; then
		hc="$out (slack $slack)"
		return
	fi
	rss=$(sed -n 's/.*Rss \([0-9]*\)).*/\1/p' <<<"$out")
	mr=$(jq -r '.measured_resident // "none"' "$st" 2>&1)
	if [ "$mr" != none ] && [ "$mr" != "$rss" ]; then
		hc="measured_resident $mr != $rss, the kernel's Rss ($out)"
		return
	fi
	hc=ok
}
