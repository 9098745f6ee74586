#!/usr/bin/env bash
# Following the process tree (issue 14): every process a command starts, at
# any depth, by fork and exec, in the snapshot's "processes" with its own
# figures; a forked child's figures start from its parent's; top lists each
# process's groups; record draws a track per process; serve labels process
# series and caps them; -p PID -f follows what a running process starts;
# --no-follow lists the root alone; a thousand short-lived processes leave
# tally's memory bounded. TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
WL=$PWD/$BUILD/tests/tracer_workload
FORK=$PWD/$BUILD/tests/fork_workload
. tests/lib.sh

need_root tree
export LC_ALL=C

# groups_differ EXPECT PROCESS-JSON: each group whose live bytes in the
# process's entry are not the workload's own count (in its EXPECT file)
groups_differ() {
	jq -r '.groups | to_entries[] | "\(.key) \(.value)"' "$1" 2>/dev/null |
		while read -r g v; do
			got=$(echo "$2" | jq --arg g "$g" '[.groups[] | select(.name == $g) | .live_bytes][0]')
			[ "$got" = "$v" ] || echo "$g: $got, want $v"
		done
}

# 1. a grandchild: sh -> sh -> workload, each an exec after a fork
timeout 120 "$TALLY" snapshot -o "$tmp/g.json" -- sh -c "sh -c '$WL run $tmp/g.expect'; true" \
	>"$tmp/g.out" 2>"$tmp/g.err"
rc=$?
wpid=$(jq -r .pid "$tmp/g.expect" 2>/dev/null)
w=$(jq -c --argjson p "${wpid:-0}" '.processes[] | select(.target.pid == $p)' "$tmp/g.json" 2>/dev/null)
check "grandchild: listed in processes, with its parent and comm" \
	"$([ $rc -eq 0 ] && [ -n "$w" ] && echo "$w" | jq -e '.target.comm == "tracer_workload" and
		.target.exit_code == 0 and .target.allocator == "tally" and .target.ppid > 0' >/dev/null
		echo $?)" "rc=$rc $(head -c 300 "$tmp/g.err") $(echo "$w" | head -c 300)"
check "grandchild: exact, its Stats equal its own figures field for field" \
	"$(echo "$w" | jq -e ".exact and .stats.balanced and $STATS_OWN" >/dev/null; echo $?)" \
	"$(echo "$w" | jq -c '{exact, inexact_why, stats, stats_inprocess}' | head -c 600)"
bad=$(groups_differ "$tmp/g.expect" "$w")
check "grandchild: each group's live bytes are the workload's own count" \
	"$([ -n "$(jq -r '.groups' "$tmp/g.expect" 2>/dev/null)" ] && [ -z "$bad" ]; echo $?)" "$bad"
# a thread's last switch after its exit must not charge it again from the
# attach: on these 2 CPUs no process has more CPU than twice its lifetime
check "CPU: no process of the tree charged more than two CPUs over its lifetime" \
	"$(jq -e 'all(.processes[] | select(.target.lifetime_s != null);
		([.groups[].cpu_ns] | add) / 1e9 <= 2 * .target.lifetime_s + 0.002)' "$tmp/g.json" >/dev/null
		echo $?)" "$(jq -c '[.processes[] | {c: .target.comm, life: .target.lifetime_s, cpu: (([.groups[].cpu_ns] | add) / 1e9)}]' "$tmp/g.json" 2>&1 | head -c 400)"
check "the root is first in processes, the top level is the root" \
	"$(jq -e '.processes[0].target.pid == .target.pid and (.processes | length) == 3 and
		.tree.processes == 3 and .tree.alive == 0' "$tmp/g.json" >/dev/null; echo $?)" \
	"$(jq -c '{pid: .target.pid, procs: [.processes[].target.pid], tree}' "$tmp/g.json" 2>&1 | head -c 300)"

