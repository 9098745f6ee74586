#!/usr/bin/env bash
# --inject against the real kernel and real processes: libtally_interpose.so
# loaded into a running process on glibc's malloc (C, C++, python3, the
# sqlite3 shell), its figures against what the process counted itself, the
# process unharmed (its output and exit status, its GOT glibc's again after
# the detach and after a kill -9 of tally), and every refusal.
set -uo pipefail
cd "$(dirname "$0")/../.."
. tests/lib.sh
need_root inject

B=${BUILD:-build}
T=$B/tally

# The interposer is in: its library mapped and its thread running.
wait_injected() { # PID
	for _ in $(seq 100); do
		grep -q libtally_interpose /proc/"$1"/maps 2>/dev/null &&
			grep -qx tally-inject /proc/"$1"/task/*/comm 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}

# The library's thread ends a little after it has put the GOT back: a second
# injection is only seen once the first one's thread is gone.
wait_uninjected() { # PID
	for _ in $(seq 100); do
		grep -qx tally-inject /proc/"$1"/task/*/comm 2>/dev/null || return 0
		sleep 0.05
	done
	return 1
}

wait_line() { # FILE PATTERN
	for _ in $(seq 200); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

# tally snapshot -p PID --inject [OPTION...] in the background ($tmp/NAME.json,
# its errors in $tmp/NAME.err, its PID in $tp), until the interposer runs.
inject_go() { # NAME PID [OPTION...]
	local name=$1 pid=$2
	shift 2
	"$T" snapshot -p "$pid" --inject -v "$@" -o "$tmp/$name.json" 2>"$tmp/$name.err" &
	tp=$!
	# and until tally has attached (-v's line): the library's thread comes
	# up before tally has read the state, and a workload sent on (or to its
	# end) meanwhile was "exited during attach" (seen once in a CI run)
	wait_injected "$pid" && wait_attached "$tmp/$name.err"
}

# Wait for PID and for tally ($tp), then check NAME: both exit 0 and the
# snapshot $tmp/FILE.json passes the jq FILTER (jq's VIEW of it when not).
ended_check() { # PID FILE NAME FILTER VIEW
	local wrc trc
	wait "$1"
	wrc=$?
	wait "$tp"
	trc=$?
	[ "$wrc" -eq 0 ] && [ "$trc" -eq 0 ] && jq -e "$4" "$tmp/$2.json" >/dev/null
	check "$3" $? "rc $wrc/$trc: $(cat "$tmp/$2.err") $(jq -c "$5" "$tmp/$2.json")"
}

# Start CMD (its output in $tmp/NAME.out), inject it once it is ready, start
# its work (SIGUSR1), and wait for LINE and for tally (-d 2, $tmp/NAME.json,
# its errors in $tmp/NAME.err); its PID in $wp.
inject_started() { # NAME LINE CMD...
	local name=$1 line=$2 tp
	shift 2
	"$@" >"$tmp/$name.out" &
	wp=$!
	pids+=("$wp")
	wait_line "$tmp/$name.out" '^ready'
	inject_go "$name" "$wp" -d 2
	kill -USR1 "$wp"
	wait_line "$tmp/$name.out" "$line"
	wait "$tp"
}

# The workload counts for itself what it allocates after SIGUSR1, a library
# it dlopens then included; tally injects before it. NAME BINARY [TALLY-OPTION]
counted() {
	local name=$1 bin=$2 opt=${3:-} out=$tmp/$1.out json=$tmp/$1.json err=$tmp/$1.err
	"$bin" "$PWD/$B/tests/libinject_lib.so" >"$out" &
	local wp=$!
	pids+=("$wp")
	wait_line "$out" '^ready got=libc'
	local tp
	inject_go "$name" "$wp" -d 3 ${opt:+"$opt"}
	check "$name: the interposer is loaded and running" $? "$(cat "$err")"
	kill -USR1 "$wp"
	wait_line "$out" '^live='
	wait "$tp"
	check "$name: tally exits 0" $? "$(cat "$err")"
	local line live objs freed
	line=$(grep '^live=' "$out")
	live=$(sed 's/.*live=\([0-9]*\).*/\1/' <<<"$line")
	objs=$(sed 's/.*allocs=\([0-9]*\).*/\1/' <<<"$line")
	freed=$(sed 's/.*before_freed=\([0-9]*\).*/\1/' <<<"$line")
	jq -e --argjson l "$live" '.stats.live == $l and .exact == true' "$json" >/dev/null
	check "$name: live bytes since the injection are the workload's own count ($live)" $? \
		"$(jq -c '{exact, inexact_why, live: .stats.live}' "$json")"
	jq -e --argjson n "$objs" '.groups[0].allocated_objects == $n' "$json" >/dev/null
	check "$name: allocations since the injection are the workload's ($objs)" $? \
		"$(jq -c '.groups[0].allocated_objects' "$json")"
	grep -q ' big_mapped=1$' <<<"$line"
	check "$name: glibc's own placement unchanged (a 200 KB block still mapped on its own)" $? \
		"$line"
	jq -e --argjson n "$freed" '.glibc.frees_not_seen_allocated == $n' "$json" >/dev/null
	check "$name: blocks from before, freed after, counted as such ($freed), not as negative live" \
		$? "$(jq -c '.glibc' "$json")"
	jq -e '.target.allocator == "glibc" and .target.attach == "injected" and
		.glibc.arena > 0 and .glibc.in_use > 0 and .stats.mapped == null' "$json" >/dev/null
	check "$name: the snapshot says glibc, injected, with glibc's own totals" $? \
		"$(jq -c '{target, glibc}' "$json")"
	if [ "$opt" = --rate=1 ]; then
		# nearly every block sampled (a block of q bytes with probability
		# 1 - e^-q, scaled by its inverse): the sites hold the live bytes
		jq -e '(([.sites[].inuse_bytes] | add) - .stats.live | fabs) <= .stats.live / 1000 and
			(.sites | length) > 1' "$json" >/dev/null
		check "$name: heap profile at --rate 1: its sites hold the live bytes (0.1 %)" $? \
			"$(jq -c '{live: .stats.live, sites: [.sites[] | .inuse_bytes]}' "$json")"
	fi
	jq -e '.events.lost == 0 and .events.batches_in_place > 0' "$json" >/dev/null
	check "$name: batches read in place from the thread's shared ring, none lost" $? \
		"$(jq -c '.events' "$json")"
	kill -USR2 "$wp"
	wait_line "$out" '^got='
	grep -qx 'got=libc' "$out"
	check "$name: after the detach its GOT entry for malloc is glibc's again" $? "$(cat "$out")"
	wait_uninjected "$wp"
	check "$name: after the detach the library's thread has ended" $?
	counted_again "$name" "$wp" "$line"
}

# counted's workload injected again (PID, its "live=" LINE): the library is
# there already; the workload frees what it holds, all from before this tally
counted_again() { # NAME PID LINE
	local name=$1 wp=$2 line=$3 out=$tmp/$1.out tp objects freed
	objects=$(sed 's/.*objects=\([0-9]*\).*/\1/' <<<"$line")
	freed=$(sed 's/.*before_freed=\([0-9]*\).*/\1/' <<<"$line")
	# injected again: the library is there already; what the first tally
	# saw allocated is from before this one, and the workload frees it all
	inject_go "$name.2" "$wp"
	check "$name: injected a second time" $? "$(cat "$tmp/$name.2.err")"
	kill -TERM "$wp"
	wait "$wp"
	check "$name: the workload exits 0" $? "$(cat "$out")"
	wait "$tp"
	# at SIGTERM the workload frees its live objects and the BEFORE blocks
	# it kept (1000 - before_freed): all from before the second injection
	jq -e --argjson n "$((objects + 1000 - freed))" '.exact and .stats.live == 0 and
		.glibc.frees_not_seen_allocated == $n' "$tmp/$name.2.json" >/dev/null
	check "$name: the second tally counts the first one's $((objects + 1000 - freed)) blocks as from before it" $? \
		"$(cat "$tmp/$name.2.err") $(jq -c '{exact, live: .stats.live, glibc}' "$tmp/$name.2.json")"
}

counted c "$B/tests/inject_workload"

# A free through a pointer to glibc's free taken before the injection is not
# seen; when glibc gives the address again the block is counted free (live
# right again) and the figures say what happened.
inject_started unseen '^live=' env INJECT_UNSEEN=1 "$B/tests/inject_workload"
live=$(sed -n 's/^live=\([0-9]*\).*/\1/p' "$tmp/unseen.out")
grep -qx 'unseen=1' "$tmp/unseen.out" &&
	jq -e --argjson l "$live" '.exact == false and .stats.live == $l and
		.glibc.frees_not_seen == 1 and
		(.inexact_why | map(test("did not see")) | any)' "$tmp/unseen.json" >/dev/null
check "a free it could not see: live right once the address is given again, flagged" $? \
	"$(cat "$tmp/unseen.out" "$tmp/unseen.err") $(jq -c '{exact, inexact_why, live: .stats.live, glibc}' "$tmp/unseen.json")"
kill -TERM "$wp"
wait "$wp"
check "a free it could not see: the workload exits 0" $?

# Children of an injected process: one by glibc's fork (its atfork handler
# lets go of the interposer in it), one by the raw clone syscall (the probe
# guard catches it at its first call down the general path; malloc's and
# free's inline path records before that, into a batch that is dropped).
# Each churns 20000 blocks, its batch filled several times, and exits 0 (no
# trap at a probe site, no lock held); the parent's figures stay exact.
inject_started forks '^live=' env INJECT_FORKS=1 "$B/tests/inject_workload"
live=$(sed -n 's/^live=\([0-9]*\).*/\1/p' "$tmp/forks.out")
grep -qx 'forks=0,0' "$tmp/forks.out" &&
	jq -e --argjson l "$live" '.exact and .stats.live == $l and .events.lost == 0' \
		"$tmp/forks.json" >/dev/null
check "children by fork and by raw clone while injected: both exit 0, the parent exact" $? \
	"$(cat "$tmp/forks.out" "$tmp/forks.err") $(jq -c '{exact, inexact_why, live: .stats.live}' "$tmp/forks.json")"
kill -TERM "$wp"
wait "$wp"
check "children by fork and by raw clone: the workload exits 0" $?

counted cxx "$B/tests/inject_workload_cxx" --rate=1

# The SDK's groups: a thread in group "work" since before the injection, then
# in root; the blocks charged to each as the program counted them.
inject_started g '^work=' "$B/tests/inject_groups"
work=$(sed -n 's/^work=\([0-9]*\) .*/\1/p' "$tmp/g.out")
root=$(sed -n 's/.* root=\([0-9]*\)/\1/p' "$tmp/g.out")
jq -e --argjson w "$work" --argjson r "$root" '.exact and
	(.groups[] | select(.name == "work") | .live_bytes) == $w and
	(.groups[] | select(.name == "root") | .live_bytes) == $r' "$tmp/g.json" >/dev/null
check "SDK groups: live bytes per group as the program counted them (work $work, root $root)" $? \
	"$(cat "$tmp/g.err") $(jq -c '[.groups[] | {name, live_bytes}]' "$tmp/g.json")"
kill -TERM "$wp"
wait "$wp"

# An injected shell that execs another program: the new image has no
# interposer, and the figures say so rather than stay exact.
# (it execs once told to through a FIFO, after the interposer is in)
mkfifo "$tmp/x.go"
sh -c 'read -r x <"$1"; exec sleep 0.4' sh "$tmp/x.go" &
wp=$!
pids+=("$wp")
inject_go x "$wp"
check "an injected process that execs: the interposer is in before it execs" $? "$(cat "$tmp/x.err")"
echo go >"$tmp/x.go"
wait "$tp"
trc=$?
wait "$wp"
wrc=$?
[ "$trc" -eq 0 ] && [ "$wrc" -eq 0 ] &&
	jq -e '.exact == false and any(.inexact_why[]; test("exec"))' "$tmp/x.json" >/dev/null
check "an injected process that execs: flagged, not exact; it exits 0" $? \
	"rc $trc/$wrc: $(cat "$tmp/x.err") $(jq -c '{exact, inexact_why}' "$tmp/x.json")"

# Two threads: the table's bias revoked (every operation then under its
# stripe's lock), every record still in, nothing left live once the workload
# freed its rings.
"$B/alloc_bench" -q -w churn 2 >"$tmp/t2.out" &
wp=$!
pids+=("$wp")
wait_line "$tmp/t2.out" '^waiting'
inject_go t2 "$wp"
kill -USR1 "$wp"
# alloc_bench -q churn 2: after SIGUSR1 each thread makes 5,000,000 mallocs
# and frees, then frees its ring's 4096 blocks and the ring: 10,008,194
# frees in all. Its rings may still fill (8194 mallocs) after the injection:
# those are seen allocated, the rest are frees of blocks from before it.
# (records also counts the interposer's others: batch and thread records)
ended_check "$wp" t2 "two threads (alloc_bench churn 2): every record, exact, nothing live at the end" \
	'.exact and .stats.live == 0 and .events.lost == 0 and
	(.groups[0].allocated_objects | . >= 10000000 and . <= 10008194) and
	.groups[0].allocated_objects + .glibc.frees_not_seen_allocated == 10008194 and
	.events.records >= .groups[0].allocated_objects + 10008194' \
	'{exact, live: .stats.live, events, objs: .groups[0].allocated_objects, glibc}'

# Still running at the end, its blocks allocated by one thread and freed by
# another: the snapshot is of one moment (the interposer's cut: every
# thread's records up to it, none after), so its live bytes are what the
# pipeline can hold then, never below zero. Without the cut each thread's
# last batch was missing: python3's http.server under wrk gave -15040.
if cc -O2 -pthread -o "$tmp/pipeline" tests/inject/pipeline.c; then
	"$tmp/pipeline" >"$tmp/pl.out" &
	wp=$!
	pids+=("$wp")
	wait_line "$tmp/pl.out" '^ready'
	max=$(sed -n 's/^ready max_live=//p' "$tmp/pl.out")
	for i in 1 2; do
		"$T" snapshot -p "$wp" --inject -d 2 -o "$tmp/pl$i.json" 2>"$tmp/pl$i.err"
		trc=$?
		[ "$trc" -eq 0 ] && jq -e --argjson m "$max" '.exact and .stats.live >= 0 and
			.stats.live <= $m and .stats.rounding >= 0 and
			.groups[0].allocated_objects > 1000' "$tmp/pl$i.json" >/dev/null
		check "two threads still running at the end, run $i: exact, live within 0..$max" $? \
			"rc $trc: $(cat "$tmp/pl$i.err") $(jq -c '{exact, inexact_why, live: .stats.live,
			rounding: .stats.rounding, objs: .groups[0].allocated_objects}' "$tmp/pl$i.json")"
		wait_uninjected "$wp"
	done
	# every block sampled: its sites hold the live bytes (but a thread's
	# first block since the start, never sampled: 128 bytes at most). With
	# the blocks' addresses for sample ids, the consumer's frees matched the
	# producer's next samples at those addresses: sites empty, live 640.
	"$T" snapshot -p "$wp" --inject --rate 1 -d 2 -o "$tmp/pl3.json" 2>"$tmp/pl3.err"
	trc=$?
	[ "$trc" -eq 0 ] && jq -e '.exact and .stats.live > 0 and (.sites | length) > 0 and
		(([.sites[].inuse_bytes] | add // 0) - .stats.live | fabs) <= 128' \
		"$tmp/pl3.json" >/dev/null
	check "two threads still running at the end, --rate 1: the sites hold the live bytes" $? \
		"rc $trc: $(cat "$tmp/pl3.err") $(jq -c '{exact, live: .stats.live,
		sites: [.sites[].inuse_bytes]}' "$tmp/pl3.json")"
	wait_uninjected "$wp"
	kill -TERM "$wp"
	wait "$wp"
	check "two threads still running at the end: the workload exits 0" $?
else # scripts/setup.sh installs the compiler (build-essential)
	skip "two threads still running at the end (pipeline.c)" "no C compiler" 6
fi
# the same in python3: bytes objects past its small-object allocator's 512
# bytes (glibc's malloc) made by one thread, dropped by another
cat >"$tmp/pipe.py" <<'PY'
import queue, threading, time
q = queue.Queue(maxsize=64)
def produce():
    n = 0
    while True:
        q.put(b"x" * (600 + n % 400))
        n += 1
def consume():
    while True:
        q.get()
for f in (produce, consume):
    threading.Thread(target=f, daemon=True).start()
print("ready", flush=True)
time.sleep(60)
PY
/usr/bin/python3 "$tmp/pipe.py" >"$tmp/pp.out" &
wp=$!
pids+=("$wp")
wait_line "$tmp/pp.out" '^ready'
for i in 1 2; do
	"$T" snapshot -p "$wp" --inject -d 2 -o "$tmp/pp$i.json" 2>"$tmp/pp$i.err"
	trc=$?
	[ "$trc" -eq 0 ] && jq -e '.exact and .stats.live >= 0 and .stats.rounding >= 0 and
		.groups[0].allocated_objects > 1000' "$tmp/pp$i.json" >/dev/null
	check "python3, two threads passing bytes, run $i: exact, live not below zero" $? \
		"rc $trc: $(cat "$tmp/pp$i.err") $(jq -c '{exact, inexact_why, live: .stats.live,
		rounding: .stats.rounding, objs: .groups[0].allocated_objects}' "$tmp/pp$i.json")"
	wait_uninjected "$wp"
