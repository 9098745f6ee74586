#!/usr/bin/env bash
# --inject against its injector's death at any instant: kill -9 at random
# points of the injection of a process that checks its own integrity
# (tests/inject/chaos.c: blocks' contents, general and vector registers,
# its sleeps), and of python3 -m http.server under wrk; the process must
# run on unharmed, and a fresh --inject must work after. Then the release
# of the interposer when tally ends for any reason: Ctrl-C during the
# injection, and a kill -9 whose interposer's thread is stopped (taken over).
#
# CHAOS_KILLS (default 150): kills of inject_load itself (tally's injection
# without its BPF side: milliseconds a round); CHAOS_TALLY_KILLS (8) and
# CHAOS_HTTP_KILLS (6): kills of tally itself; CHAOS_FRESH (100): fresh
# processes whose first injections are killed inside the first dlopen.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
need_root inject-chaos

B=${BUILD:-build}
T=$B/tally
K=$B/tests/inject_chaos_kill
LIB=$PWD/$B/libtally_interpose.so
KILLS=${CHAOS_KILLS:-150}
TALLY_KILLS=${CHAOS_TALLY_KILLS:-8}
HTTP_KILLS=${CHAOS_HTTP_KILLS:-6}
FRESH=${CHAOS_FRESH:-100}
PORT=18123

wait_line() { # FILE PATTERN
	for _ in $(seq 1000); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.01; done
	return 1
}