# 1b. the tree's totals over its life, apart from what is alive at the end:
# all three ended, so nothing is alive, yet they used CPU and allocated
# (tree.live and tree.cpu_ns summed only the living: 0 here); each process's
# batches read in place are its own (one global count in each before), and
# the root, started by tally, has its born_s and lifetime_s
check "tree: lifetime sums every process, alive_at_end none of the ended ones" \
	"$(jq -e '.tree.alive_at_end == (.tree.alive_at_end + {processes: 0, live: 0, mapped: 0, cpu_ns: 0})
		and .tree.lifetime.processes == 3
		and .tree.lifetime.cpu_ns == ([.processes[].groups[].cpu_ns] | add) and .tree.lifetime.cpu_ns > 0
		and .tree.lifetime.allocated_bytes == ([.processes[].groups[].allocated_bytes] | add)
		and .tree.lifetime.allocated_bytes > 0
		and .tree.lifetime.events_received == ([.processes[].events.received] | add)' "$tmp/g.json" >/dev/null
		echo $?)" "$(jq -c '.tree' "$tmp/g.json" 2>&1 | head -c 600)"
check "tree: batches read in place counted per process, their sum the tree's" \
	"$(jq -e '.tree.lifetime.batches_in_place == ([.processes[].events.batches_in_place] | add)
		and .tree.lifetime.batches_in_place > 0 and .processes[0].events.batches_in_place == 0' \
		"$tmp/g.json" >/dev/null; echo $?)" \
	"$(jq -c '[.processes[] | {c: .target.comm, e: .events}], .tree.lifetime' "$tmp/g.json" 2>&1 | head -c 600)"
check "tree: the root started by tally was born with the trace and says how long it lived" \
	"$(jq -e '.target.born_s == 0 and .target.lifetime_s > 0 and
		.processes[0].target.lifetime_s >= .processes[1].target.lifetime_s' "$tmp/g.json" >/dev/null
		echo $?)" "$(jq -c '[.processes[].target | {comm, born_s, lifetime_s}]' "$tmp/g.json" 2>&1)"

# 2. fork without exec: each child's figures start from its parent's copy of
# the heap and equal its own at its exit (20 children, by glibc's fork, a
# raw fork, nested)
for mode in exit nested rawfork; do
	timeout 120 "$TALLY" snapshot -o "$tmp/f.json" -- "$FORK" "$mode" >/dev/null 2>&1
	# a forked child's counters began as its parent's: the tree's lifetime
	# counts what each did itself, not the parent's allocations again in
	# each child
	[ "$mode" = exit ] && check "fork exit: the lifetime's allocations count what a child inherited once" \
		"$(jq -e '.tree.lifetime.allocated_objects < ([.processes[].groups[].allocated_objects] | add)
			and .tree.lifetime.allocated_objects >= ([.processes[0].groups[].allocated_objects] | add)' \
			"$tmp/f.json" >/dev/null; echo $?)" "$(jq -c '.tree.lifetime, [.processes[] | [.groups[].allocated_objects] | add]' "$tmp/f.json" 2>&1 | head -c 400)"
	got=$(jq -r --arg m "$mode" '[.processes[1:][] | select(.exact and '"$STATS_OWN"')] | length' \
		"$tmp/f.json" 2>/dev/null)
	want=$([ "$mode" = nested ] && echo 40 || echo 20)
	check "fork $mode: every child exact and equal to its own figures" \
		"$([ "$got" = "$want" ]; echo $?)" \
		"$got of $want; $(jq -c '[.processes[] | select(.exact | not) | .inexact_why] | unique' "$tmp/f.json" 2>&1 | head -c 300)"
done

# forked from a second thread while a third allocates: the kernel copies that
# thread's heap page by page as it runs, so each child says it is not exact
timeout 120 "$TALLY" snapshot -o "$tmp/f.json" -- "$FORK" threads >/dev/null 2>"$tmp/f.err"
check "fork from a thread while another allocates: every child says why it is not exact" \
	"$(jq -e '(.processes | length) == 21 and .exact and all(.processes[1:][]; (.exact | not)
		and (.inexact_why | index("forked while other threads of its parent ran: their heaps were copied as they were, maybe in the middle of an operation")))' \
		"$tmp/f.json" >/dev/null; echo $?)" \
	"$(jq -c '[.processes[] | {e: .exact, w: .inexact_why}] | unique' "$tmp/f.json" 2>&1 | head -c 400)"