done
kill "$wp"

# kill -9 of tally mid-trace: the process goes on, its GOT glibc's again
# (the interposer sees the probe's semaphore fall).
"$B/tests/inject_workload" >"$tmp/k.out" &
wp=$!
pids+=("$wp")
wait_line "$tmp/k.out" '^ready'
inject_go k "$wp" -d 30
kill -USR1 "$wp"
wait_line "$tmp/k.out" '^live='
kill -9 "$tp"
wait "$tp" 2>/dev/null
for _ in $(seq 40); do grep -qx tally-inject /proc/"$wp"/task/*/comm 2>/dev/null || break; sleep 0.05; done
kill -USR2 "$wp"
wait_line "$tmp/k.out" '^got='
grep -qx 'got=libc' "$tmp/k.out"
check "kill -9 of tally: the process's GOT is glibc's again, its thread gone" $? "$(cat "$tmp/k.out")"
kill -TERM "$wp"
wait "$wp"
check "kill -9 of tally: the process runs on and exits 0" $? "$(cat "$tmp/k.out")"

# Programs we did not write: output and exit status as without tally.
py=$(command -v python3 || true)
[ -x /usr/bin/python3 ] && py=/usr/bin/python3
cat >"$tmp/work.py" <<'EOF'
import json, sqlite3, time
t0 = time.time()
rows, n = [], 0
db = sqlite3.connect(":memory:")
db.execute("create table t (k integer primary key, v text)")
while time.time() - t0 < 2.5 or n < 20000:
    doc = json.dumps({"n": n, "items": list(range(n % 50)), "name": "x" * (n % 300)})
    rows.append(json.loads(doc)["n"])
    db.execute("insert into t values (?, ?)", (n, doc))
    if len(rows) > 2000:
        rows = rows[1000:]
    n += 1
print(db.execute("select count(*), sum(length(v)) from t where k < 20000").fetchone())
EOF
"$py" "$tmp/work.py" >"$tmp/py.expect"
"$py" "$tmp/work.py" >"$tmp/py.out" &
wp=$!
pids+=("$wp")
# injected once it runs its loop: its sqlite3 module is loaded
for _ in $(seq 200); do grep -q _sqlite3 /proc/"$wp"/maps 2>/dev/null && break; sleep 0.05; done
"$T" snapshot -p "$wp" --inject -o "$tmp/py.json" 2>"$tmp/py.err"
rc=$?
wait "$wp"
prc=$?
check "python3 (json, sqlite3): tally --inject exits 0" "$rc" "$(cat "$tmp/py.err")"
[ "$prc" -eq 0 ] && cmp -s "$tmp/py.expect" "$tmp/py.out"
check "python3: output and exit status unchanged" $? "rc $prc; $(cat "$tmp/py.out")"
jq -e '.target.attach == "injected" and .events.records > 10000 and .exact == true and
	.stats.live >= 0 and .events.lost == 0' "$tmp/py.json" >/dev/null
check "python3: every call recorded, exact since the injection" $? \
	"$(jq -c '{exact, inexact_why, live: .stats.live, events, glibc}' "$tmp/py.json")"

if command -v sqlite3 >/dev/null; then
	sql="with recursive c(x) as (select 1 union all select x + 1 from c where x < 3000000)
	     select count(*), sum(length(printf('%d-%s', x, hex(x)))) from c;"
	sqlite3 :memory: "$sql" >"$tmp/sq.expect"
	sqlite3 :memory: "$sql" >"$tmp/sq.out" &
	wp=$!
	pids+=("$wp")
	# injected once the shell has exec'd sqlite3 and loaded its library
	for _ in $(seq 200); do grep -q libsqlite3 /proc/"$wp"/maps 2>/dev/null && break; sleep 0.05; done
	"$T" snapshot -p "$wp" --inject -o "$tmp/sq.json" 2>"$tmp/sq.err"
	rc=$?
	wait "$wp"
	prc=$?
	[ "$rc" -eq 0 ] && [ "$prc" -eq 0 ] && cmp -s "$tmp/sq.expect" "$tmp/sq.out" &&
		jq -e '.target.attach == "injected" and .events.records > 0' "$tmp/sq.json" >/dev/null
	check "sqlite3 shell: injected while running, output and exit status unchanged" $? \
		"tally rc $rc, sqlite3 rc $prc: $(cat "$tmp/sq.err")"
else # scripts/setup.sh installs sqlite3 (Debian package sqlite3)
	skip "sqlite3 shell: injected while running" "sqlite3 not installed (apt-get install sqlite3)"
fi

# Refusals: one line, a non-zero status, the process unharmed.
refused() { # NAME PID PATTERN
	local out rc
	out=$("$T" snapshot -p "$2" --inject -d 1 -o "$tmp/r.json" 2>&1)
	rc=$?
	[ "$rc" -ne 0 ] && [ "$(wc -l <<<"$out")" -eq 1 ] && grep -q "$3" <<<"$out" &&
		kill -0 "$2" 2>/dev/null
	check "refused: $1" $? "rc $rc: $out"
}

"$T" snapshot --inject -d 1 -- /bin/true >/dev/null 2>"$tmp/u.err"
[ $? -eq 2 ] && grep -q 'needs -p PID' "$tmp/u.err"
check "refused: --inject without -p (usage, status 2)" $? "$(cat "$tmp/u.err")"

# unshare --pid --fork: the parent that stays outside can start no thread;
# the child inside, in its own mount and PID namespaces, is injected
unshare --mount --pid --fork "$B/tests/inject_workload" >"$tmp/u.out" &
up=$!
pids+=("$up")
wait_line "$tmp/u.out" '^ready'
refused "the parent of unshare --pid --fork" "$up" "unshared the PID namespace"
wp=$(pgrep -P "$up" | head -n 1)
inject_go u "$wp"
kill -USR1 "$wp"
wait_line "$tmp/u.out" '^live='
kill -TERM "$wp"
# its allocations since the injection, as it counted them (no library
# dlopened here); all freed at SIGTERM
objs=$(sed -n 's/.*allocs=\([0-9]*\).*/\1/p' "$tmp/u.out")
ended_check "$up" u "inside unshare --mount --pid --fork: injected, exact, its ${objs:-?} allocations, exits 0" \
	'.exact and .target.attach == "injected" and .groups[0].allocated_objects == '"${objs:-null}"' and
	.stats.live == 0' '{exact, inexact_why, live: .stats.live, objs: .groups[0].allocated_objects}'

