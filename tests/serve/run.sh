#!/usr/bin/env bash
# Integration tests of `tally serve` (root): /metrics in the Prometheus text
# format, with HELP and TYPE for every family, and figures equal to the
# workload's own and to `tally snapshot`'s; the final figures kept after the
# target exits; clear errors for a bad address and a port in use. Each check
# prints "ok", "FAIL" or "skip"; the last line is "N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY_BIN:-$PWD/$BUILD/tally}
WL=$PWD/$BUILD/tests/tracer_workload
GPU_WL=$PWD/$BUILD/tests/gpu/gpu_workload
FAKE=$PWD/$BUILD/tests/fake_cuda/libcuda.so.1
. tests/lib.sh
. tests/snapshot/heap_check.sh

# a free TCP port on the loopback, from the kernel's ephemeral range
free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Scrapes until what a test waits for is there, never a sleep that bets on
# a tick having passed: a loaded machine took longer than the 1.5 s the
# test slept, and a check failed (or, at the kill below, lost what the
# workload's threads held). A wrong figure never comes: 60 s, then the
# check says what the last scrape had.
scrape_until() { # URL FILE CMD...: scrape into FILE (headers in FILE.head) until CMD succeeds
	local url=$1 file=$2
	shift 2
	for _ in $(seq 600); do
		curl -s -g -D "$file.head" -o "$file" "$url" && "$@" && return 0
		sleep 0.1
	done
	return 1
}
stats_are() { # WANT FILE: the scrape's Stats terms are WANT
	[ "$(scrape_stats "$2")" = "$1" ]
}
figures_are() { # WANT-STATS WANT-GROUPS FILE: and each group's live bytes
	stats_are "$1" "$3" && [ "$(scrape_live "$3" | jq -cS 'del(.root)' 2>&1)" = "$2" ]
}

need_root serve

# the eleven Stats terms of a scrape, as the snapshot names them
SCRAPE_STATS='
	/^tally_stats_(mapped|live|rounding|cache|span_free|returned|virgin|hysteresis|segment_overhead)_bytes / {
		n = $1; sub(/^tally_stats_/, "", n); sub(/_bytes$/, "", n); printf "\"%s\": %s,", n, $2 }
	/^tally_stats_large_objects / { printf "\"large_count\": %s,", $2 }
	/^tally_stats_spans_assigned / { printf "\"spans_assigned\": %s,", $2 }'
scrape_stats() { # FILE: {term: value} from a scrape
	echo "{$(awk "$SCRAPE_STATS" "$1" | sed 's/,$//')}" | jq -cS . 2>&1
}
scrape_live() { # FILE: {group: live bytes}
	sed -n 's/^tally_group_live_bytes{id="[0-9]*",group="\(.*\)"} \(-\{0,1\}[0-9]*\)$/"\1": \2,/p' "$1" |
		tr -d '\n' | sed 's/^/{/; s/,$/}/' | jq -cS . 2>&1
}

# 1. a started workload that allocates, reports its own figures and waits
port=$(free_port)
TALLY_ALLOC_PURGE_MS=3600000 "$TALLY" serve --listen "127.0.0.1:$port" -- "$WL" wait "$tmp/wait.json" 2>"$tmp/serve.err" &
spid=$!
pids+=("$spid")
wait_line "$tmp/wait.json" '"pid"' 60
wpid=$(jq -r .pid "$tmp/wait.json" 2>/dev/null)
[ -n "$wpid" ] && pids+=("$wpid")
# until a tick (500 ms) after the figures were written has served them
scrape_until "http://127.0.0.1:$port/metrics" "$tmp/m1.txt" figures_are \
	"$(jq -cS '.stats' "$tmp/wait.json" 2>&1)" "$(jq -cS '.groups' "$tmp/wait.json" 2>&1)" "$tmp/m1.txt"
curl -s -D "$tmp/m1.head" -o /dev/null "http://127.0.0.1:$port/metrics"
rc=$?
check "GET /metrics: 200, text/plain; version=0.0.4" \
	"$([ $rc -eq 0 ] && grep -q '^HTTP/1.1 200' "$tmp/m1.head" && grep -qi '^Content-Type: text/plain; version=0.0.4' "$tmp/m1.head"; echo $?)" \
	"curl rc=$rc $(head -c 300 "$tmp/m1.head") $(head -c 300 "$tmp/serve.err")"