# the root is exact, its children are not: the tree says so at the top, by
# code, and stderr names each (the document said exact and stderr nothing)
check "fork threads: tree.exact false, each inexact child listed by pid with its code" \
	"$(jq -e '.exact and (.tree.exact | not) and .tree.inexact_processes == 20 and
		([.tree.inexact[].pid] == [.processes[1:][].target.pid]) and
		all(.tree.inexact[]; .inexact_codes == ["forked_while_threads_ran"]) and
		all(.processes[1:][]; .inexact_codes == ["forked_while_threads_ran"])' "$tmp/f.json" >/dev/null
		echo $?)" "$(jq -c '{exact: .tree.exact, n: .tree.inexact_processes, i: .tree.inexact[0]}' "$tmp/f.json" 2>&1 | head -c 300)"
missing=$(jq -r '.processes[1:][].target.pid' "$tmp/f.json" 2>/dev/null | while read -r p; do
	grep -qE "^tally: pid $p \(fork_workload\): figures not exact: forked while other threads" "$tmp/f.err" ||
		echo "$p"; done)
check "fork threads: one stderr line for each process not exact, naming it and why" \
	"$([ -z "$missing" ] && [ "$(grep -c 'figures not exact' "$tmp/f.err")" -eq 20 ]; echo $?)" \
	"missing: $missing; $(head -c 300 "$tmp/f.err")"

# 3. a thousand command substitutions in bash: every process listed and exact,
# no child harmed, tally's resident memory bounded. (--no-sample: what tally
# keeps per process is measured, not the symbolizer's one-off cost for the
# heap profile's sites, about 20 MiB with libc's debug information at hand.)
script='bad=0; for i in $(seq 1000); do x=$(echo $i); [ "$x" = "$i" ] || bad=$((bad+1)); done; echo bad=$bad'
out=$(/usr/bin/time -f %M -o "$tmp/rss1000" timeout 300 "$TALLY" snapshot --no-sample -o "$tmp/b.json" -- \
	bash -c "$script" 2>"$tmp/b.err")
check "bash: 1000 command substitutions, none harmed" "$([ "$out" = bad=0 ]; echo $?)" \
	"$out $(head -c 300 "$tmp/b.err")"
check "bash: 1002 processes listed (bash, seq, 1000 subshells), every one exact" \
	"$(jq -e '(.processes | length) == 1002 and all(.processes[]; .exact and .target.exit_code == 0)' \
		"$tmp/b.json" >/dev/null; echo $?)" \
	"$(jq -c '{n: (.processes | length), why: ([.processes[].inexact_why] | unique)}' "$tmp/b.json" 2>&1 | head -c 300)"
/usr/bin/time -f %M -o "$tmp/rss1" "$TALLY" snapshot --no-sample -o "$tmp/one.json" -- bash -c 'x=$(echo 1)' \
	>/dev/null 2>&1
r1000=$(cat "$tmp/rss1000" 2>/dev/null)
r1=$(cat "$tmp/rss1" 2>/dev/null)
echo "# tally's maximum resident: ${r1:-?} KiB for 2 processes, ${r1000:-?} KiB for 1002"
check "bash: tally's resident memory for 1002 processes within 16 MiB of that for 2" \
	"$([ -n "$r1000" ] && [ -n "$r1" ] && [ "$r1000" -le $((r1 + 16384)) ]; echo $?)" \
	"${r1000:-?} KiB against ${r1:-?} KiB"

# 4. --no-follow: the root alone, its children run untraced and unharmed
out=$(timeout 60 "$TALLY" snapshot --no-follow -o "$tmp/n.json" -- bash -c 'x=$(echo ok); echo $x' \
	2>"$tmp/n.err")
check "--no-follow: the root alone, exact, its child unharmed" \
	"$([ "$out" = ok ] && jq -e '(.processes | length) == 1 and .exact' "$tmp/n.json" >/dev/null
		echo $?)" "$out $(head -c 200 "$tmp/n.err")"
timeout 10 "$TALLY" snapshot -f --no-follow -p 1 >/dev/null 2>"$tmp/ff.err"
check "-f and --no-follow together: a usage error" \
	"$([ $? -eq 2 ] && grep -q 'exclude each other' "$tmp/ff.err"; echo $?)" "$(cat "$tmp/ff.err")"