sleep 30 &
sp=$!
pids+=("$sp")
strace -p "$sp" -o /dev/null &
st=$!
pids+=("$st")
for _ in $(seq 100); do [ "$(awk '/TracerPid/ {print $2}' /proc/$sp/status)" != 0 ] && break; sleep 0.05; done
refused "a process another tracer holds (strace)" "$sp" "already traced"
kill "$st" 2>/dev/null

if printf 'int main(void){for(;;)__builtin_ia32_pause();}' |
	cc -static -O2 -x c -o "$tmp/static" - 2>/dev/null; then
	"$tmp/static" &
	sp=$!
	pids+=("$sp")
	refused "a statically linked process" "$sp" "no glibc"
	kill "$sp"
else # Debian's libc6-dev has libc.a
	skip "refused: a statically linked process" "no static libc to build with (libc6-dev)"
fi

LD_PRELOAD=$B/libtally_alloc.so sleep 30 &
sp=$!
pids+=("$sp")
for _ in $(seq 200); do grep -q libtally_alloc /proc/"$sp"/maps 2>/dev/null && break; sleep 0.05; done
refused "a process on libtally_alloc" "$sp" "libtally_alloc already"
kill "$sp"

cp /bin/sleep "$tmp/suid_sleep" && chmod u+s "$tmp/suid_sleep"
"$tmp/suid_sleep" 30 &
sp=$!
pids+=("$sp")
# until the shell's child has exec'd it (over 0.5 s seen under load)
for _ in $(seq 100); do [ "$(readlink /proc/"$sp"/exe)" = "$tmp/suid_sleep" ] && break; sleep 0.05; done
refused "a set-user-ID program" "$sp" "set-user-ID"
kill "$sp"

