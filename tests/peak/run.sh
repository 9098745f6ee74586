#!/usr/bin/env bash
# Integration tests of the peak (docs/DESIGN.md §11): a workload whose peak
# is not its end (tests/peak/peak_workload.c, built without frame pointers)
# traced at the default sampling rate; tally's peak compared with the
# workload's own count (exact), the sites at the peak with its sampled
# truth (within the estimator's error), and the same peak read through
# the folded profile and the real pprof. Prints "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY_BIN:-$PWD/$BUILD/tally}
PPROF=$PWD/$BUILD/pprof
WL=$PWD/$BUILD/tests/peak/peak_workload
. tests/lib.sh

need_root peak

"$TALLY" snapshot -o "$tmp/s.json" -- "$WL" 2>"$tmp/truth" >/dev/null
rc=$?
check "snapshot of the workload" $rc "status $rc: $(tail -n 2 "$tmp/truth")"
truth=$(grep '^{' "$tmp/truth")
peak=$(jq -n "$truth | .peak")
end=$(jq -n "$truth | .end")
[ -n "$peak" ] && [ "$peak" -gt 100000000 ]
check "the workload says its peak ($peak)" $? "$truth"

# live is exact: the group's peak is the workload's own, to the byte, and
# the process's peak is the group's plus what root held then
g=$(jq -r '.peak.groups[] | select(.name == "build") | .live' "$tmp/s.json")
[ "$g" = "$peak" ]
check "the group's live at the peak is the workload's peak" $? "tally $g, workload $peak"
gp=$(jq -r '.groups[] | select(.name == "build") | .peak_live' "$tmp/s.json")
[ "$gp" = "$peak" ]
check "the group's peak_live is the workload's peak" $? "tally $gp, workload $peak"
gl=$(jq -r '.groups[] | select(.name == "build") | .live_bytes' "$tmp/s.json")
[ "$gl" = "$end" ]
check "the group's live at the end is the workload's end" $? "tally $gl, workload $end"
jq -e '.peak.live == ([.peak.groups[].live] | add)' "$tmp/s.json" >/dev/null
check "the peak's live is the sum of its groups'" $? "$(jq -c '.peak | {live, groups}' "$tmp/s.json")"
jq -e '.peak.live > .stats.live and .peak.at_s < .target.lifetime_s and .peak.after_s <= .peak.at_s' \
	"$tmp/s.json" >/dev/null
check "the peak is not the end, and names a moment before it" $? \
	"$(jq -c '{peak: (.peak | {at_s, after_s, live}), live: .stats.live, life: .target.lifetime_s}' "$tmp/s.json")"
jq -e '.peak.exact == true and .peak.since == "start"' "$tmp/s.json" >/dev/null
check "a single-threaded peak is one moment, counted from the start" $? \
	"$(jq -c '.peak | {exact, since}' "$tmp/s.json")"
# the identity at the peak balances as it does at any moment
jq -e '.peak.stats as $s | $s.mapped == ($s.live + $s.rounding + $s.cache + $s.span_free +
	$s.returned + $s.virgin + $s.hysteresis + $s.segment_overhead)' "$tmp/s.json" >/dev/null
check "the identity balances at the peak" $? "$(jq -c '.peak.stats' "$tmp/s.json")"
jq -e '.peak_mapped.mapped >= .peak.mapped and .peak_mapped.mapped >= .stats.mapped' \
	"$tmp/s.json" >/dev/null
check "the mapped peak is the highest mapped" $? "$(jq -c '{pm: .peak_mapped, pl: .peak.mapped}' "$tmp/s.json")"

# a tree of one: its peak is the process's, with the same groups and mapped
jq -e --argjson t "$peak" '.tree.peak as $p | $p.live == .peak.live and $p.exact and
	$p.at_s == .peak.at_s and $p.mapped == .peak.mapped and
	([$p.groups[] | select(.name == "build") | .live] == [$t]) and
	$p.processes[0].pid == .target.pid' "$tmp/s.json" >/dev/null
check "the tree's peak is its one process's, its group build's the workload's" $? \
	"$(jq -c '{tree: .tree.peak, peak: (.peak | {live, mapped, at_s})}' "$tmp/s.json")"