# 5. top -b: the workload's groups in every frame, under its process line.
# Attached (-p -f) once the workload says its groups are filled, so that
# frame 1 cannot come before them (started by top, a loaded machine's
# workload could miss the first 400 ms)
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so sh -c "$WL wait $tmp/t.expect & wait" &
tsh=$!
pids+=("$tsh")
wait_file "$tmp/t.expect"
tpid=$(jq -r .pid "$tmp/t.expect" 2>/dev/null)
pids+=("${tpid:-0}")
timeout 60 "$TALLY" top -b -n 3 -i 400 -p "$tsh" -f >"$tmp/t.txt" 2>"$tmp/t.err"
[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
frames=$(awk -v p="$tpid" '/^--- frame/ { k = $3 } $1 == "process" && $2 == p { inw = 1; next }
	$1 == "process" { inw = 0 } inw && $2 == "export" && NF == 12 { print k }' "$tmp/t.txt" |
	sort -u | tr '\n' ' ')
check "top -b: the workload's groups in each of 3 frames" "$([ "$frames" = "1 2 3 " ]; echo $?)" \
	"frames: $frames $(head -c 600 "$tmp/t.txt")"
check "top -b: the header counts the processes" \
	"$([ "$(grep -c '^processes: 2 listed, 2 running$' "$tmp/t.txt")" -ge 2 ]; echo $?)" \
	"$(grep '^processes' "$tmp/t.txt" | head -3)"

# 5b. a running child's groups keep their names when a process born after it
# runs too (each one's figures pointed into a scratch copy of its model that
# the next one's overwrote: rows without names); the header's events are
# the tree's (the idle root's were 0/s while the workload's came)
timeout 60 "$TALLY" top -b -n 2 -i 400 --view process-groups -- \
	sh -c "$WL wait $tmp/t2.expect & sleep 3 & wait" >"$tmp/t2.txt" 2>"$tmp/t2.err"
tpid=$(jq -r .pid "$tmp/t2.expect" 2>/dev/null)
[ -n "$tpid" ] && kill "$tpid" 2>/dev/null
frames=$(awk -v p="$tpid" '/^--- frame/ { k = $3 } $1 == "process" && $2 == p { inw = 1; next }
	$1 == "process" { inw = 0 } inw && $2 == "export" && NF == 12 { print k }' "$tmp/t2.txt" |
	sort -u | tr '\n' ' ')
nameless=$(awk '$1 ~ /^[0-9]+$/ && NF == 11' "$tmp/t2.txt")
check "top -b: a running child's groups named while a younger process runs" \
	"$([ "$frames" = "1 2 " ] && [ -z "$nameless" ]; echo $?)" \
	"frames: $frames; $nameless $(grep -A8 "^process $tpid" "$tmp/t2.txt" | head -c 400)"
recv=$(sed -nE 's/^events: .*, ([0-9]+) received, .*/\1/p' "$tmp/t2.txt" | tail -n1)
check "top -b: the header's events received are the tree's" \
	"$([ "${recv:-0}" -gt 20 ]; echo $?)" "$(grep '^events' "$tmp/t2.txt")"

# 6. record: a Perfetto track per process, named, with its start and exit
timeout 60 "$TALLY" record -o "$tmp/r.json" -- sh -c "$WL run $tmp/r.expect; sh -c 'exit 3'" \
	>/dev/null 2>&1
check "record: a named track per process, each one's start and exit" \
	"$(python3 - "$tmp/r.json" <<'EOF'
import json, sys
ev = json.load(open(sys.argv[1]))["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in ev if e["ph"] == "M" and e["name"] == "process_name"}
ends = {e["pid"]: e["args"] for e in ev if e.get("name") == "process exited"}
starts = {e["pid"] for e in ev if e.get("name") == "process started"}
# each track's last name is its command line, as ps shows it
ok = (len(names) == 3 and any(n.split(" ")[0].endswith("/tracer_workload") for n in names.values()) and len(starts) == 2
      and sorted(a.get("exit_code") for a in ends.values()) == [0, 3, 3])
sys.exit(0 if ok else 1)
EOF
	echo $?)" "$(python3 -c 'import json,sys; print([e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("cat") == "process" or e["ph"] == "M"][:8])' "$tmp/r.json" 2>&1 | head -c 600)"

# 7. serve: process series labelled pid and comm, 50 of them at most
port=$((20000 + RANDOM % 20000))
timeout 60 "$TALLY" serve --listen "127.0.0.1:$port" -i 200 -- \
	bash -c 'for i in $(seq 60); do sleep 30 & done; wait' >/dev/null 2>"$tmp/s.err" &
spid=$!
pids+=("$spid")
# (30 s at most: a loaded machine took over 10 s to show the 61)
for _ in $(seq 150); do
	curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/m.txt" 2>/dev/null &&
		grep -q '^tally_processes 61$' "$tmp/m.txt" && break
	sleep 0.2
done
n=$(grep -c '^tally_process_live_bytes{' "$tmp/m.txt" 2>/dev/null)
check "serve: 61 processes, 50 series by pid and comm and one comm=\"other\"" \
	"$([ "$n" = 51 ] && grep -q '^tally_process_live_bytes{pid="",comm="other"} ' "$tmp/m.txt" &&
		grep -q '^tally_processes 61$' "$tmp/m.txt" &&
		grep -qE '^tally_process_cpu_seconds_total\{pid="[0-9]+",comm="sleep"\} ' "$tmp/m.txt"
		echo $?)" "n=$n $(grep -E '^tally_process(es)? ' "$tmp/m.txt" | head -3) $(head -c 200 "$tmp/s.err")"
