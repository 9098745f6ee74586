#!/usr/bin/env bash
# `tally serve --all`, the machine's agent (root), scraped by Debian's real
# Prometheus: processes on tally's libraries started before the agent and
# after it, one in its own mount and PID namespaces (its libraries on a
# tmpfs the host does not have); PromQL's answers for each process's
# Stats and groups equal the figures the process counted itself; promtool
# finds nothing to say about the exposition; a process's series go stale
# when it ends; counters never go back across the agent's restart; 300
# short-lived processes later the agent's memory and series are back
# within a stated bound; heap profiles per process and for all, read by the
# real pprof. Each check prints "ok", "FAIL" or "skip"; the last line is
# "N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
WL=$PWD/$BUILD/tests/tracer_workload
LIBS="$PWD/$BUILD/libtally_alloc.so $PWD/$BUILD/libtally.so"
PPROF=$PWD/$BUILD/pprof
. tests/lib.sh

need_root serve_all
for t in prometheus promtool; do
	if ! command -v $t >/dev/null; then
		skip "serve --all with Prometheus" "$t not installed (scripts/setup.sh installs it)" 14
		echo "$passed passed, $failed failed, $skipped skipped"
		exit 1
	fi
done

free_port() {
	python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
aport=$(free_port)
pport=$(free_port)
AGENT=127.0.0.1:$aport

# The agent follows this suite's workloads alone (--comm): whatever else the
# machine runs on tally's libraries stays out of the counts checked here.
start_agent() { # LOG [ARGS...]: the agent, following at once (no --min-age wait)
	local log=$1
	shift
	"$TALLY" serve --all --comm tracer_workload --comm sleep --comm treetop --min-age 0 -i 250 \
		--listen "$AGENT" "$@" 2>>"$log" &
	agent=$!
	pids+=("$agent")
	for _ in $(seq 100); do curl -sf "http://$AGENT/metrics" -o /dev/null && return 0; sleep 0.1; done
	return 1
}
start_wl() { # FILE: the workload on tally's libraries; it writes its own figures to FILE and waits
	TALLY_ALLOC_PURGE_MS=3600000 LD_PRELOAD="$LIBS" "$WL" wait "$1" >/dev/null 2>&1 &
	pids+=($!)
	wait_line "$1" '"pid"' 60
}
metric() { # FILE NAME PID: NAME's sample for PID in a scrape
	awk -v n="$2" -v p="pid=\"$3\"" 'index($0, n "{" p ",") == 1 { print $NF }' "$1"
}
# PromQL through the HTTP API: "labelvalue value" lines, sorted
promql() { # QUERY [LABEL]
	curl -s -G "http://127.0.0.1:$pport/api/v1/query" --data-urlencode "query=$1" |
		jq -r --arg l "${2:-group}" '.data.result[] | "\(.metric[$l] // "") \(.value[1])"' 2>/dev/null | sort
}
# the workload's own figures as the same lines
own_groups() { jq -r '.groups | to_entries[] | "\(.key) \(.value)"' "$1" | sort; }
own_stats() { jq -r '.stats | to_entries[] | select(.key != "large_count" and .key != "spans_assigned") | "\(.key) \(.value)"' "$1" | sort; }
prom_stats() { # PID: the Stats terms PromQL has for it, named as the workload names them
	promql "{__name__=~\"tally_stats_.*_bytes\",pid=\"$1\"}" __name__ | sed 's/^tally_stats_//; s/_bytes / /' | sort
}
until_equal() { # SECONDS WANT CMD...: until CMD prints WANT; what it printed last on stdout
	local secs=$1 want=$2 got=""
	shift 2
	for _ in $(seq $((secs * 4))); do
		got=$("$@")
		[ "$got" = "$want" ] && break
		sleep 0.25
	done
	printf '%s' "$got"
}

# 1. one process before the agent, one in its own namespaces, one after.
# (The namespaced one's libtally.so is the one the workload links by path:
# the host's, seen from inside; its allocator is on the tmpfs alone.)
start_wl "$tmp/before.json"
before=$(jq -r .pid "$tmp/before.json" 2>/dev/null)

cat >"$tmp/inner.sh" <<INNER
#!/bin/bash
mount -t tmpfs tally-test /mnt || exit 1
mkdir /mnt/lib && cp $PWD/$BUILD/libtally_alloc.so /mnt/lib/ || exit 1
exec env TALLY_ALLOC_PURGE_MS=3600000 LD_PRELOAD=/mnt/lib/libtally_alloc.so "$WL" wait "$tmp/inner.json"
INNER
chmod +x "$tmp/inner.sh"
unshare --mount --pid --fork --propagation private "$tmp/inner.sh" >/dev/null 2>"$tmp/inner.err" &
upid=$!
pids+=("$upid")
wait_line "$tmp/inner.json" '"pid"' 60
inner=""
for p in $(cat "/proc/$upid/task/$upid/children" 2>/dev/null); do inner=$p; done
check "the namespaced workload runs (pid 1 inside, $inner outside)" \
	"$([ "$(jq -r .pid "$tmp/inner.json" 2>/dev/null)" = 1 ] && [ -n "$inner" ]; echo $?)" \
	"$(cat "$tmp/inner.err" "$tmp/inner.json" 2>&1 | head -c 300)"
pids+=("$inner")

cat >"$tmp/prom.yml" <<YML
global:
  scrape_interval: 1s
  scrape_timeout: 1s
scrape_configs:
  - job_name: tally
    static_configs:
      - targets: ['$AGENT']
YML
prometheus --config.file="$tmp/prom.yml" --storage.tsdb.path="$tmp/tsdb" \
	--web.listen-address="127.0.0.1:$pport" --log.level=warn >"$tmp/prom.log" 2>&1 &
pids+=($!)

start_agent "$tmp/agent.err"
check "the agent serves /metrics" $? "$(head -c 300 "$tmp/agent.err")"
start_wl "$tmp/after.json"
after=$(jq -r .pid "$tmp/after.json" 2>/dev/null)

# Prometheus up and scraping the agent
up=$(until_equal 60 "tally 1" promql 'up{job="tally"}' job)
check "Prometheus scrapes the agent (up == 1)" "$([ "$up" = "tally 1" ]; echo $?)" \
	"up: '$up' $(tail -c 300 "$tmp/prom.log")"

for w in before:$before:before.json inner:$inner:inner.json after:$after:after.json; do
	IFS=: read -r name pid file <<<"$w"
	want=$(own_groups "$tmp/$file")
	got=$(until_equal 60 "$want" promql "tally_group_live_bytes{pid=\"$pid\",group!=\"root\"}")
	check "PromQL: each group's live bytes of the process started $name the agent ($pid) equal its own count" \
		"$([ -n "$want" ] && [ "$got" = "$want" ]; echo $?)" "want [$want] got [$got]"
	want=$(own_stats "$tmp/$file")
	got=$(until_equal 30 "$want" prom_stats "$pid")
	check "PromQL: every Stats term of the process started $name the agent equals its own" \
		"$([ -n "$want" ] && [ "$got" = "$want" ]; echo $?)" "want [$want] got [$got]"
done
# CPU: charged by the agent's one sched_switch program for every session
# (loader_cpu_follow): a busy process's seconds grow as the kernel's do. A
# shell's busy loop, which allocates next to nothing: a process allocating
# flat out tears most cuts, and a view keeps its last figures then (issue:
# exact cuts on a busy process), which a 4 s window would see as CPU late.
cp "$(command -v bash)" "$tmp/treetop"
LD_PRELOAD="$LIBS" "$tmp/treetop" -c 'while :; do :; done' &
busy=$!
pids+=("$busy")
cpu_pair() { # tally's CPU seconds of $busy, the kernel's (utime + stime)
	local t
	t=$(curl -s "http://$AGENT/metrics" | awk -v p="pid=\"$busy\"" 'index($0, "tally_process_cpu_seconds_total{" p ",") == 1 { print $NF }')
	echo "${t:-0} $(awk -v hz="$(getconf CLK_TCK)" '{ print ($14 + $15) / hz }' "/proc/$busy/stat")"
}
until_equal 30 x sh -c "curl -s http://$AGENT/metrics | grep -q 'tally_process_cpu_seconds_total{pid=\"$busy\"' && echo x" >/dev/null
sleep 1
read -r t0 k0 <<<"$(cpu_pair)"
sleep 8
read -r t1 k1 <<<"$(cpu_pair)"
kill "$busy"
ratio=$(awk -v a="$t0" -v b="$t1" -v c="$k0" -v d="$k1" 'BEGIN { if (d - c <= 0) print 0; else printf "%.2f", (b - a) / (d - c) }')
# Each reading of tally's is up to a tick old (-i 250), the kernel's not;
# and runs here spread from 0.82 to 1.05 over 4 to 8 s, a live view's CPU
# late by up to a second at times (not understood yet: see the DESIGN
# §12's last paragraph). The bounds catch a process not charged at all (0)
# or charged twice (2).
check "a busy process's CPU seconds grow as the kernel counts them (ratio $ratio over 8 s)" \
	"$(awk -v r="$ratio" 'BEGIN { exit !(r >= 0.7 && r <= 1.3) }'; echo $?)" "tally $t0 -> $t1, kernel $k0 -> $k1"

curl -s "http://$AGENT/metrics" >"$tmp/m1.txt"
ctr=$(awk -v p="pid=\"$inner\"" 'index($0, "tally_process_info{" p ",") == 1' "$tmp/m1.txt")
check "the namespaced process is labelled with its cgroup (tally_process_info)" \
	"$([ -n "$ctr" ] && echo "$ctr" | grep -q 'cgroup="/'; echo $?)" "$ctr"
lint=$(promtool check metrics <"$tmp/m1.txt" 2>&1)
check "promtool check metrics: nothing to say" "$([ -z "$lint" ]; echo $?)" "$(echo "$lint" | head -5)"

# 2. heap profiles: one process's (?pid=), every process's with their labels
curl -s -o "$tmp/one.pb.gz" -w '%{http_code}' "http://$AGENT/debug/pprof/heap?pid=$before" >"$tmp/one.code"
"$PPROF" -raw "$tmp/one.pb.gz" >"$tmp/one.raw" 2>&1
check "/debug/pprof/heap?pid=PID: 200, a profile the real pprof reads, that process's samples alone" \
	"$([ "$(cat "$tmp/one.code")" = 200 ] && grep -q "pid:\[$before\]" "$tmp/one.raw" &&
		! grep -E 'pid:\[[0-9]+\]' "$tmp/one.raw" | grep -vq "pid:\[$before\]"; echo $?)" \
	"code $(cat "$tmp/one.code"): $(head -c 300 "$tmp/one.raw")"