# every family has HELP and TYPE before its samples; counters end in _total
shape=$(awk '
	/^# HELP / { help[$3] = 1; next }
	/^# TYPE / { type[$3] = $4; if (!help[$3]) { print "TYPE before HELP: " $3; bad = 1 }
		if (($4 == "counter") != ($3 ~ /_total$/)) { print "counter name: " $3; bad = 1 } next }
	/^#/ { print "odd comment: " $0; bad = 1; next }
	{ name = $1; sub(/\{.*/, "", name)
	  if (!(name in type)) { print "no TYPE for " name; bad = 1 }
	  if ($0 !~ /^[a-zA-Z_:][a-zA-Z0-9_:]*(\{[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*"(,[a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*")*\})? -?[0-9.e+]+$/) {
		print "bad line: " $0; bad = 1 } n++ }
	END { if (!n) { print "no samples"; bad = 1 } exit bad }' "$tmp/m1.txt" 2>&1)
check "every line well formed, every family with HELP and TYPE" "$([ -z "$shape" ]; echo $?)" "$shape"
want=$(jq -cS '.stats' "$tmp/wait.json" 2>&1)
got=$(scrape_stats "$tmp/m1.txt")
check "tally_stats_*: every Stats term, equal to the workload's own figures" \
	"$([ "$want" = "$got" ]; echo $?)" "want $want got $got"
want=$(jq -cS '.groups' "$tmp/wait.json" 2>&1)
got=$(scrape_live "$tmp/m1.txt" | jq -cS 'del(.root)' 2>&1)
check "tally_group_live_bytes: each group's, equal to the workload's own count" \
	"$([ "$want" = "$got" ]; echo $?)" "want $want got $got"
# the scrape (tally's replay) and the workload's own (alloc/stats_walk.h)
# both follow the allocator's own accounting, and one wrong there (a term
# moved in its counters and in the record it sends) passes both: against
# the kernel's view instead (the workload sits in pause(), its purger held off)
scrape_stats "$tmp/m1.txt" >"$tmp/m1.stats"
heap_check "${wpid:-0}" "$tmp/m1.stats"
check "tally_stats_*: true to the kernel's view (mapped the allocator's mappings in smaps, the identity, Rss)" \
	"$([ "$hc" = ok ]; echo $?)" "$hc"
missing=$(for m in 'tally_stats_balanced 1' 'tally_exact 1' 'tally_target_running 1' \
	'tally_group_cpu_seconds_total{id="1",group="parse"} ' 'tally_group_allocations_total{' \
	'tally_group_frees_total{' 'tally_group_allocated_bytes_total{' 'tally_gpu_kernels_launched_total 0' \
	'tally_gpu_device_bytes 0' 'tally_events_lost_total 0' 'tally_events_received_total '; do
	grep -qF "$m" "$tmp/m1.txt" || echo "$m"
done)
check "the other families: balanced, exact, CPU, allocations, GPU, events" \
	"$([ -z "$missing" ]; echo $?)" "missing: $missing"
code_root=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$port/")
code_post=$(curl -s -o /dev/null -w '%{http_code}' -X POST -d x=1 "http://127.0.0.1:$port/metrics")
check "404 elsewhere, 405 for POST" "$([ "$code_root" = 404 ] && [ "$code_post" = 405 ]; echo $?)" \
	"/ $code_root, POST $code_post"
# a request line with NUL bytes (issue 12 item 16): libmicrohttpd took it for an empty
# line and waited 10 s; 400 at once now, and a request sent a byte at a time still served
nul=$(python3 - "$port" <<'PY'
import socket, sys, time
def ask(chunks, gap=0.0):
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=15)
    t = time.time()
    for c in chunks:
        s.sendall(c)
        time.sleep(gap)
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            break
        out += b
        if b"\r\n\r\n" in out and b"Content-Length" in out:
            break
    return "%s %.1f" % (out.split(b" ")[1].decode() if b" " in out else "none", time.time() - t)
print(ask([b"\x00\x01\x02garbage\r\n\r\n"]), ask([b"GET /me\x00trics HTTP/1.1\r\n\r\n"]),
      ask([bytes([c]) for c in b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n"], 0.005))
PY
)
read -r c1 t1 c2 t2 c3 _ <<<"$nul"
check "a request line with NUL bytes: 400 within 2 s; a request a byte at a time: 200" \
	"$([ "$c1" = 400 ] && [ "$c2" = 400 ] && [ "$c3" = 200 ] && awk -v a="${t1:-99}" -v b="${t2:-99}" 'BEGIN { exit !(a < 2 && b < 2) }'; echo $?)" "$nul"

# the same process under `tally snapshot`, once serve let go of it (SIGTERM:
# exit 0, the target runs on): the scrape's figures are the snapshot's
kill -TERM "$spid"
wait "$spid"
rc=$?
timeout 60 "$TALLY" snapshot -p "${wpid:-0}" -d 1 >"$tmp/snap.json" 2>"$tmp/snap.err"
want=$(jq -cS '.stats | del(.accounted, .balanced, .predicted_resident, .measured_resident)' "$tmp/snap.json" 2>&1)
got=$(scrape_stats "$tmp/m1.txt")
check "SIGTERM: exit 0, the target runs on; the scrape's Stats equal tally snapshot's" \
	"$([ $rc -eq 0 ] && kill -0 "${wpid:-0}" 2>/dev/null && [ "$want" = "$got" ]; echo $?)" \
	"rc=$rc want $want got $got $(head -c 200 "$tmp/snap.err")"
want=$(jq -cS '[.groups[] | {(.name): .live_bytes}] | add' "$tmp/snap.json" 2>&1)
got=$(scrape_live "$tmp/m1.txt")
check "the scrape's group live bytes equal tally snapshot's" "$([ "$want" = "$got" ]; echo $?)" \
	"want $want got $got"
# the late attach reads the allocator's memory through stats_walk.h, as the
# workload's own figures did: against the kernel's view too
jq .stats "$tmp/snap.json" >"$tmp/snap.stats" 2>&1
heap_check "${wpid:-0}" "$tmp/snap.stats"
check "tally snapshot's late attach: true to the kernel's view (smaps' sizes, the identity, Rss, measured_resident)" \
	"$([ "$hc" = ok ]; echo $?)" "$hc"
[ -n "$wpid" ] && kill "$wpid" 2>/dev/null

# 2. a target that exits: its final figures stay served until SIGINT
port=$(free_port)
TALLY_ALLOC_PURGE_MS=3600000 "$TALLY" serve --listen "127.0.0.1:$port" -i 100 -- "$WL" wait "$tmp/w2.json" 2>"$tmp/s2.err" &
spid=$!
pids+=("$spid")
wait_line "$tmp/w2.json" '"pid"' 60
wpid=$(jq -r .pid "$tmp/w2.json" 2>/dev/null)
want=$(jq -cS '.stats' "$tmp/w2.json" 2>&1)
# a SIGKILL'd workload hands nothing over at exit (SIGTERM would: its
# handler's _exit is the allocator's): the records its threads still hold
# reach tally at a tick (-i 100): killed once a scrape has them, and scraped
# again once tally has seen the exit
scrape_until "http://127.0.0.1:$port/metrics" "$tmp/m2.txt" stats_are "$want" "$tmp/m2.txt"
kill -KILL "${wpid:-0}" 2>/dev/null
scrape_until "http://127.0.0.1:$port/metrics" "$tmp/m2.txt" grep -q '^tally_target_running 0$' "$tmp/m2.txt"
got=$(scrape_stats "$tmp/m2.txt")
check "after the target exits: still served, tally_target_running 0, the final Stats, not exact (killed: no hand-over), said on stderr" \
	"$(grep -q '^tally_target_running 0$' "$tmp/m2.txt" && grep -q '^tally_exact 0$' "$tmp/m2.txt" &&
		grep -q '^tally_inexact_processes{reason="no_exit_handover"} 1$' "$tmp/m2.txt" &&
		[ "$want" = "$got" ] && grep -q 'exited\|killed' "$tmp/s2.err"; echo $?)" \
	"want $want got $got $(head -c 300 "$tmp/s2.err")"
t0=$(date +%s%N)
kill -INT "$spid"
wait "$spid"
rc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
check "SIGINT then: exit 0 within 2 s" "$([ $rc -eq 0 ] && [ $ms -lt 2000 ]; echo $?)" "rc=$rc ${ms}ms"

# 3. -d ends serving; IPv6 on the loopback (every kernel here has it: a
#    machine without it is counted, not passed). Scraped once it answers
#    (it slept 0.7 s after the workload's file, which a slow start could
#    push past -d); -d 5 leaves a loaded machine's start room.
port=$(free_port)
if ! python3 -c 'import socket; socket.socket(socket.AF_INET6).bind(("::1", 0))' 2>/dev/null; then
	skip "--listen [::1]:PORT" "no IPv6 loopback (::1) on this machine"
else
	TALLY_ALLOC_PURGE_MS=3600000 "$TALLY" serve --listen "[::1]:$port" -d 5 -- "$WL" wait "$tmp/w3.json" 2>"$tmp/s3.err" &
	spid=$!
	pids+=("$spid")
	scrape_until "http://[::1]:$port/metrics" "$tmp/m3.txt" grep -q '^tally_stats_live_bytes ' "$tmp/m3.txt"
	code=$(sed -n '1s/^HTTP\/1.1 \([0-9]*\).*/\1/p' "$tmp/m3.txt.head")
	wait "$spid"
	rc=$?
	check "--listen [::1]:PORT serves; -d 5 ends it with exit 0" \
		"$([ "$code" = 200 ] && grep -q '^tally_stats_live_bytes ' "$tmp/m3.txt" && [ $rc -eq 0 ]; echo $?)" \
		"code=$code rc=$rc $(head -c 200 "$tmp/s3.err")"
	wait_line "$tmp/w3.json" '"pid"' 60
	kill "$(jq -r .pid "$tmp/w3.json" 2>/dev/null)" 2>/dev/null
fi

# 4. GPU figures through the fake driver, after the workload exits (both
#    built by `make test-build`: missing, the check is counted, not dropped)
if ! [ -x "$GPU_WL" ] || ! [ -r "$FAKE" ]; then
	skip "GPU figures through the fake driver" "$GPU_WL or $FAKE not built (make test-build)"
else
	port=$(free_port)
	TALLY_GPU=on "$TALLY" serve --listen "127.0.0.1:$port" -i 100 -- "$GPU_WL" run "$tmp/gpu.json" \
		</dev/null >/dev/null 2>"$tmp/s4.err" &
	spid=$!
	pids+=("$spid")
	wait_line "$tmp/gpu.json.end" . 60
	# until tally has seen the exit (it slept 1 s)
	scrape_until "http://127.0.0.1:$port/metrics" "$tmp/m4.txt" grep -q '^tally_target_running 0$' "$tmp/m4.txt"
	want=$(jq -r '.instance | "\(.kernels_launched) \(.graph_launches) \(.failed_launches) \(.back_pressure_rejections) \(.yield_count) \(.device_bytes_allocated)"' "$tmp/gpu.json.end" 2>&1)
	got=$(for m in tally_gpu_kernels_launched_total tally_gpu_graph_launches_total tally_gpu_failed_launches_total \
		tally_back_pressure_rejections_total tally_yields_total tally_gpu_device_bytes; do
		sed -n "s/^$m //p" "$tmp/m4.txt"; done | tr '\n' ' ' | sed 's/ $//')
	check "GPU: the process's launches, refusals, yields and device bytes equal the workload's" \
		"$([ "$want" = "$got" ] && grep -q '^tally_group_gpu_kernels_launched_total{id=.*group="train"} ' "$tmp/m4.txt"; echo $?)" \
		"want $want got $got"
	kill -TERM "$spid"
	wait "$spid"
fi

# 5. bad addresses and a port in use: one line, and no CMD started
bad() { # NAME WANT-STATUS CMD...
	local name=$1 want=$2
	shift 2
	rm -f "$tmp/started"
	timeout 30 "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
	local rc=$?
	check "$name: exit $want, one line, CMD not started" \
		"$([ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && [ ! -s "$tmp/bad.out" ] && [ ! -e "$tmp/started" ]; echo $?)" \
		"rc=$rc err=$(head -c 300 "$tmp/bad.err")"
}
for a in nonsense 127.0.0.1 127.0.0.1:99999 127.0.0.1:0 '[::1]9464' localhost:9464 '::1:9464' '1.2.3:80' '127.0.0.1: 9464' '127.0.0.1:0x10'; do
	bad "--listen '$a'" 2 "$TALLY" serve --listen "$a" -- touch "$tmp/started"
done
python3 -c 'import socket, time, sys
s = socket.socket(); s.bind(("127.0.0.1", 0)); s.listen(1)
print(s.getsockname()[1], flush=True); time.sleep(30)' >"$tmp/busy.port" &
bpid=$!
pids+=("$bpid")
wait_file "$tmp/busy.port"
bport=$(cat "$tmp/busy.port")
bad "a port in use" 1 "$TALLY" serve --listen "127.0.0.1:$bport" -- touch "$tmp/started"
check "a port in use: the message says so" "$(grep -q 'in use' "$tmp/bad.err"; echo $?)" "$(cat "$tmp/bad.err")"
kill "$bpid" 2>/dev/null

finish