kill "$spid" 2>/dev/null
wait "$spid" 2>/dev/null

# 8. -p PID -f: a running shell's children, born after the attach, followed
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so \
	bash -c "sleep 1; for i in 1 2 3; do $WL run $tmp/p\$i.expect; done; sleep 30; true" &
ppid=$!
pids+=("$ppid")
timeout 60 "$TALLY" snapshot -p "$ppid" -f -d 6 -o "$tmp/p.json" 2>"$tmp/p.err"
got=$(jq '[.processes[] | select(.target.comm == "tracer_workload" and .exact and '"$STATS_OWN"')] | length' \
	"$tmp/p.json" 2>/dev/null)
check "-p PID -f: three children born after the attach, each exact and its own" \
	"$([ "$got" = 3 ]; echo $?)" "$got; $(jq -c '[.processes[] | {c: .target.comm, e: .exact, w: .inexact_why}]' "$tmp/p.json" 2>&1 | head -c 500) $(head -c 200 "$tmp/p.err")"
timeout 60 "$TALLY" snapshot -p "$ppid" -d 1 -o "$tmp/p1.json" 2>/dev/null
check "-p PID without -f: the process alone" \
	"$(jq -e '(.processes | length) == 1' "$tmp/p1.json" >/dev/null; echo $?)" \
	"$(jq -c '[.processes[].target.pid]' "$tmp/p1.json" 2>&1)"
kill "$ppid" 2>/dev/null

# 12. -p PID -f: a descendant running at the attach has its state read as a
# late attach's root has: exact, its groups' live bytes the workload's own;
# and a running child's figures at the end include what its threads hold
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so sh -c "$WL wait $tmp/a.expect; true" &
apid=$!
pids+=("$apid")
wait_file "$tmp/a.expect"
awpid=$(jq -r .pid "$tmp/a.expect" 2>/dev/null)
pids+=("${awpid:-0}")
timeout 60 "$TALLY" snapshot -p "$apid" -f -d 1 -o "$tmp/a.json" 2>"$tmp/a.err"
aw=$(jq -c --argjson p "${awpid:-0}" '.processes[] | select(.target.pid == $p)' "$tmp/a.json" 2>/dev/null)
bad=$(groups_differ "$tmp/a.expect" "$aw")
check "-p PID -f: a running descendant's state read at attach, exact, its groups its own" \
	"$(echo "$aw" | jq -e '.exact and .target.state_read_consistent and .stats.balanced' >/dev/null &&
		[ -z "$bad" ]; echo $?)" "$bad $(echo "$aw" | jq -c '{exact, inexact_why, target}' | head -c 400)"
# running at the end, its own figures read as the root's are (they were null)
check "-p PID -f: a descendant running at the end has its allocator's own Stats, equal to tally's" \
	"$(echo "$aw" | jq -e ".stats_inprocess != null and .exact and $STATS_OWN" >/dev/null; echo $?)" \
	"$(echo "$aw" | jq -c '{exact, inexact_why, stats, stats_inprocess}' | head -c 500)"