curl -s -o "$tmp/all.pb.gz" "http://$AGENT/debug/pprof/allocs"
"$PPROF" -raw "$tmp/all.pb.gz" >"$tmp/all.raw" 2>&1
check "/debug/pprof/allocs: every followed process's samples, labelled pid and comm" \
	"$(for p in "$before" "$inner" "$after"; do grep -q "pid:\[$p\]" "$tmp/all.raw" || exit 1; done
		grep -q 'comm:\[tracer_workload\]' "$tmp/all.raw"; echo $?)" "$(head -c 400 "$tmp/all.raw")"
c1=$(curl -s -o /dev/null -w '%{http_code}' "http://$AGENT/debug/pprof/heap?pid=abc")
c2=$(curl -s -o /dev/null -w '%{http_code}' "http://$AGENT/debug/pprof/heap?pid=999999999")
check "?pid=abc is 400, a process not followed 404" "$([ "$c1$c2" = 400404 ]; echo $?)" "got $c1 and $c2"

# 3. a process that ends: its series go stale (absent from instant queries)
kill -9 "$after"
gone=$(until_equal 30 "" promql "tally_process_live_bytes{pid=\"$after\"}" pid)
check "a process that ended: its series stale in Prometheus" "$([ -z "$gone" ]; echo $?)" "still: $gone"