"$py" -c '
import ctypes, os, signal, time
libc = ctypes.CDLL(None, use_errno=True)
PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2
class F(ctypes.Structure): _fields_ = [("code", ctypes.c_ushort), ("jt", ctypes.c_ubyte), ("jf", ctypes.c_ubyte), ("k", ctypes.c_uint)]
class P(ctypes.Structure): _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.POINTER(F))]
allow = (F * 1)(F(0x06, 0, 0, 0x7fff0000))
libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)
assert libc.prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, ctypes.byref(P(1, allow)), 0, 0) == 0
time.sleep(30)' &
sp=$!
pids+=("$sp")
for _ in $(seq 100); do grep -q 'Seccomp:[[:space:]]*2' /proc/$sp/status && break; sleep 0.05; done
refused "a process under a seccomp filter" "$sp" "seccomp"
kill "$sp"

# a process of another user (nobody) opens the library itself: tally copied
# under a directory that user cannot search is refused in one line that
# names it (dlopen failed there, and tally could only say "its dlerror()")
mkdir -p "$tmp/closed/bin" && chmod 700 "$tmp/closed"
cp "$T" "$(dirname "$T")"/libtally*.so "$tmp/closed/bin/"
setpriv --reuid=nobody --regid=nogroup --clear-groups sleep 30 &
sp=$!
pids+=("$sp")
for _ in $(seq 100); do [ "$(stat -c %U /proc/"$sp" 2>/dev/null)" = nobody ] &&
	[ "$(readlink /proc/"$sp"/exe)" != "$(command -v setpriv)" ] && break; sleep 0.05; done