kill "${awpid:-0}" "$apid" 2>/dev/null

# 9. a child without tally's allocator (ldconfig is a static binary): its
# CPU, allocator none, no memory figures made up
timeout 60 "$TALLY" snapshot -o "$tmp/st.json" -- sh -c '/sbin/ldconfig -p >/dev/null; true' \
	>/dev/null 2>&1
check "a static child: allocator none, no Stats, listed with its exit" \
	"$(jq -e '[.processes[] | select(.target.comm == "ldconfig")] | length == 1 and
		(.[0] | .target.allocator == "none" and .stats.live == null and .stats.mapped == null
			and .stats_inprocess == null and .target.exit_code == 0)' "$tmp/st.json" >/dev/null
		echo $?)" "$(jq -c '.processes[] | {c: .target.comm, a: .target.allocator, s: .stats}' "$tmp/st.json" 2>&1 | head -c 400)"

# 11. a tree that enters its own PID namespace (unshare --pid --fork): each
# process with its pid there, the workload exact
if command -v unshare >/dev/null; then
	timeout 60 "$TALLY" snapshot -o "$tmp/u.json" -- unshare --mount --pid --fork \
		sh -c "$WL run $tmp/u.expect; true" >/dev/null 2>&1
	check "unshare --pid: the workload, pid 2 in its namespace, exact and its own" \
		"$(jq -e '[.processes[] | select(.target.comm == "tracer_workload")] | length == 1 and
			(.[0] | .target.ns_pid == 2 and .exact and '"$STATS_OWN"')' "$tmp/u.json" >/dev/null
			echo $?)" "$(jq -c '[.processes[] | {p: .target.pid, ns: .target.ns_pid, c: .target.comm, e: .exact}]' "$tmp/u.json" 2>&1 | head -c 400)"
else # util-linux, an essential package
	skip "unshare --pid: the workload, pid 2 in its namespace" "unshare not installed (util-linux)"
fi

# 13. children killed by a signal: listed with it, and one line on stderr
timeout 60 "$TALLY" snapshot -o "$tmp/sig.json" -- \
	sh -c 'sh -c "kill -SEGV \$\$"; sh -c "kill -TERM \$\$"; true' >/dev/null 2>"$tmp/sig.err"
check "children killed by a signal: in processes with it, one line on stderr" \
	"$(jq -e '[.processes[].target.signal | select(. != null)] == ["SIGSEGV", "SIGTERM"]' "$tmp/sig.json" >/dev/null &&
		grep -qE '^tally: 2 processes of the tree killed by a signal: [0-9]+ \(sh, SIGSEGV\), [0-9]+ \(sh, SIGTERM\)$' "$tmp/sig.err"
		echo $?)" "$(cat "$tmp/sig.err") $(jq -c '[.processes[].target.signal]' "$tmp/sig.json" 2>&1)"

