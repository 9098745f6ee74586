#!/usr/bin/env bash
# Integration tests of `tally record` against the real kernel, the real
# allocator and real processes (root): the trace is valid JSON (jq), has a
# counter for every Stats term, B/E balanced on every thread, final counters
# equal to the snapshot's figures, and stays valid after SIGINT or SIGTERM
# mid-run; hostile names come back byte for byte. Each check prints "ok" or
# "FAIL"; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
WL=$PWD/$BUILD/tests/tracer_workload
DEMO=$PWD/$BUILD/demo_workload
GPU_WL=$PWD/$BUILD/tests/gpu/gpu_workload
FAKE=$PWD/$BUILD/tests/fake_cuda/libcuda.so.1
. tests/lib.sh



need_root record

# jq programs over a trace
STATS='["mapped","live","rounding","cache","span_free","returned","virgin","hysteresis","segment_overhead","large_count","spans_assigned"]'
# the last value of each stats.* counter, as {term: value}
LAST_STATS='[.traceEvents[] | select(.ph == "C" and (.name | startswith("stats.")))]
	| group_by(.name) | map({(.[-1].name | ltrimstr("stats.")): (.[-1].args | to_entries[0].value)}) | add'
# the last value of each group's live_bytes counter, as {group: bytes}
LAST_LIVE='[.traceEvents[] | select(.ph == "C" and (.name | test("^group .* live_bytes$")))]
	| group_by(.name) | map({(.[-1].name | ltrimstr("group ") | rtrimstr(" live_bytes")): .[-1].args.bytes}) | add'
# B/E on each thread: never more E than B, and as many of each; in file order
# and in ts order (the viewers sort by ts; sort_by is stable)
BALANCED='def ok: reduce .[] as $e ({d: 0, bad: false};
		.d += (if $e.ph == "B" then 1 else -1 end) | .bad = (.bad or .d < 0)) | (.bad | not) and .d == 0;
	[.traceEvents[] | select(.ph == "B" or .ph == "E")] as $s
	| ($s | group_by(.tid) | all(ok)) and ($s | sort_by(.ts) | group_by(.tid) | all(ok))'

# jq -ecS FILTER FILE: nothing, and a failure, when FILE is missing, empty or
# not JSON, or the result is null: two sides that both failed to read it
# would otherwise print the same error and compare equal
jqs() { # FILTER FILE [JQ-OPTION...]
	local filter=$1 file=$2
	shift 2
	[ -s "$file" ] && jq -ecS "$@" "$filter" "$file" 2>/dev/null
}

# NAME TRACE WAIT_JSON: each group's last live_bytes counter in the recording
# TRACE is the workload's own count of its groups' live bytes in WAIT_JSON
groups_match() {
	local got want
	got=$(jqs "$LAST_LIVE | del(.root)" "$2")
	want=$(jqs '.groups' "$3")
	check "$1" "$([ -n "$want" ] && [ "$want" = "$got" ]; echo $?)" "want ${want:-(none)} got ${got:-(none)}"
}

# the resident anonymous memory of PID in kB (its purge shows there)
rss_anon() { awk '/^RssAnon:/ { print $2 }' /proc/"$1"/status 2>/dev/null; }

every_term() { # FILE: every Stats term has a counter event
	jq -e --argjson t "$STATS" '[.traceEvents[] | select(.ph == "C") | .name] as $n
		| all($t[]; . as $x | $n | index("stats." + $x) != null)' "$1" >/dev/null
}

# 1. a started workload to its exit: threads in nested groups
timeout 120 "$TALLY" record -o "$tmp/t1.json" -- "$WL" run "$tmp/run.json" >"$tmp/r1.out" 2>"$tmp/r1.err"
rc=$?
check "record -- CMD: exit 0, valid JSON with traceEvents" \
	"$([ $rc -eq 0 ] && jq -e '(.traceEvents | type) == "array" and .otherData.exact' "$tmp/t1.json" >/dev/null; echo $?)" \
	"rc=$rc $(head -c 300 "$tmp/r1.err") $(head -c 200 "$tmp/t1.json")"
check "record -- CMD: a counter event for every Stats term" "$(every_term "$tmp/t1.json"; echo $?)" \
	"$(jq -c '[.traceEvents[] | select(.ph == "C") | .name] | unique' "$tmp/t1.json" 2>&1 | head -c 400)"
