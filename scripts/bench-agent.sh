#!/usr/bin/env bash
# make bench-agent: what `tally serve --all` costs the machine it watches.
# Each followed process has a session of its own, with its own
# sched_switch program: every context switch of the machine runs one per
# session. Measured with bench/pingpong (a byte through pipes between two
# processes pinned to one CPU: two switches a round trip), with 0, 4, 16
# and 64 sessions (as many `sleep` processes on libtally_alloc, followed
# with --comm sleep), in interleaved rounds; and the agent's own RSS and
# CPU at each count. Prints a table and the cost a switch per session.
set -u
cd "$(dirname "$0")/.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
PP=$PWD/$BUILD/pingpong
ROUNDS=${BENCH_ROUNDS:-3}
COUNTS=${BENCH_SESSIONS:-"0 4 16 64"}
[ "$(id -u)" -eq 0 ] || { echo "bench-agent: needs root (BPF)" >&2; exit 1; }
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
sleepers=()
cleanup() { kill "${sleepers[@]}" 2>/dev/null; [ -n "${agent:-}" ] && kill "$agent" 2>/dev/null; }
trap cleanup EXIT
max=0
for n in $COUNTS; do [ "$n" -gt "$max" ] && max=$n; done
for _ in $(seq "$max"); do
	LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so sleep 3600 &
	sleepers+=($!)
done
metric() { curl -s "http://127.0.0.1:$port/metrics" | awk -v m="$1" '$1 == m { print $2 }'; }
pp() { for _ in 1 2 3; do taskset -c 0 "$PP" 100000; done | sort -n | sed -n 2p; }
declare -A sum rss
for r in $(seq "$ROUNDS"); do
	for n in $COUNTS; do
		agent=""
		if [ "$n" -gt 0 ]; then
			"$TALLY" serve --all --comm sleep --min-age 0 --max-procs "$n" \
				--listen "127.0.0.1:$port" 2>/dev/null &
			agent=$!
			for _ in $(seq 600); do [ "$(metric tally_agent_sessions)" = "$n" ] && break; sleep 0.2; done
			sleep 1
		fi
		us=$(pp)
		if [ -n "$agent" ]; then
			rss[$n]=$(metric tally_agent_resident_bytes)
			kill "$agent"
			wait "$agent" 2>/dev/null
			agent=""
		fi
		sum[$n]=$(awk -v a="${sum[$n]:-0}" -v b="$us" 'BEGIN { print a + b }')
		echo "round $r, $n sessions: $us us a round trip"
	done
done
base=$(awk -v a="${sum[0]:-0}" -v r="$ROUNDS" 'BEGIN { print a / r }')
echo
printf '%-10s %14s %12s %22s\n' sessions "us/roundtrip" "agent RSS" "ns a switch a session"
for n in $COUNTS; do
	avg=$(awk -v a="${sum[$n]}" -v r="$ROUNDS" 'BEGIN { print a / r }')
	per="-"
	[ "$n" -gt 0 ] && per=$(awk -v a="$avg" -v b="$base" -v n="$n" 'BEGIN { printf "%.0f", (a - b) * 1000 / 2 / n }')
	printf '%-10s %14.2f %12s %22s\n' "$n" "$avg" "${rss[$n]:-"-"}" "$per"
done