threads_named() { # PID NAME: how many of its threads have that name
	grep -lx "$2" /proc/"$1"/task/*/comm 2>/dev/null | wc -l
}

wait_thread() { # PID NAME COUNT SECONDS: until COUNT threads have that name
	local n=$(($4 * 50))
	for _ in $(seq "$n"); do
		[ "$(threads_named "$1" "$2")" -eq "$3" ] && return 0
		sleep 0.02
	done
	return 1
}

target_start() {
	"$B/tests/inject_chaos" >"$tmp/t.out" 2>&1 &
	tp=$!
	pids+=("$tp")
	wait_line "$tmp/t.out" '^ready'
}

# The target alive, with no breach of its integrity; else say so once.
target_ok() { # CONTEXT
	kill -0 "$tp" 2>/dev/null && ! grep -q BREACH "$tmp/t.out" && return 0
	wait "$tp" 2>/dev/null
	echo "target died or broke ($1): status $?, $(tail -1 "$tmp/t.out")" >>"$tmp/deaths"
	target_start
	return 1
}

target_end() { # NAME: SIGTERM, its own final check, exit 0
	kill -TERM "$tp"
	wait "$tp"
	local rc=$?
	[ "$rc" -eq 0 ] && grep -q '^ok ' "$tmp/t.out"
	check "$1" $? "rc $rc: $(tail -2 "$tmp/t.out" | tr '\n' ' ')"
}

# 1. inject_load killed at random points: 0..30 ms after it seized the
# process (the whole injection, dlopen's and the start's) and, one round in
# 8, 0..300 ms after its start; a fresh process every 20 rounds, whose
# injection loads the library.
: >"$tmp/deaths"
target_start
during=0 broken=0
for i in $(seq 20 20 "$KILLS"); do
	"$K" "$tp" 30000 "$i" --load "$LIB" 20 >"$tmp/rounds" 2>>"$tmp/load.err"
	during=$((during + $(grep -c '^during' "$tmp/rounds")))
	# never seized in 30 s, or failed other than for the missing tracer
	broken=$((broken + $(awk '($1 == "before" && $4 > 0) || ($1 == "ended" && $2 == 2)' \
		"$tmp/rounds" | wc -l)))
	target_ok "inject_load killed, rounds to $i: $(tail -2 "$tmp/rounds" | tr '\n' ' ')"
	kill -TERM "$tp"
	wait "$tp" 2>/dev/null
	grep -q '^ok ' "$tmp/t.out" || echo "rounds to $i: $(tail -1 "$tmp/t.out")" >>"$tmp/deaths"
	target_start
done
[ ! -s "$tmp/deaths" ]
check "$KILLS kills of the injection at random points ($during in it): the process unharmed" $? \
	"$(head -5 "$tmp/deaths")"
[ "$broken" -eq 0 ]
check "after each kill the next injection seizes the process and loads" $? \
	"$broken failed: $(sort "$tmp/load.err" | uniq -c | head -5)"

# 1b. A fresh process each time, its first injections killed 0..3 ms after
# the seizure: in the first dlopen, which loads the interposer and its
# libgcc_s. The next injection must not stop the thread in the loader's
# system calls, where that dlopen goes on (the start, called through the
# library half loaded, was a SIGSEGV in 1 to 3 processes in 100).
: >"$tmp/fresh"
fp=
suite_cleanup() { [ -z "$fp" ] || kill -9 "$fp" 2>/dev/null; }
for i in $(seq "$FRESH"); do
	"$B/tests/inject_chaos" >"$tmp/f.out" 2>&1 &
	fp=$!
	wait_line "$tmp/f.out" '^ready'
	"$K" "$fp" 3000 "$i" --load "$LIB" 4 >"$tmp/rounds" 2>/dev/null
	if kill -0 "$fp" 2>/dev/null && ! grep -q BREACH "$tmp/f.out"; then
		kill -TERM "$fp"
		wait "$fp" 2>/dev/null
		fp=
		grep -q '^ok ' "$tmp/f.out" && continue
	fi
	wait "$fp" 2>/dev/null
	rc=$? fp=
	echo "process $i: status $rc, $(tail -1 "$tmp/f.out"); $(tr '\n' ' ' <"$tmp/rounds")" \
		>>"$tmp/fresh"
done
[ ! -s "$tmp/fresh" ]
check "$FRESH fresh processes, each first injection killed in its dlopen: all unharmed" $? \
	"$(wc -l <"$tmp/fresh") harmed: $(head -3 "$tmp/fresh")"

# 1c. The same rule without a kill: a main thread held inside the loader's
# own system call (a dlopen of a FIFO, under the loader's lock) is no safe
# point. The injection waits its 2 s for one and says so; the dlopen, let
# go, fails as it should and the process runs on.
mkfifo "$tmp/fifo"
"$B/tests/inject_chaos" --dlopen "$tmp/fifo" >"$tmp/d.out" 2>&1 &
fp=$!
wait_line "$tmp/d.out" '^loading'
for _ in $(seq 200); do
	[ "$(cut -d' ' -f1 /proc/"$fp"/syscall 2>/dev/null)" = 257 ] && break # openat
	sleep 0.01
done
"$T" snapshot -p "$fp" --inject -d 1 -o "$tmp/d.json" 2>"$tmp/d.err"
trc=$?
exec 3>"$tmp/fifo" # the loader's open returns; its read sees EOF at the close
exec 3>&-
wait_line "$tmp/d.out" '^loaded: none'
ok=$?
kill -TERM "$fp"
wait "$fp"
rc=$? fp=
[ "$ok" -eq 0 ] && [ "$rc" -eq 0 ] && [ "$trc" -ne 0 ] && [ ! -e "$tmp/d.json" ] &&
	[ "$(wc -l <"$tmp/d.err")" -eq 1 ] && grep -q 'no safe point' "$tmp/d.err"
check "a main thread inside the loader's system call is no safe point: refused in one line, unharmed" $? \
	"rc $rc, tally's $trc: $(cat "$tmp/d.err") $(tail -2 "$tmp/d.out" | tr '\n' ' ')"

# 2. tally itself killed 0..60 ms after it seized the process
for i in $(seq "$TALLY_KILLS"); do
	out=$("$K" "$tp" 60000 "$i" -- "$T" snapshot -p "$tp" --inject -d 30 -o /dev/null \
		2>>"$tmp/tally.err")
	target_ok "tally killed, round $i: $out"
done
[ ! -s "$tmp/deaths" ]
check "$TALLY_KILLS kills of tally --inject during the injection: the process unharmed" $? \
	"$(head -5 "$tmp/deaths")"
wait_thread "$tp" tally-inject 0 2
check "after them the interposer has let go" $? "$(threads_named "$tp" tally-inject) left"
"$T" snapshot -p "$tp" --inject -d 0.5 -o "$tmp/f.json" 2>"$tmp/f.err"
rc=$?
[ "$rc" -eq 0 ] && jq -e '.exact and .target.attach == "injected"' "$tmp/f.json" >/dev/null
check "then a fresh --inject works: exact" $? "rc $rc: $(cat "$tmp/f.err")"

# 3. Ctrl-C as tally injects and just after (0..5 ms after it let go of
# the thread, while the start runs or as it has ended), and kill -9 just
# after: the interposer lets go within a tick or so (it waited 10 s for a
# tracer it had not seen up yet, refusing every --inject meanwhile: a tally
# gone within 20 ms of the start), and the next --inject is not refused.
for how in "2 seizure" "2 release" "9 release"; do
	set -- $how
	wait_thread "$tp" tally-inject 0 2
	if [ "$2" = seizure ]; then
		out=$(CHAOS_SIGNAL=$1 "$K" "$tp" 1 1 -- "$T" snapshot -p "$tp" --inject -d 30 \
			-o /dev/null 2>"$tmp/i.err")
	else
		out=$(CHAOS_SIGNAL=$1 CHAOS_FROM_RELEASE=1 "$K" "$tp" 5000 1 -- "$T" snapshot \
			-p "$tp" --inject -d 30 -o /dev/null 2>"$tmp/i.err")
	fi
	t0=$(date +%s%N)
	wait_thread "$tp" tally-inject 0 3
	ok=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	[ "$ok" -eq 0 ] && [ "$ms" -lt 1000 ]
	check "signal $1 at the injection's $2 ($out): the interposer lets go in $ms ms" $? \
		"$(threads_named "$tp" tally-inject) thread(s) left: $(cat "$tmp/i.err")"
done
"$T" snapshot -p "$tp" --inject -d 0.3 -o "$tmp/j.json" 2>"$tmp/j.err"
check "then --inject at once is not refused" $? "$(cat "$tmp/j.err")"
target_ok "Ctrl-C"
check "Ctrl-C and kill -9 at the injection: the process unharmed" $? "$(cat "$tmp/deaths")"

# 4. kill -9 of tally while the interposer's thread cannot run (stopped,
# starved) to see its semaphore fall: the next tally, which holds the
# target's lock, takes the recording over instead of being refused.
wait_thread "$tp" tally-inject 0 2
"$T" snapshot -p "$tp" --inject -d 30 -o /dev/null 2>"$tmp/a.err" &
ap=$!
wait_thread "$tp" tally-inject 1 10
ft=$(grep -lx tally-inject /proc/"$tp"/task/*/comm | head -1 | cut -d/ -f5)
"$K" --freeze "$ft" 4000 &
fp=$!
# the thread held (ptrace stop: state t) before tally is killed
for _ in $(seq 500); do grep -q '^State:[[:space:]]*t' /proc/"$tp"/task/"$ft"/status 2>/dev/null && break; sleep 0.02; done
# Stopped in its sleep (clock_nanosleep, 230), it holds nothing, and the
# take-over is exact. Stopped in a tick (a loaded machine), it holds the
# tick's lock for its 4 s, so the new thread cannot hand over the end's
# records within tally's 2 s: exact, or said so (inject_end_uncut) and
# nothing else.
asleep=$([ "$(cut -d' ' -f1 /proc/"$tp"/task/"$ft"/syscall 2>/dev/null)" = 230 ] && echo 1)
kill -9 "$ap"
wait "$ap" 2>/dev/null
"$T" snapshot -p "$tp" --inject -d 0.3 -o "$tmp/b.json" 2>"$tmp/b.err"
rc=$?
if [ -n "$asleep" ]; then
	[ "$rc" -eq 0 ] && jq -e '.exact' "$tmp/b.json" >/dev/null
	check "kill -9 with the interposer's thread stopped asleep: the next --inject takes over, exact" \
		$? "rc $rc: $(cat "$tmp/b.err")"
