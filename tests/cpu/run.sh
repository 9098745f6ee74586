#!/usr/bin/env bash
# CPU by the thread's own clock (issue "real servers", item 14): a loopback
# echo pair (python3, a switch and a softirq each way per message) under
# tally snapshot -p PID -f; both processes asleep when the test reads their
# threads' /proc/PID/task/TID/schedstat before and after the load, so that
# tally's CPU for each must be what the kernel's clock says to the
# nanosecond (the old wall clock of the switches was 0.3-0.6 % off here,
# 8-9 % on a kernel that accounts irq time apart). TALLY=... runs another
# build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
. tests/lib.sh

need_root cpu
export LC_ALL=C
PY=$(command -v /usr/bin/python3 || command -v python3)

# clock PID: the sum of its threads' schedstat (ns on CPU)
clock() { cat /proc/"$1"/task/*/schedstat 2>/dev/null | awk '{s += $1} END {print s + 0}'; }

mkfifo "$tmp/go"
"$PY" tests/cpu/echo_pair.py "$tmp/go" "$tmp/done" 3 &
srv=$!
pids+=("$srv")
for _ in $(seq 100); do cli=$(pgrep -P "$srv"); [ -n "$cli" ] && break; sleep 0.05; done
pids+=("${cli:-0}")
"$TALLY" snapshot -p "$srv" -f -d 60 -v -o "$tmp/s.json" 2>"$tmp/err" &
t=$!
pids+=("$t")
wait_attached "$tmp/err"
b_srv=$(clock "$srv") b_cli=$(clock "${cli:-0}")
echo go >"$tmp/go"
wait_file "$tmp/done"
# the server writes DONE as the client has closed; then both go to their
# long sleep: read the clocks once every thread of both is in it
asleep() { # PID...: every thread blocked in nanosleep
	local p w
	for p in "$@"; do
		for w in /proc/"$p"/task/*/wchan; do
			grep -q nanosleep "$w" 2>/dev/null || return 1
		done
	done
}
slept="not both asleep in 10 s"
for _ in $(seq 200); do asleep "$srv" "${cli:-0}" && slept="both asleep" && break; sleep 0.05; done
a_srv=$(clock "$srv") a_cli=$(clock "${cli:-0}")
kill -INT "$t"
wait "$t"
rc=$?
for w in "srv $srv $b_srv $a_srv" "cli ${cli:-0} $b_cli $a_cli"; do
	read -r name pid b a <<<"$w"
	got=$(jq --argjson p "$pid" '[.processes[] | select(.target.pid == $p) | .groups[].cpu_ns] | add // 0' \
		"$tmp/s.json" 2>/dev/null)
	want=$((a - b))
	# 0.1 %: the old charge was off by 0.3 % at least in every run here
	check "CPU of the echo $name is its threads' schedstat over the load" \
		"$([ "$rc" -eq 0 ] && [ "$want" -gt 100000000 ] &&
			awk -v g="${got:-0}" -v w="$want" 'BEGIN {d = g - w; exit !(d * 1000 <= w && -d * 1000 <= w)}'
			echo $?)" "rc=$rc tally ${got:-none} ns, schedstat $want ns ($slept) $(head -c 300 "$tmp/err")"
done
finish