# 4. the agent restarted: its counters of a process it follows again do not
#    go back (the allocator's own counts, read at the attach)
t0=$(promql 'tally_agent_start_time_seconds' job)
kill -TERM "$agent"
wait "$agent" 2>/dev/null
rc=$?
check "SIGTERM: the agent ends with 0, its processes unharmed" \
	"$([ $rc -eq 0 ] && kill -0 "$before" && kill -0 "$inner"; echo $?)" "rc=$rc"
sleep 1
start_agent "$tmp/agent2.err"
t1=$(until_equal 60 "x" sh -c "v=\$(curl -s -G 'http://127.0.0.1:$pport/api/v1/query' --data-urlencode 'query=tally_group_live_bytes{pid=\"$before\"}' | jq -r '.data.result | length'); [ \"\$v\" -gt 0 ] && [ \"\$(curl -s -G 'http://127.0.0.1:$pport/api/v1/query' --data-urlencode 'query=tally_agent_start_time_seconds' | jq -r '.data.result[0].value[1]')\" != \"${t0#* }\" ] && echo x")
sleep 3 # a few scrapes of the new agent
resets=$(promql "sum(resets(tally_group_allocations_total{pid=~\"$before|$inner\"}[10m])) + sum(resets(tally_group_allocated_bytes_total{pid=~\"$before|$inner\"}[10m]))" job)
check "counters across the agent's restart: no reset (resets() == 0)" \
	"$([ "$t1" = x ] && [ "$resets" = " 0" ]; echo $?)" "restart seen: '$t1', resets: '$resets'"