# a shell running it twice, one after the other: the tree's peak is one
# run's crest (the first has ended, its bytes gone), its group build the
# workload's own peak to the byte, the shell beside it
"$TALLY" snapshot -o "$tmp/sh.json" -- sh -c "$WL; $WL" >/dev/null 2>"$tmp/sh.err"
rc=$?
twice=$(grep -c '^{"peak"' "$tmp/sh.err")
jq -e --argjson t "$peak" '.tree.peak as $p | ([$p.groups[] | select(.name == "build") | .live] == [$t])
	and $p.live >= $t and $p.mapped >= $p.live and ($p.processes | length) >= 1' \
	"$tmp/sh.json" >/dev/null && [ $rc -eq 0 ] && [ "$twice" -eq 2 ]
check "a shell's two runs: the tree's peak is one run's, its group build the workload's" $? \
	"status $rc, runs $twice: $(jq -c '.tree.peak' "$tmp/sh.json" 2>/dev/null | head -c 600)"

# The sites at the peak: build_up's estimate within 4 standard errors of
# the bytes it held then (var: the workload's variance of that estimate;
# 4 sd: a false failure 6e-5 of the time)
est=$(jq -r '[.peak.sites[] | select(.frames[0].function == "build_up") | .peak_bytes] | add // 0' \
	"$tmp/s.json")
ok=$(jq -n --argjson e "$est" "$truth | ((\$e - .peak) | fabs) <= 4 * (.var | sqrt)")
[ "$ok" = true ]
check "build_up holds the peak, at the default rate, within 4 sd" $? \
	"estimate $est, truth $peak, sd $(jq -n "$truth | .var | sqrt")"
first=$(jq -r '.peak.sites[0].frames[0].function' "$tmp/s.json")
[ "$first" = build_up ]
check "the largest site at the peak is build_up" $? "first: $first"
endsite=$(jq -r '[.sites[] | select(.frames[0].function == "build_up") | .inuse_bytes] | add // 0' \
	"$tmp/s.json")
[ "$endsite" -lt "$est" ]
check "build_up holds less at the end than at the peak" $? "end $endsite, peak $est"

# The answers: an ended process's leaks, its temporaries, its lifetimes
# (estimates: within 4 standard errors of the workload's truth)
within4() { # ESTIMATE TRUTH VARIANCE
	jq -n --argjson e "$1" --argjson t "$2" --argjson v "$3" '(($e - $t) | fabs) <= 4 * ($v | sqrt)'
}
lk=$(jq -r '[.leaked[] | select(.frames[0].function == "leak_some") | .inuse_bytes] | add // 0' \
	"$tmp/s.json")
[ "$(within4 "$lk" "$(jq -n "$truth | .leak")" "$(jq -n "$truth | .leak_var")")" = true ]
check "leaked: leak_some's bytes within 4 sd" $? "tally $lk, truth $(jq -n "$truth | .leak")"
first=$(jq -r '.leaked[0].frames[0].function' "$tmp/s.json")
[ "$first" = leak_some ]
check "leaked: leak_some leaked most" $? "first: $first"
tmpn=$(jq -r '[.temporary[] | select(.frames[0].function == "churn_short") | .freed_within_1ms] | add // 0' \
	"$tmp/s.json")
[ "$(within4 "$tmpn" "$(jq -n "$truth | .churn")" "$(jq -n "$truth | .churn_var")")" = true ]
check "temporary: churn_short's blocks freed within 1 ms, within 4 sd" $? \
	"tally $tmpn, truth $(jq -n "$truth | .churn")"
first=$(jq -r '.temporary[0].frames[0].function' "$tmp/s.json")
[ "$first" = churn_short ]
check "temporary: churn_short first" $? "first: $first"
# every churned block lived microseconds: in the first bucket but for a
# preemption (2 % allowed: a loaded 2-core machine)
jq -e '.lifetimes[] | select(.group == "churn") |
	.lt_1ms > 0 and (.lt_10ms + .lt_100ms + .lt_1s + .lt_10s + .longer) <= 0.02 * .lt_1ms
	and .live == 0' "$tmp/s.json" >/dev/null
check "lifetimes: the churn group's blocks lived below 1 ms, none live" $? \
	"$(jq -c '.lifetimes' "$tmp/s.json")"
# build's kept tenth lives to the end; the rest lived from their
# allocation to tear_down (a few hundred ms at most: none past 10 s)
jq -e '.lifetimes[] | select(.group == "build") | .live > 0 and .longer == 0' \
	"$tmp/s.json" >/dev/null