T=$tmp/closed/bin/tally refused "a process whose user cannot read tally's library" "$sp" \
	"runs as uid $(id -u nobody), which cannot search /.*: --inject needs tally.s libraries"
kill "$sp"

"$T" snapshot -p 999999 --inject -d 1 -o "$tmp/n.json" 2>"$tmp/n.err"
[ $? -eq 5 ] && [ ! -e "$tmp/n.json" ]
check "refused: a PID that does not exist (status 5, no file)" $? "$(cat "$tmp/n.err")"

# a process that has exited (a zombie its parent has not reaped) has no maps:
# it is gone (status 5), not "no glibc"
(sleep 0.05 & exec sleep 5) &
zp=$!
pids+=("$zp")
zc=
for _ in $(seq 100); do
	zc=$(pgrep -P "$zp" | head -1)
	[ -n "$zc" ] && grep -q '^State:[[:space:]]*Z' /proc/"$zc"/status 2>/dev/null && break
	sleep 0.05
done
"$T" snapshot -p "$zc" --inject -d 1 -o "$tmp/z.json" 2>"$tmp/z.err"
[ $? -eq 5 ] && [ ! -e "$tmp/z.json" ] && grep -Eq 'no process|exited' "$tmp/z.err"
check "refused: a process that has exited (status 5, no file)" $? "$(cat "$tmp/z.err")"
kill "$zp" 2>/dev/null

finish