else
	[ "$rc" -eq 0 ] && jq -e '.exact or .inexact_codes == ["inject_end_uncut"]' \
		"$tmp/b.json" >/dev/null
	check "kill -9 with the interposer's thread stopped in a tick: the next --inject takes over, exact or said uncut" \
		$? "rc $rc: $(cat "$tmp/b.err")"
fi
wait "$fp"
wait_thread "$tp" tally-inject 0 2
check "and the stopped thread ends once it runs again" $? \
	"$(threads_named "$tp" tally-inject) left"
target_end "the chaos target exits 0, its own checks passed"

# 5. python3 -m http.server under wrk, tally killed during its injections
mkdir -p "$tmp/www"
head -c 4096 /dev/urandom >"$tmp/www/f"
python3 -m http.server "$PORT" --bind 127.0.0.1 --directory "$tmp/www" \
	>"$tmp/py.out" 2>&1 &
pp=$!
pids+=("$pp")
for _ in $(seq 100); do
	curl -sf -o /dev/null "http://127.0.0.1:$PORT/f" && break
	sleep 0.05
done
n0=$(grep -c 'GET /f' "$tmp/py.out")
wrk -t1 -c4 -d60s "http://127.0.0.1:$PORT/f" >"$tmp/wrk.out" 2>&1 &
wp=$!
pids+=("$wp")
# wrk's first answers in the server's log: the load is on before the kills
for _ in $(seq 200); do [ "$(grep -c 'GET /f' "$tmp/py.out")" -gt "$n0" ] && break; sleep 0.05; done
: >"$tmp/py.deaths"
for i in $(seq "$HTTP_KILLS"); do
	out=$("$K" "$pp" 60000 "$i" -- "$T" snapshot -p "$pp" --inject -d 30 -o /dev/null \
		2>>"$tmp/pyt.err")
	kill -0 "$pp" 2>/dev/null || echo "round $i ($out)" >>"$tmp/py.deaths"
done
wait_thread "$pp" tally-inject 0 2
"$T" snapshot -p "$pp" --inject -d 0.5 -o "$tmp/p.json" 2>"$tmp/p.err"
rc=$?
kill -INT "$wp"
wait "$wp"
kill -0 "$pp" 2>/dev/null && [ ! -s "$tmp/py.deaths" ]
check "python3 http.server under wrk: $HTTP_KILLS kills of tally --inject, it serves on" $? \
	"$(cat "$tmp/py.deaths") $(tail -3 "$tmp/py.out")"
[ "$rc" -eq 0 ] && jq -e '.target.attach == "injected"' "$tmp/p.json" >/dev/null
check "python3 http.server: then a fresh --inject works" $? "rc $rc: $(cat "$tmp/p.err")"
# a request past wrk's 2 s (a timeout) is a slow one, on a loaded machine
! grep -qE 'Socket errors: connect [1-9]|read [1-9]|write [1-9]|Non-2xx' "$tmp/wrk.out" &&
	grep -q 'Requests/sec' "$tmp/wrk.out"
check "wrk: no connection refused or cut, no failed request" $? "$(tail -6 "$tmp/wrk.out")"
kill "$pp"
wait "$pp" 2>/dev/null

finish