check "lifetimes: build's freed blocks all below 10 s, its kept ones live" $? \
	"$(jq -c '.lifetimes' "$tmp/s.json")"

# A running process's growth: --since 1 counts the blocks sampled in the
# last second and still in use. Truth: the workload's own log of what it
# grew by, at its CLOCK_MONOTONIC; the window ends when tally reads it,
# between the workload's last line and the next (100 ms, 1 MB), and
# starts a second before. At rate 65536 a 10000-byte block is sampled with
# p = 0.1416 and counted 1/p: 1 MB a step has a standard error of 0.25 MB;
# 4 of them over the ten steps of a second, 3.1 MB, and a step either side.
"$TALLY" snapshot --rate 65536 -d 3 --since 1 -o "$tmp/g.json" -- "$WL" grow "$tmp/grow.log" \
	>/dev/null 2>"$tmp/g.err"
rc=$?
pkill -f "$WL grow" 2>/dev/null
end_ns=$(tail -n 1 "$tmp/grow.log" | cut -d' ' -f1)
truth=$(awk -v e="$end_ns" '{ t[NR] = $1; g[NR] = $2 } END {
	for (i = NR; i > 0 && t[i] > e - 1e9; i--) ; print g[NR] - g[i] }' "$tmp/grow.log")
got=$(jq -r '[.growing[] | select(.frames[0].function == "grow_step") | .recent_bytes] | add // 0' \
	"$tmp/g.json" 2>/dev/null)
[ $rc -eq 0 ] && [ -n "$truth" ] && [ "$truth" -gt 0 ] &&
	awk -v g="$got" -v t="$truth" 'BEGIN { d = g - t; if (d < 0) d = -d; exit !(d <= 3.1e6 + 2e6) }'
check "growing --since 1: grow_step's bytes of the last second, within 4 sd and a step" $? \
	"status $rc, tally $got, truth $truth: $(head -c 300 "$tmp/g.err")"
inuse=$(jq -r '[.growing[] | select(.frames[0].function == "grow_step") | .inuse_bytes] | add // 0' \
	"$tmp/g.json" 2>/dev/null)
[ "${inuse:-0}" -gt "${got:-0}" ]
check "growing: what it holds is more than the last second's" $? "in use $inuse, recent $got"
"$TALLY" snapshot --since 0 -- true >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -q "bad --since '0'" "$tmp/err"
check "a bad --since is refused in one line" $? "status $rc: $(cat "$tmp/err")"

# folded --value peak and pprof's peak_space say the same
"$TALLY" profile --format folded --value peak -o "$tmp/peak.folded" -- "$WL" 2>"$tmp/truth2" >/dev/null
rc=$?
check "profile --format folded --value peak" $rc "status $rc"
truth2=$(grep '^{' "$tmp/truth2")
fb=$(awk '/build_up/ { s += $NF } END { print s + 0 }' "$tmp/peak.folded")
ok=$(jq -n --argjson e "$fb" "$truth2 | ((\$e - .peak) | fabs) <= 4 * (.var | sqrt)")
[ "$ok" = true ]
check "the folded peak of build_up within 4 sd" $? "folded $fb, truth $(jq -n "$truth2 | .peak")"
"$TALLY" profile -o "$tmp/heap.pb.gz" -- "$WL" 2>"$tmp/truth3" >/dev/null
truth3=$(grep '^{' "$tmp/truth3")
pb=$("$PPROF" -top -unit=B -nodecount=200 -nodefraction=0 -sample_index=peak_space \
	"$tmp/heap.pb.gz" 2>/dev/null | awk '$NF == "build_up" { v = $1; sub(/B$/, "", v); print v }')
ok=$(jq -n --argjson e "${pb:-0}" "$truth3 | ((\$e - .peak) | fabs) <= 4 * (.var | sqrt)")
[ "$ok" = true ]
check "pprof -sample_index=peak_space: build_up within 4 sd" $? "pprof ${pb:-none}, truth $(jq -n "$truth3 | .peak")"
"$TALLY" profile --value bogus -o "$tmp/x" -- true >/dev/null 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && grep -q "want inuse, alloc or peak" "$tmp/err"
check "a bad --value is refused in one line" $? "status $rc: $(cat "$tmp/err")"

finish