neg=$(promql "rate(tally_group_allocations_total[1m]) < 0 or rate(tally_process_cpu_seconds_total[1m]) < 0" pid)
check "no negative rate anywhere" "$([ -z "$neg" ]; echo $?)" "$neg"

# 5. 300 short-lived processes (sleep 2 on tally's libraries, 25 at a time):
#    the agent's memory and series come back
series_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_series" { print $2 }'; }
rss_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_resident_bytes" { print $2 }'; }
sessions_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_sessions" { print $2 }'; }
attached_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_attaches_total" { print $2 }'; }
gone_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_attach_failures_total{reason=\"gone\"}" { print $2 }'; }
until_equal 30 2 sessions_of >/dev/null
s0=$(series_of)
r0=$(rss_of)
a0=$(attached_of)
g0=$(gone_of)
short=()
for wave in $(seq 12); do
	for i in $(seq 25); do
		LD_PRELOAD="$LIBS" sleep 2 &
		short+=($!)
	done
	sleep 1.2
done
wait "${short[@]}" 2>/dev/null
wait_quiet=$(until_equal 60 2 sessions_of)
sleep 0.5 # a tick past the last end
s1=$(series_of)
r1=$(rss_of)
a1=$(attached_of)
g1=$(gone_of)
# each attach loads the BPF objects (~0.2 s here): a process of 2 s is
# followed when the agent gets to it in time, counted "gone" when not
echo "# 300 short-lived processes: $((a1 - a0)) followed, $((g1 - g0)) ended during their attach; series $s0 -> $s1; agent RSS $r0 -> $r1 bytes"
check "300 short-lived processes: some followed to their end ($((a1 - a0)))" \
	"$([ "$wait_quiet" = 2 ] && [ $((a1 - a0)) -ge 8 ]; echo $?)" "sessions '$wait_quiet', attached $a0 -> $a1"
check "... then the series as before (bounded: $s0)" "$([ "$s1" = "$s0" ]; echo $?)" "$s0 -> $s1"
check "... and the agent's RSS within 16 MiB of before" \
	"$([ -n "$r0" ] && [ -n "$r1" ] && [ "$r1" -le $((r0 + 16 * 1048576)) ]; echo $?)" "$r0 -> $r1"
lint=$(curl -s "http://$AGENT/metrics" | promtool check metrics 2>&1)
check "promtool check metrics after it all: nothing to say" "$([ -z "$lint" ]; echo $?)" "$(echo "$lint" | head -5)"
for p in "$before" "$inner"; do
	kill -0 "$p" 2>/dev/null || check "process $p unharmed" 1 "it is gone"
done

# 6. a tree found whole by the agent's first look (a parent and the two
#    children it started): one session, the children in its tree, not roots
#    of their own that would read the same records; and --top 1: one
#    process's series, the other summed (gauges only)
kill -TERM "$agent"
wait "$agent" 2>/dev/null
LD_PRELOAD="$LIBS" "$tmp/treetop" -c 'sleep 600 & sleep 600 & wait' &
tree=$!
pids+=("$tree")
for _ in $(seq 50); do [ "$(cat /proc/$tree/task/*/children 2>/dev/null | wc -w)" -ge 2 ] && break; sleep 0.1; done
start_agent "$tmp/agent3.err" --top 1
procs_of() { curl -s "http://$AGENT/metrics" | awk '$1 == "tally_agent_processes" { print $2 }'; }
sessions=$(until_equal 30 3 sessions_of)
nprocs=$(until_equal 30 5 procs_of)
check "a tree found in one look: one session for it (3 in all), its children in it (5 processes)" \
	"$([ "$sessions" = 3 ] && [ "$nprocs" = 5 ] && ! grep -q 'another tracer' "$tmp/agent3.err"; echo $?)" \
	"sessions $sessions, processes $nprocs; $(head -c 300 "$tmp/agent3.err")"
curl -s "http://$AGENT/metrics" >"$tmp/m3.txt"
top=$(grep -cE '^tally_process_live_bytes\{pid="[0-9]+"' "$tmp/m3.txt")
other=$(awk '/^tally_process_live_bytes\{pid="",comm="other"/ { print $2 }' "$tmp/m3.txt")
rest=$(awk '/^tally_process_live_bytes\{pid="[0-9]/ { top = $2 } /^tally_container_live_bytes/ { all += $2 } END { print all - top }' "$tmp/m3.txt")
gpids=$(sed -n 's/^tally_group_live_bytes{pid="\([0-9]*\)".*/\1/p' "$tmp/m3.txt" | sort -u | wc -l)
check "--top 1: one process's series, the other's live bytes summed as comm=\"other\" ($other)" \
	"$([ "$top" = 1 ] && [ -n "$other" ] && [ "$other" = "$rest" ] && [ "$gpids" = 1 ]; echo $?)" \
	"per-process $top, other '$other', rest '$rest', group pids $gpids"
check "--top 1: no counter summed over the other processes" \
	"$(! grep -q '_total{pid="",comm="other"' "$tmp/m3.txt"; echo $?)" "$(grep '_total{pid=""' "$tmp/m3.txt" | head -3)"

# 7. a second agent: every process taken already, each one line and a count
port2=$(free_port)
"$TALLY" serve --all --comm tracer_workload --min-age 0 -i 250 --listen "127.0.0.1:$port2" -d 4 2>"$tmp/agent4.err" &
a4=$!
pids+=("$a4")
busy_of() { curl -s "http://127.0.0.1:$port2/metrics" | awk '$1 == "tally_agent_attach_failures_total{reason=\"busy\"}" { print ($2 >= 2) ? "2+" : $2 }'; }
busy=$(until_equal 20 2+ busy_of)
wait "$a4"
rc=$?
kill -9 "$tree" $(cat /proc/"$tree"/task/*/children 2>/dev/null)
check "a second agent: the processes another tally follows are counted busy, one line each, exit 0" \
	"$([ "$busy" = 2+ ] && [ $rc -eq 0 ] && [ "$(grep -c 'another tally is tracing' "$tmp/agent4.err")" -ge 2 ]; echo $?)" \
	"busy '$busy' rc=$rc $(head -c 300 "$tmp/agent4.err")"

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
