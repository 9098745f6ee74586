#!/usr/bin/env bash
# kill -9 of tally at random instants, under load, must never harm what it
# traces (root). nginx on libtally_alloc (a master and two workers), nginx
# as it ships and python3's http.server (both on glibc's malloc) serve wrk
# throughout, while CHAOS_KILLS tallies (default 200) are started one after
# another, each killed with SIGKILL 0-400 ms after its start: while it
# loads, attaches to the tree (snapshot, top, record, serve with -f),
# injects libtally_interpose.so into a glibc process, follows it, or starts
# a command of its own. Afterwards every server process is the one that
# started and still serves, no worker died, wrk saw no socket error and no
# bad answer, and every started command finished its work with status 0.
# The last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
T=$PWD/$BUILD/tally
LIB=$PWD/$BUILD/libtally_alloc.so
KILLS=${CHAOS_KILLS:-200}
. tests/lib.sh
. tests/servers/servers.sh
need_root chaos
chmod 755 "$tmp"
if ! have_server nginx || ! have_server python; then
	skip "chaos (6 checks)" "nginx, wrk or python3 not installed (scripts/setup.sh installs them)" 6
	finish
	exit
fi

nginx_start "$tmp/ng" 18060 1 || { echo "nginx did not start"; exit 1; }
ng=$SRV_PID
ngw=$(children_of "$ng" | tr '\n' ' ')
nginx_start "$tmp/gl" 18061 0 || { echo "nginx (glibc) did not start"; exit 1; }
gl=$SRV_PID
glw=$(children_of "$gl" | tr '\n' ' ')
python_start "$tmp/py" 18062 || { echo "python3 http.server did not start"; exit 1; }
py=$SRV_PID

# wrk in 5 s rounds on each server while $tmp/loading exists
touch "$tmp/loading"
load_loop() { # PORT CONNS
	local i=0
	while [ -e "$tmp/loading" ]; do
		wrk_load "$tmp/wrk.$1.$i" "$1" 5 "$2"
		i=$((i + 1))
	done
}
load_loop 18060 8 &
l1=$!
load_loop 18061 8 &
l2=$!
load_loop 18062 2 &
l3=$!
pids+=("$l1" "$l2" "$l3")

# one tally, killed at a random instant of its life
started=0
refused=0
one() { # I
	local i=$1 w d=5 wait_ms=400
	# one in two ends by itself first, so that some kills land as it detaches
	[ $((i / 8 % 2)) -eq 1 ] && d=0.2
	# tally needs about 200 ms before it starts a command of its own
	[ $((i % 8)) -eq 7 ] && wait_ms=1500
	case $((i % 8)) in
	0) exec "$T" snapshot -p "$ng" -f -d "$d" -o "$tmp/out.json" ;;
	1) exec "$T" top -b -p "$ng" -f -i 100 -n 50 ;;
	2) exec "$T" record -p "$ng" -f -d 5 -o "$tmp/out.trace" ;;
	3) exec "$T" serve -p "$ng" -f --listen 127.0.0.1:18063 ;;
	4) exec "$T" snapshot -p "$py" --inject -d "$d" -o "$tmp/inj.json" ;;
	5)
		w=$(echo "$glw" | tr ' ' '\n' | sed -n "$((i / 8 % 2 + 1))p")
		exec "$T" snapshot -p "$w" --inject -d "$d" -o "$tmp/inj2.json"
		;;
	6) exec "$T" profile -p "$(echo "$ngw" | cut -d' ' -f1)" -d 5 -o "$tmp/out.pb.gz" ;;
	7)
		# a command of tally's own: it must finish its work whatever
		# happens to tally (its marker file written, status 0)
		exec "$T" snapshot -o "$tmp/start.json" -- sh -c \
			': >"$1.started"; head -c 2000000 /dev/urandom | sha256sum >"$1.tmp" && mv "$1.tmp" "$1"' \
			sh "$tmp/done.$i"
		;;
	esac >/dev/null 2>>"$tmp/tally.err" &
	local tp=$!
	sleep "$(awk -v r=$((RANDOM % wait_ms)) 'BEGIN { printf "%.3f", r / 1000 }')"
	kill -9 "$tp" 2>/dev/null
	wait "$tp" 2>/dev/null
}

for i in $(seq 0 $((KILLS - 1))); do
	one "$i"
	[ $((i % 8)) -eq 7 ] && started=$((started + 1))
done
refused=$(grep -c 'records its calls already\|already traced' "$tmp/tally.err")
rm -f "$tmp/loading"
wait "$l1" "$l2" "$l3"

# the started commands: each one that began (a tally killed before it
# started the command started nothing) writes its marker at the end; some
# may still be at work (the kills do not wait for them): their markers are
# waited for, 60 s at most in all
count_missing() {
	missing=0
	began=0
	for i in $(seq 7 8 $((KILLS - 1))); do
		[ -e "$tmp/done.$i.started" ] || continue
		began=$((began + 1))
		[ -s "$tmp/done.$i" ] || missing=$((missing + 1))
	done
	[ "$missing" -eq 0 ]
}
for _ in $(seq 600); do count_missing && break; sleep 0.1; done
stuck=$(ps -eo pid,stat,args | awk '$2 ~ /^[Tt]/ && /sha256sum|urandom|sh -c/' | head -n 5)
check "chaos: every command tally started finished its work ($began of $started began, none stopped)" \
	"$([ $missing -eq 0 ] && [ -z "$stuck" ]; echo $?)" "$missing without their marker; stopped: $stuck"

check "chaos: nginx (preloaded): the master and both workers are the ones that started" \
	"$(alive "$ng" $ngw && [ "$(children_of "$ng" | sort | tr '\n' ' ')" = "$(echo $ngw | tr ' ' '\n' | sort | tr '\n' ' ')" ]; echo $?)" \
	"master $ng workers now: $(children_of "$ng" | tr '\n' ' ') were: $ngw; $(nginx_died "$tmp/ng")"
check "chaos: nginx (glibc, injected): the master and both workers are the ones that started" \
	"$(alive "$gl" $glw && [ -z "$(nginx_died "$tmp/gl")" ]; echo $?)" \
	"workers now: $(children_of "$gl" | tr '\n' ' ') were: $glw; $(nginx_died "$tmp/gl")"
check "chaos: python3 http.server (injected) alive and serving" \
	"$(alive "$py" && curl -sf -o /dev/null --max-time 5 http://127.0.0.1:18062/; echo $?)" ""
bad=$(for f in "$tmp"/wrk.*; do wrk_clean "$f" || echo "$f: $(grep -E 'Socket|Non-2xx' "$f")"; done)
check "chaos: wrk saw no socket error and no bad answer in any round ($(ls "$tmp"/wrk.* | wc -l) rounds)" \
	"$([ -z "$bad" ]; echo $?)" "$bad"
# after the last kill, a tally injects python3 (no pause needed: every
# killed tally was reaped, its lock and probes gone with it, and a dead
# tally's recording still in place is taken over)
"$T" snapshot -p "$py" --inject -d 1 -o "$tmp/last.json" 2>"$tmp/last.err"
check "chaos: a tally after the last kill injects python3 and ends exact or flagged" \
	"$([ $? -eq 0 ] && [ -z "$(exact_or_flagged "$tmp/last.json" "$tmp/last.err")" ]; echo $?)" \
	"$(head -c 300 "$tmp/last.err") $(exact_or_flagged "$tmp/last.json" "$tmp/last.err")"
echo "info: $KILLS tallies killed with SIGKILL; $refused of them refused as another tally was still there"
kill -QUIT "$ng" "$gl"
kill -TERM "$py"
finish
