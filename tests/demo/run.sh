#!/usr/bin/env bash
# `tally demo` without a terminal, as `make demo` runs it on a fresh machine:
# text frames with every group, then the snapshot JSON. Root only; the last
# line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh
need_root demo

timeout 60 "$BUILD/tally" demo -s 2 -i 500 </dev/null >"$tmp/out" 2>"$tmp/err"
rc=$?
check "tally demo without a terminal runs to the end" "$rc" "rc=$rc $(head -c 300 "$tmp/err")"
frames=$(grep -c '^--- frame ' "$tmp/out")
check "it prints text frames" "$([ "$frames" -ge 2 ]; echo $?)" "$frames frames"
groups_ok=0
for g in ingest decode render layout cache infer; do
	grep -Eq "^ +[0-9]+ $g " "$tmp/out" || groups_ok=1
done
check "every demo group is in the frames" "$groups_ok" "$(grep -A9 '^--- frame 1' "$tmp/out")"
sed -n '/^{/,$p' "$tmp/out" >"$tmp/snap.json"
check "then the snapshot: exact, balanced, GPU calls counted through the fake driver" \
	"$(jq -e '.exact and .stats.balanced and .target.cuda == "driver" and ([.groups[] | select(.name == "infer") | .instance.kernels_launched] | .[0] > 0) and .instance.yield_count > 0' "$tmp/snap.json" >/dev/null; echo $?)" \
	"$(jq -c '[.exact, .target, .instance]' "$tmp/snap.json" 2>&1 | head -c 400)"
# every frame: a torn cut (one thread's records in before another's) is
# never called exact; a frame is either balanced or says it is not exact
timeout 60 "$BUILD/tally" top -b -n 40 -i 200 -- "$BUILD/demo_workload" </dev/null >"$tmp/frames" 2>/dev/null
lies=$(awk '/^events:/ { ex = /figures exact/ } /^identity:/ { if ((/NOT balanced/ || / -[0-9]/) && ex) n++ } END { print n + 0 }' "$tmp/frames")
check "top -b frames through the demo: none says figures exact with a negative term or the identity NOT balanced" \
	"$([ "$lies" -eq 0 ] && [ "$(grep -c '^--- frame' "$tmp/frames")" -ge 5 ]; echo $?)" \
	"$lies frame(s); $(grep -m1 -B3 'NOT balanced' "$tmp/frames")"
check "the live view's last figures equal the allocator's own (views read pending records without double counting)" \
	"$(jq -e '(.stats | del(.accounted, .balanced, .predicted_resident, .measured_resident)) == .stats_inprocess' "$tmp/snap.json" >/dev/null; echo $?)" \
	"$(jq -c '{live: .stats.live, own: .stats_inprocess.live}' "$tmp/snap.json" 2>&1)"

finish