# PID COMM: prints PID's child once it runs COMM (10 s at most; else the
# child seen last, or nothing)
child_running() {
	local c=
	for _ in $(seq 200); do
		c=$(cat /proc/"$1"/task/*/children 2>/dev/null | tr -d ' ')
		[ -n "$c" ] && [ "$(cat /proc/"$c"/comm 2>/dev/null)" = "$2" ] && break
		sleep 0.05
	done
	echo "$c"
}

# 14. -p PID -f with a descendant tally cannot read (no libtally_alloc):
# the root exact, the descendant not; the document's tree, stderr, top's
# header and serve each name it and why (top said "NOT exact", serve
# tally_exact 0, the snapshot exact at its top and nothing on stderr)
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so sh -c 'env -u LD_PRELOAD sleep 30 & wait' &
npid=$!
pids+=("$npid")
# its child running sleep (exec'd)
spid=$(child_running "$npid" sleep)
pids+=("${spid:-0}")
timeout 60 "$TALLY" snapshot -p "$npid" -f -d 1 -o "$tmp/nr.json" 2>"$tmp/nr.err"
check "-f, an unread descendant: tree.exact false with its pid and code, one stderr line" \
	"$(jq -e --argjson s "${spid:-0}" '.exact and (.tree.exact | not) and
		.tree.inexact == [{pid: $s, comm: "sleep", inexact_codes: ["not_read_at_attach"]}]' \
		"$tmp/nr.json" >/dev/null &&
		grep -qx "tally: pid $spid (sleep): figures not exact: found running at attach: what it did before was not read" "$tmp/nr.err"
		echo $?)" "$(jq -c '{exact, tree: .tree.inexact}' "$tmp/nr.json" 2>&1) $(cat "$tmp/nr.err")"
timeout 30 "$TALLY" top -b -n 1 -p "$npid" -f >"$tmp/nr.txt" 2>&1
check "-f, an unread descendant: top's header names it and why" \
	"$(grep -qF "figures NOT exact: pid $spid (sleep): found running at attach: what it did before was not read [not_read_at_attach]" "$tmp/nr.txt"
		echo $?)" "$(grep '^events' "$tmp/nr.txt")"
port=18420
timeout 20 "$TALLY" serve --listen "127.0.0.1:$port" -p "$npid" -f -d 4 >/dev/null 2>"$tmp/nrs.err" &
srv=$!
for _ in $(seq 30); do curl -sf "http://127.0.0.1:$port/metrics" >"$tmp/nr.prom" 2>/dev/null && break; sleep 0.1; done
check "-f, an unread descendant: serve says tally_exact 0 and why, by a reason code" \
	"$(grep -qx 'tally_exact 0' "$tmp/nr.prom" &&
		grep -qx 'tally_inexact_processes{reason="not_read_at_attach"} 1' "$tmp/nr.prom" &&
		[ "$(grep -c '^tally_inexact_processes{reason=' "$tmp/nr.prom")" -ge 20 ]; echo $?)" \
	"$(grep -E '^tally_(exact|inexact)' "$tmp/nr.prom" | grep -v ' 0$' | head -5) $(head -c 200 "$tmp/nrs.err")"
kill "$srv" "${spid:-0}" "$npid" 2>/dev/null
wait "$srv" 2>/dev/null

# 14b. -p PID -f --inject: only the root is injected; the descendant running
# then is said so on stderr at the attach and flagged not_injected (it was
# listed as if traced, stderr silent)
sh -c 'sleep 30 & wait' &
ipid=$!
pids+=("$ipid")
ichild=$(child_running "$ipid" sleep)
pids+=("${ichild:-0}")
timeout 60 "$TALLY" snapshot -p "$ipid" -f --inject -d 1 -o "$tmp/inj.json" 2>"$tmp/inj.err"
check "-f --inject: only the root injected, said on stderr, the child flagged not_injected" \
	"$(grep -qx "tally: --inject: only process $ipid is injected; 1 descendant running now ($ichild): CPU only, allocations not traced" "$tmp/inj.err" &&
		jq -e --argjson c "${ichild:-0}" '.target.attach == "injected" and (.tree.exact | not) and
			(.processes[] | select(.target.pid == $c) | .inexact_codes | index("not_injected"))' \
			"$tmp/inj.json" >/dev/null; echo $?)" "$(cat "$tmp/inj.err") $(jq -c '.tree.inexact' "$tmp/inj.json" 2>&1)"
kill "${ichild:-0}" "$ipid" 2>/dev/null

# 10. kill -9 of tally while the tree forks: the tree goes on unharmed
script='bad=0; for i in $(seq 400); do x=$(echo $i); [ "$x" = "$i" ] || bad=$((bad+1)); done; echo bad=$bad >'"$tmp"'/k.out'
"$TALLY" snapshot -o "$tmp/k.json" -- bash -c "$script" >/dev/null 2>&1 &
kpid=$!
# mid-tree: once its subshells have begun (k.out is written at the end)
for _ in $(seq 200); do
	[ "$(pgrep -P "$(pgrep -P "$kpid" bash | head -1)" 2>/dev/null | wc -l)" -gt 0 ] && break
	sleep 0.05
done
kill -9 "$kpid" 2>/dev/null
wait "$kpid" 2>/dev/null
for _ in $(seq 300); do [ -s "$tmp/k.out" ] && break; sleep 0.1; done
check "kill -9 of tally mid-tree: the shell and its subshells go on unharmed" \
	"$(grep -qx bad=0 "$tmp/k.out"; echo $?)" "$(cat "$tmp/k.out" 2>&1)"

finish