check "record -- CMD: B/E balanced on every thread, slices named for groups" \
	"$(jq -e "($BALANCED) and ([.traceEvents[] | select(.ph == \"B\") | .name] | unique == [\"export\", \"index\", \"index.hot\", \"parse\"])" "$tmp/t1.json" >/dev/null; echo $?)" \
	"$(jq -c '[.traceEvents[] | select(.ph == "B" or .ph == "E") | [.tid, .ph, .name]]' "$tmp/t1.json" 2>&1 | head -c 400)"
got=$(jqs "$LAST_STATS" "$tmp/t1.json")
want=$(jqs '.otherData.stats_inprocess' "$tmp/t1.json")
check "record -- CMD: the last Stats counters equal the allocator's own figures at exit" \
	"$([ -n "$want" ] && [ "$want" = "$got" ]; echo $?)" "want ${want:-(none)} got ${got:-(none)}"
want=$(jqs '.groups' "$tmp/run.json")
got=$(jqs "$LAST_LIVE | del(.root)" "$tmp/t1.json")
check "record -- CMD: each group's last live_bytes equals the workload's own count" \
	"$([ -n "$want" ] && [ "$want" = "$got" ]; echo $?)" "want $want got $got"
check "record -- CMD: process and thread names, nothing on stdout" \
	"$(jq -e '[.traceEvents[] | select(.ph == "M") | .name] | index("process_name") != null and index("thread_name") != null' "$tmp/t1.json" >/dev/null && [ ! -s "$tmp/r1.out" ]; echo $?)" \
	"$(head -c 200 "$tmp/r1.out")"

# 2. the end of a recording of a process that runs on, idle (SIGINT once the
#    workload says it is idle: on a loaded machine a fixed -d may come while
#    it still works): the final counters against the workload's own file,
#    written at idle (its own count of each group's bytes, and the
#    allocator's own figures); a later `tally snapshot` would be tally
#    against tally, wrong the same way as the recording
# (not under timeout(1): it would pass the SIGINT to the workload's group too)
TALLY_ALLOC_PURGE_MS=3600000 "$TALLY" record -o "$tmp/t2.json" -- "$WL" wait "$tmp/wait.json" 2>"$tmp/r2.err" &
tpid=$!
pids+=("$tpid")
wait_file "$tmp/wait.json"
kill -INT "$tpid"
wait "$tpid"
rc=$?
wpid=$(jq -r .pid "$tmp/wait.json" 2>/dev/null)
[ -n "$wpid" ] && pids+=("$wpid")
got=$(jqs "$LAST_STATS" "$tmp/t2.json")
own=$(jqs '.stats' "$tmp/wait.json")
check "record, idle target, SIGINT: the last Stats counters equal the allocator's own figures at idle" \
	"$([ $rc -eq 0 ] && [ -n "$own" ] && [ "$own" = "$got" ]; echo $?)" \
	"rc=$rc $(head -c 200 "$tmp/r2.err")
  record   ${got:-(none)}
  workload ${own:-(none)}"
groups_match "record, idle target, SIGINT: each group's last live_bytes equals the workload's own count" \
	"$tmp/t2.json" "$tmp/wait.json"
check "record, idle target, SIGINT: B/E balanced, the target still running" \
	"$(jq -e "$BALANCED" "$tmp/t2.json" >/dev/null && kill -0 "${wpid:-0}" 2>/dev/null; echo $?)" "pid ${wpid:-?}"
[ -n "$wpid" ] && kill "$wpid" 2>/dev/null

# 2b. the same with the default purge delay: the idle target's memory goes
#     back by itself (alloc/purge.c), and those moves reach the recording as
#     any other. SIGINT once a purge has shown (the workload's resident
#     memory falls below what it was at idle), not after a fixed time; the
#     purger may go on after it (and unmap), so the recording is checked
#     against what the purge cannot change: live and rounding as the
#     allocator had them at idle, each group's bytes the workload's own
#     count; and the purge's moves: the terms sum to mapped, no more mapped
#     and more returned than at idle
"$TALLY" record -o "$tmp/t2b.json" -- "$WL" wait "$tmp/wait2b.json" 2>"$tmp/r2b.err" &
tpid=$!
pids+=("$tpid")
wait_file "$tmp/wait2b.json"
wpid=$(jq -r .pid "$tmp/wait2b.json" 2>/dev/null)
[ -n "$wpid" ] && pids+=("$wpid")
idle=$(rss_anon "${wpid:-0}")
purged=1
for _ in $(seq 600); do # 30 s at most (the delay is 1 s)
	[ "$(rss_anon "${wpid:-0}")" -lt "${idle:-0}" ] 2>/dev/null && { purged=0; break; }
	sleep 0.05
done
check "record, idle target: the purger returns memory (RssAnon below ${idle:-?} kB)" $purged \
	"RssAnon $(rss_anon "${wpid:-0}") kB"
kill -INT "$tpid"
wait "$tpid"
rc=$?
got=$(jqs "$LAST_STATS" "$tmp/t2b.json")
idle=$(jqs '.stats' "$tmp/wait2b.json")
check "record, idle target purged while recorded: live and rounding as at idle, balanced, mapped no more, returned more" \
	"$([ $rc -eq 0 ] && [ -n "$idle" ] && jq -e --argjson idle "$idle" '.live == $idle.live and
		.rounding == $idle.rounding and .mapped <= $idle.mapped and .returned > $idle.returned and
		.mapped == (.live + .rounding + .cache + .span_free + .returned + .virgin + .hysteresis +
		.segment_overhead)' <<<"${got:-null}" >/dev/null; echo $?)" \
	"rc=$rc $(head -c 200 "$tmp/r2b.err")
  idle     ${idle:-(none)}
  record   ${got:-(none)}"
groups_match "record, idle target purged while recorded: each group's last live_bytes the workload's own count" \
	"$tmp/t2b.json" "$tmp/wait2b.json"
[ -n "$wpid" ] && kill "$wpid" 2>/dev/null

# 3. SIGINT and SIGTERM in the middle of a long run: the file grows while
#    recording and is a whole document after the signal
for sig in INT TERM; do
	f=$tmp/sig$sig.json
	timeout 60 "$TALLY" record -o "$f" -i 50 -- "$DEMO" -s 30 >/dev/null 2>"$tmp/sig.err" &
	tpid=$!
	pids+=("$tpid")
	# written as it goes to a temporary beside FILE, renamed at the end:
	# the signal once it has grown past its first counters (30 s at most)
	size=0
	for _ in $(seq 600); do
		size=$(cat "$tmp"/.sig$sig.json.tally-* 2>/dev/null | wc -c)
		[ -e "$f" ] && size=-1
		[ "$size" -gt 100000 ] || [ "$size" -lt 0 ] && break
		sleep 0.05
	done
	t0=$(date +%s%N)
	kill -"$sig" "$tpid"
	wait "$tpid"
	rc=$?
	ms=$((($(date +%s%N) - t0) / 1000000))
	dpid=$(jq -r '.otherData.pid' "$f" 2>/dev/null)
	[ -n "$dpid" ] && [ "$dpid" != null ] && kill "$dpid" 2>/dev/null
	check "SIG$sig mid-run: exit 0 within 5 s, valid JSON, balanced, counters for every term" \
		"$([ $rc -eq 0 ] && [ $ms -lt 5000 ] && jq -e "$BALANCED" "$f" >/dev/null && every_term "$f"; echo $?)" \
		"rc=$rc ${ms}ms $(head -c 200 "$tmp/sig.err") $(tail -c 200 "$f")"
	check "SIG$sig mid-run: the temporary beside FILE grew as the recording went (${size} bytes), FILE only at the end" \
		"$([ "$size" -gt 100000 ] && [ -z "$(ls -A "$tmp" | grep "sig$sig.json.tally-")" ]; echo $?)" "size $size"
done
check "SIGINT mid-run: slices left open by the demo's threads are closed, groups named" \
	"$(jq -e '[.traceEvents[] | select(.ph == "E")] | length > 0' "$tmp/sigINT.json" >/dev/null; echo $?)" \
	"$(jq -c '[.traceEvents[] | select(.ph == "B")] | length' "$tmp/sigINT.json" 2>&1)"

# 3b. a late attach to threads that are inside groups already: their slices
#     begin at ts 0, and every slice is closed at the end
"$DEMO" -s 30 >/dev/null 2>&1 &
dpid=$!
pids+=("$dpid")
# its group threads started (ingest, decode, render, cache: each enters its
# group first thing)
for _ in $(seq 200); do [ "$(ls /proc/"$dpid"/task 2>/dev/null | wc -l)" -ge 5 ] && break; sleep 0.05; done
timeout 60 "$TALLY" record -o "$tmp/late.json" -d 2 -p "$dpid" 2>"$tmp/late.err"
rc=$?
check "record -p PID (late attach): valid, balanced, threads already in groups shown from ts 0" \
	"$([ $rc -eq 0 ] && jq -e "($BALANCED) and ([.traceEvents[] | select(.ph == \"B\" and .ts == 0 and .args.began == \"before attach\")] | length > 0)" "$tmp/late.json" >/dev/null; echo $?)" \
	"rc=$rc $(head -c 300 "$tmp/late.err") $(jq -c '[.traceEvents[] | select(.ph == "B")][0:3]' "$tmp/late.json" 2>&1)"
check "record -p PID: the target runs on" "$(kill -0 "$dpid" 2>/dev/null; echo $?)" "pid $dpid"
kill "$dpid" 2>/dev/null

# 3c. -p PID -f: a child running at the attach and one forked meanwhile
#     have counter tracks of their own, as the root (only the root had them)
SW=$PWD/$BUILD/tests/profile/sites_workload
mkfifo "$tmp/tin" "$tmp/tgate"
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so sh -c \
	"\"$SW\" wait <\"$tmp/tin\" >\"$tmp/tree.ready\" 2>/dev/null & read x <\"$tmp/tgate\"; \"$SW\" 2>/dev/null; wait" &
shpid=$!
pids+=("$shpid")
exec 7>"$tmp/tin"
wait_file "$tmp/tree.ready"
early=$(pgrep -P "$shpid" sites_workload)
timeout 20 "$TALLY" record -v -p "$shpid" -f -i 50 -o "$tmp/tree.json" 2>"$tmp/tree.err" 7>&- &
rec=$!
wait_attached "$tmp/tree.err"
echo go >"$tmp/tgate"
exec 7>&-
wait "$rec"
rc=$?
# a process's stats.live counters: how many, the largest
LIVE_OF='[.traceEvents[] | select(.ph == "C" and .pid == $p and .name == "stats.live") | .args.bytes]
	| [length, max]'
late=$(jq -r --argjson e "${early:-0}" '[.traceEvents[] | select(.name == "process_name" and
	.args.name == "sites_workload" and .pid != $e) | .pid] | first // 0' "$tmp/tree.json" 2>/dev/null)
for who in early late; do
	[ "$rc" -eq 0 ] && jq -e --argjson p "${!who:-0}" "($LIVE_OF) as \$l | \$l[0] > 0 and
		\$l[1] > 59000000 and any(.traceEvents[]; .name == \"process_name\" and .pid == \$p)" \
		"$tmp/tree.json" >/dev/null
	check "record -p PID -f: the $who child (${!who:-none}) has its own counters (live past its kept 59 MB) and name" \
		$? "rc=$rc $(jq -c --argjson p "${!who:-0}" "$LIVE_OF" "$tmp/tree.json" 2>&1) $(tail -2 "$tmp/tree.err")"
done

# 4. hostile names: a thread and a group named with ESC, a quote, a backslash
cc -std=gnu11 -D_GNU_SOURCE -pthread -o "$tmp/hostile" tests/record/hostile.c -L"$BUILD" \
	-l:libtally.so -Wl,-rpath,"$PWD/$BUILD" 2>"$tmp/cc.err"
timeout 60 "$TALLY" record -o "$tmp/h.json" -- "$tmp/hostile" 2>"$tmp/h.err"
rc=$?
printf '\033[31m"q\\b' >"$tmp/want.name"
jq -j '[.traceEvents[] | select(.ph == "M" and .name == "thread_name") | .args.name
	| select(startswith("\u001b"))] | unique | .[]' "$tmp/h.json" >"$tmp/got.name" 2>&1
check "a thread named ESC[31m\"q\\b: valid JSON, read back byte for byte" \
	"$([ $rc -eq 0 ] && cmp -s "$tmp/want.name" "$tmp/got.name"; echo $?)" \
	"rc=$rc $(cat "$tmp/cc.err" "$tmp/h.err" | head -c 200) got $(od -c "$tmp/got.name" | head -2)"
printf '\033[31m"q\\b\n}' >"$tmp/want.group"
jq -j '[.traceEvents[] | select(.ph == "B")][0].name' "$tmp/h.json" >"$tmp/got.group" 2>&1
check "a group named likewise: its slice's name read back byte for byte, no raw ESC in the file" \
	"$(cmp -s "$tmp/want.group" "$tmp/got.group" && ! grep -q $'\033' "$tmp/h.json"; echo $?)" \
	"got $(od -c "$tmp/got.group" | head -2)"

# 5. GPU events through the fake driver
if [ -x "$GPU_WL" ] && [ -r "$FAKE" ]; then
	TALLY_GPU=on timeout 120 "$TALLY" record -o "$tmp/g.json" -- "$GPU_WL" run "$tmp/gpu.json" \
		</dev/null >/dev/null 2>"$tmp/g.err"
	rc=$?
	want=$(jq -c '.instance | [.kernels_launched, .graph_launches, .failed_launches]' "$tmp/gpu.json.end" 2>&1)
	got=$(jq -c '[.traceEvents[] | select(.cat == "gpu") | .name] as $n
		| [($n | map(select(. == "kernel launch")) | length), ($n | map(select(. == "graph launch")) | length),
		   ($n | map(select(. == "launch failed")) | length)]' "$tmp/g.json" 2>&1)
	check "GPU: one instant event per kernel launch, graph launch and refused launch" \
		"$([ $rc -eq 0 ] && [ "$want" = "$got" ]; echo $?)" "rc=$rc want $want got $got $(head -c 200 "$tmp/g.err")"
	check "GPU: device allocations and image loads carry their bytes and group" \
		"$(jq -e '[.traceEvents[] | select(.name == "device alloc" or .name == "image load")]
			| length > 0 and all(.args.bytes > 0 and (.args.group | type) == "string")' "$tmp/g.json" >/dev/null; echo $?)" \
		"$(jq -c '[.traceEvents[] | select(.cat == "gpu")][0:2]' "$tmp/g.json" 2>&1)"
else # both are built by `make all`
	skip "GPU events through the fake driver" "$GPU_WL or $FAKE not built" 2
fi

# 6. bad input: one line on stderr, a distinct status, no file left behind
bad() { # NAME WANT-STATUS FILE CMD...
	local name=$1 want=$2 file=$3
	shift 3
	timeout 30 "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
	local rc=$?
	check "$name: exit $want, one line, no file" \
		"$([ $rc -eq "$want" ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && [ ! -s "$tmp/bad.out" ] && [ ! -e "$file" ]; echo $?)" \
		"rc=$rc err=$(head -c 300 "$tmp/bad.err")"
}
bad "a bad -o path" 2 "$tmp/no/such/dir/t.json" "$TALLY" record -o "$tmp/no/such/dir/t.json" -- true
mkdir "$tmp/adir"
timeout 30 "$TALLY" record -o "$tmp/adir" -- true >"$tmp/bad.out" 2>"$tmp/bad.err"
check "a directory for -o: usage error, one line, nothing started" \
	"$([ $? -eq 2 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && [ -z "$(ls -A "$tmp/adir")" ]; echo $?)" \
	"$(head -c 300 "$tmp/bad.err")"
bad "no -o" 2 "$tmp/none.json" "$TALLY" record -- true
bad "a bad -i" 2 "$tmp/i.json" "$TALLY" record -o "$tmp/i.json" -i 0 -- true
bad "a CMD that does not exist" 7 "$tmp/c.json" "$TALLY" record -o "$tmp/c.json" -- /nonexistent/cmd
bad "no such PID" 5 "$tmp/p.json" "$TALLY" record -o "$tmp/p.json" -p 999999999
# a full device: one line, with the real error (ENOSPC), status 1
timeout 30 "$TALLY" record -o /dev/full -- true >/dev/null 2>"$tmp/full.err"
rc=$?
check "-o /dev/full: exit 1, one line that says No space left on device" \
	"$([ $rc -eq 1 ] && [ "$(wc -l <"$tmp/full.err")" -eq 1 ] && grep -q 'No space left' "$tmp/full.err"; echo $?)" \
	"rc=$rc $(head -c 300 "$tmp/full.err")"
echo keep >"$tmp/old.json"
timeout 30 "$TALLY" record -o "$tmp/old.json" -p 999999999 >/dev/null 2>&1
check "a failed start leaves an earlier FILE as it was" "$([ "$(cat "$tmp/old.json")" = keep ]; echo $?)" \
	"$(head -c 100 "$tmp/old.json")"

finish
