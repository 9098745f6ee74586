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
