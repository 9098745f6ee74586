#!/usr/bin/env bash
# The malloc family's contract (tests/conformance/malloc_contract.c) under
# glibc and under libtally_alloc side by side: the same binary must pass both.
# Then a real program that relies on it: redis-server preloaded (its sds
# strings write the tail malloc_usable_size gives, and realloc must keep it;
# before, it read its own configuration back corrupt and exited 1) serves a
# short redis-benchmark.
#
# usage: BUILD=build tests/conformance/run.sh
#
# Checks:
#   contract-glibc      every check passes plain (the contract is glibc's)
#   contract-tally      every check passes with libtally_alloc preloaded
#   contract-preloaded  the preloaded run was libtally_alloc's
#   own-memory          a program that keeps nothing, with the purger started,
#                       has 0 live bytes (tests/conformance/own_memory.c)
#   own-memory-snapshot the same under tally snapshot: live 0, exact (root)
#   redis-starts        redis-server preloaded answers PING on port 18300
#   redis-mapped        libtally_alloc is in redis-server's maps
#   redis-benchmark     SET, GET, LPUSH and LRANGE_100, 20000 requests each
#   redis-exit          SHUTDOWN NOSAVE ends it with status 0
# Prints "N passed, M failed, K skipped"; redis-server missing: its checks
# skipped (a failure under CI, tests/lib.sh).
set -uo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
. tests/lib.sh

bin=$BUILD/tests/conformance/malloc_contract
lib=$(realpath "$BUILD/libtally_alloc.so")
port=18300
if [ ! -x "$bin" ] || [ ! -f "$lib" ]; then
	echo "conformance: build first: make BUILD=$BUILD test-build" >&2
	exit 2
fi

"$bin" >"$tmp/glibc.out" 2>&1
check contract-glibc $? "$(grep -m3 FAIL "$tmp/glibc.out")"
LD_PRELOAD=$lib "$bin" >"$tmp/tally.out" 2>&1
check contract-tally $? "$(grep -m3 FAIL "$tmp/tally.out")"
grep -q '^# allocator: libtally_alloc' "$tmp/tally.out"
check contract-preloaded $? "$(head -1 "$tmp/tally.out")"

# The allocator's own blocks (the purger thread's DTV) are no live bytes of
# the program, in its own figures and in tally's (which preloads it)
own=$BUILD/tests/conformance/own_memory
LD_PRELOAD=$lib "$own" >"$tmp/own.out" 2>&1
check own-memory $? "$(cat "$tmp/own.out")"
if [ "$(id -u)" -eq 0 ] && [ -x "$BUILD/tally" ]; then
	"$BUILD/tally" snapshot -o "$tmp/own.json" -- "$own" >"$tmp/own.out" 2>&1
	jq -e '.exact and .stats.live == 0 and .stats_inprocess.live == 0' "$tmp/own.json" >/dev/null 2>&1
	check own-memory-snapshot $? "$(jq -c '{exact, live: .stats.live, own: .stats_inprocess.live}' \
		"$tmp/own.json" 2>&1) $(head -c 200 "$tmp/own.out")"
else
	skip own-memory-snapshot "needs root and $BUILD/tally"
fi

if ! command -v redis-server >/dev/null || ! command -v redis-benchmark >/dev/null; then
	skip "redis-starts, redis-mapped, redis-benchmark, redis-exit" \
		"redis-server or redis-benchmark is not installed: scripts/setup.sh installs them" 4
	finish
	exit
fi

LD_PRELOAD=$lib redis-server --port $port --bind 127.0.0.1 --save '' --appendonly no \
	--dir "$tmp" >"$tmp/redis.log" 2>&1 &
redis=$!
pids+=("$redis")
up=1
for _ in $(seq 100); do
	redis-cli -p $port ping 2>/dev/null | grep -q PONG && { up=0; break; }
	kill -0 "$redis" 2>/dev/null || break
	sleep 0.05
done
check redis-starts $up "$(tail -3 "$tmp/redis.log")"
grep -q libtally_alloc "/proc/$redis/maps" 2>/dev/null
check redis-mapped $? "libtally_alloc is not in redis-server's maps"
timeout 60 redis-benchmark -p $port -q -n 20000 -t set,get,lpush,lrange_100 \
	>"$tmp/bench.out" 2>&1
n=0
for t in SET GET LPUSH 'LRANGE_100 (first 100 elements)'; do
	tr '\r' '\n' <"$tmp/bench.out" | grep -aq "^ *$t: [0-9.]* requests per second" && n=$((n + 1))
done
check redis-benchmark $((n == 4 ? 0 : 1)) "$n of 4 tests finished: $(tail -c 300 "$tmp/bench.out")"
redis-cli -p $port shutdown nosave >/dev/null 2>&1
timeout 10 tail --pid="$redis" -f /dev/null
wait "$redis"
check redis-exit $? "$(tail -3 "$tmp/redis.log")"
finish
