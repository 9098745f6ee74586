#!/usr/bin/env bash
# What the OOM killer took (docs/DESIGN.md §8): a process grown under a memory
# cgroup's limit until its OOM killer ends it keeps its figures as they were
# when it was chosen, the records its heaps held then included (read by
# bpf/tally_oom.bpf.h from inside it, since a SIGKILL leaves no exit
# hand-over), and tally says which cgroup and limit killed it.
#
# The workload (tests/oom/grow.c) joins a new memory cgroup (96 MiB, no swap:
# cgroup v2's memory.max and memory.swap.max, or v1's memory.limit_in_bytes
# and memory.memsw.limit_in_bytes where the memory controller is on v1),
# then mallocs blocks, touching every page, and writes after each block the
# bytes it holds: its truth.
#
# usage: BUILD=build tests/oom/run.sh   (root: BPF, cgroups)
#
# Checks, for 256 KiB blocks (large mappings, one record each) and 1 KiB
# blocks (small ones: thousands of records held in a heap's batch between
# two hand-overs), and a tree (sh -c, the grown process a child of it):
#   *-signal     the target's end: SIGKILL
#   *-oom-kill   target.oom_kill is true (the shell's, in the tree: false)
#   *-cgroup     oom.cgroup is the cgroup made, and its version
#   *-limit      oom.limit is 96 MiB, limit_cgroup that cgroup, limit_file
#   *-line       the one stderr line, word for word
# and a process in a cgroup without a limit of its own inside the limited
# one (nested-*: the limit is its parent's, said so).
#   *-live       live within one block of the workload's last total
#   *-exact      exact, every heap read whole at the choice
#   threads-*    the same with four threads growing at once, a heap each
#   bystander-*  the same for a process the OOM killer takes from another
#                process's charge (its heaps read as it exits), and for that
#                other one, killed next
#   top-*        tally top -b's last frame: its status line, and live there
# Prints "N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$(realpath "$BUILD")/tally}
GROW=$(realpath "$BUILD")/tests/oom_grow
. tests/lib.sh

need_root oom

LIMIT=$((96 << 20))
cgdir=
suite_cleanup() {
	# the workload is dead (killed) and reaped by tally, which has ended:
	# the cgroups are empty; a second try covers a reap still in flight
	local d
	for d in "$cgdir/inner" "$cgdir"; do
		if [ -n "$cgdir" ] && [ -d "$d" ]; then
			rmdir "$d" 2>/dev/null || { sleep 0.5; rmdir "$d"; }
		fi
	done
}

# Where to make the cgroup: cgroup v2 with the memory controller, else v1's
# memory hierarchy (this machine's own cgroup there, so that a nested setup
# keeps its limits), else nothing. Sets cgdir, cgpath (its path in its
# hierarchy, as tally shows it), cgver, limit_file.
v2=$(awk '$3 == "cgroup2" { print $2; exit }' /proc/mounts)
v1=$(awk '$3 == "cgroup" && $4 ~ /(^|,)memory(,|$)/ { print $2; exit }' /proc/mounts)
if [ -n "$v2" ] && grep -qw memory "$v2/cgroup.controllers" 2>/dev/null; then
	cgver=2
	cgpath=/tally-oom-test-$$
	cgdir=$v2$cgpath
	limit_file=memory.max
	grep -qw memory "$v2/cgroup.subtree_control" || echo +memory >"$v2/cgroup.subtree_control"
	mkdir "$cgdir" && echo "$LIMIT" >"$cgdir/memory.max" && echo 0 >"$cgdir/memory.swap.max"
elif [ -n "$v1" ]; then
	cgver=1
	own=$(awk -F: '$2 ~ /(^|,)memory(,|$)/ { print $3; exit }' /proc/self/cgroup)
	cgpath=${own%/}/tally-oom-test-$$
	cgdir=$v1$cgpath
	limit_file=memory.limit_in_bytes
	mkdir "$cgdir" && echo "$LIMIT" >"$cgdir/memory.limit_in_bytes" &&
		{ [ ! -e "$cgdir/memory.memsw.limit_in_bytes" ] ||
			echo "$LIMIT" >"$cgdir/memory.memsw.limit_in_bytes"; }
else
	skip "oom" "no memory cgroup controller mounted (cgroup v2 or v1)" 54
	finish
	exit
fi
if [ ! -d "$cgdir" ]; then
	check oom-cgroup-made 1 "cannot make $cgdir with a $LIMIT-byte limit"
	finish
	exit
fi

# One grown process under tally: NAME BLOCK [sh|inner|THREADS]. Its document
# in $tmp/NAME.json, tally's stderr in $tmp/NAME.err, its truth in
# $tmp/NAME.truth.
grow() {
	local dir=$cgdir threads=1
	[ "${3:-}" = inner ] && dir=$cgdir/inner
	[[ "${3:-}" =~ ^[0-9]+$ ]] && threads=$3
	local cmd=("$GROW" "$dir" "$2" "$tmp/$1.truth" "$threads")
	# a child of a shell that waits for it (the "; true" keeps dash from
	# exec'ing the last command)
	[ "${3:-}" = sh ] && cmd=(sh -c '"$0" "$@"; true' "${cmd[@]}")
	timeout 180 "$TALLY" snapshot -o "$tmp/$1.json" -- "${cmd[@]}" >"$tmp/$1.out" 2>"$tmp/$1.err"
}

# The checks of one run: NAME BLOCK THREADS JQ-PATH-OF-THE-GROWN-PROCESS
# [ITS-CGROUP] (its cgroup: the limited one unless said)
verify() {
	local name=$1 block=$2 threads=$3 p=$4 doc=$tmp/$1.json truth live pid on=
	local vic=${5:-$cgpath}
	[ "$vic" != "$cgpath" ] && on=" on $cgpath"
	if ! jq -e . "$doc" >/dev/null 2>&1; then
		check "$name-document" 1 "no document: $(tail -c 400 "$tmp/$name.err")"
		return
	fi
	jq -e "$p.target.signal == \"SIGKILL\"" "$doc" >/dev/null
	check "$name-signal" $? "$(jq -c "$p.target | {exit_code, signal}" "$doc")"
	jq -e "$p.target.oom_kill == true" "$doc" >/dev/null
	check "$name-oom-kill" $? "$(jq -c "$p.target | {oom_kill, oom}" "$doc")"
	jq -e --arg c "$vic" --argjson v "$cgver" \
		"$p.target.oom | .cgroup == \$c and .cgroup_version == \$v" "$doc" >/dev/null
	check "$name-cgroup" $? "want $vic (v$cgver): $(jq -c "$p.target.oom" "$doc")"
	jq -e --arg c "$cgpath" --argjson l "$LIMIT" --arg f "$limit_file" \
		"$p.target.oom | .limit == \$l and .limit_cgroup == \$c and .limit_file == \$f" \
		"$doc" >/dev/null
	check "$name-limit" $? "want $LIMIT in $cgpath/$limit_file: $(jq -c "$p.target.oom" "$doc")"
	pid=$(jq -r "$p.target.pid" "$doc")
	grep -qxF "tally: $pid (oom_grow) was killed by the OOM killer: cgroup $vic, $limit_file 96.0 MiB$on" \
		"$tmp/$name.err"
	check "$name-line" $? "$(cat "$tmp/$name.err")"
	# The truth T is the sum of the workload's lines: what was live before
	# its first block (the allocator's own figure) and each thread's last
	# total, written after a block was allocated and touched. The kill comes
	# while a thread touches its next block's pages (malloc has returned:
	# its record is in the heap's batch, live has BLOCK more), or inside
	# malloc before the record is written (the allocator touching its own
	# fresh pages: nothing more); the truth's pwrite rewrites an already
	# charged page and cannot be the charge that kills. Another thread may
	# still run for the microseconds its SIGKILL takes to land, but cannot
	# finish a block then: a block is a fresh mapping (the one run of small
	# blocks has one thread), whose mmap's return or first page fault
	# delivers the signal. live counts requested bytes, so no rounding enters:
	# T <= live <= T + THREADS * BLOCK, exactly.
	truth=$(awk '$1 !~ /^[0-9]+$/ { bad = 1 } { t += $1 } END { if (!bad && NR) print t }' \
		"$tmp/$name.truth" 2>/dev/null)
	local most=$((threads * block))
	live=$(jq -r "$p.stats.live" "$doc")
	[[ "$truth" =~ ^[0-9]+$ ]] && [ "$truth" -gt 0 ] && [[ "$live" =~ ^[0-9]+$ ]] &&
		[ "$live" -ge "$truth" ] && [ "$live" -le $((truth + most)) ]
	check "$name-live" $? "live $live, the workload's truth '$truth' (+ at most $most)"
	jq -e "$p | .exact and .target.oom.held_records_read" "$doc" >/dev/null
	check "$name-exact" $? "$(jq -c "$p | {exact, inexact_codes, oom: .target.oom}" "$doc")"
	echo "# $name: truth $truth, live $live, block $block, threads $threads"
}

grow large $((256 << 10))
verify large $((256 << 10)) 1 "(.)"
grow small 1024
verify small 1024 1 "(.)"
grow tree $((256 << 10)) sh
verify tree $((256 << 10)) 1 '(.processes[] | select(.target.comm == "oom_grow"))'
# four threads, a heap each, all read at the choice (64 KiB blocks: large
# mappings, one mmap each, as the bound above needs)
grow threads $((64 << 10)) 4
verify threads $((64 << 10)) 4 "(.)"
jq -e '.target.oom.heaps_read >= 4' "$tmp/threads.json" >/dev/null
check threads-heaps $? "$(jq -c '.target.oom' "$tmp/threads.json")"
jq -e '.target.oom_kill == false and .target.oom == null' "$tmp/tree.json" >/dev/null
check tree-shell-not-killed $? "$(jq -c '.target | {comm, oom_kill, oom}' "$tmp/tree.json")"

# The killer in another process: a stops at 80 MiB and waits; b grows in
# the same cgroup until its charge runs the OOM killer, which takes a, the
# larger, from b's thread, where a's memory cannot be read: a's heaps are
# read as its last thread exits (the same moment: none of its code runs
# after its SIGKILL). Then b is killed by its own charge.
timeout 180 "$TALLY" snapshot -o "$tmp/by.json" -- sh -c \
	'"$0" "$1" 262144 "$2/bystander-a.truth" 1 83886080 &
	while [ ! -e "$2/bystander-a.truth.stopped" ]; do sleep 0.05; done
	"$0" "$1" 262144 "$2/bystander-b.truth"; wait' "$GROW" "$cgdir" "$tmp" >"$tmp/by.out" 2>"$tmp/by.err"
for n in a b; do cp "$tmp/by.json" "$tmp/bystander-$n.json"; cp "$tmp/by.err" "$tmp/bystander-$n.err"; done
# the tree's processes by birth: a, then b
verify bystander-a $((256 << 10)) 1 '([.processes[] | select(.target.comm == "oom_grow")][0])'
verify bystander-b $((256 << 10)) 1 '([.processes[] | select(.target.comm == "oom_grow")][1])'
jq -e '[.processes[] | select(.target.comm == "oom_grow") | .target.oom |
	[.killer_in_victim, .read_at_exit]] == [[false, true], [true, false]]' "$tmp/by.json" >/dev/null
check bystander-where $? "$(jq -c '[.processes[] | select(.target.comm == "oom_grow") | .target.oom]' "$tmp/by.json")"

# a cgroup of no limit inside the limited one: the OOM is its parent's
mkdir "$cgdir/inner"
# (v2: the controller given to the children, or inner would share its parent's)
[ "$cgver" = 2 ] && echo +memory >"$cgdir/cgroup.subtree_control"
grow nested $((256 << 10)) inner
verify nested $((256 << 10)) 1 "(.)" "$cgpath/inner"

# tally top's frames until the target's end: the last one says how it ended,
# and shows live as of the choice (the same bound as verify's)
block=$((256 << 10))
timeout 180 "$TALLY" top -b -i 100 -- "$GROW" "$cgdir" "$block" "$tmp/top.truth" \
	>"$tmp/top.txt" 2>"$tmp/top.err"
awk '/^--- frame/ { f = "" } { f = f $0 "\n" } END { printf "%s", f }' "$tmp/top.txt" >"$tmp/top.last"
grep -qE '^target: oom_grow, .*, target killed by the OOM killer \(status 137\)$' "$tmp/top.last"
check top-status $? "$(head -3 "$tmp/top.last") $(tail -c 300 "$tmp/top.err")"
truth=$(awk '$1 !~ /^[0-9]+$/ { bad = 1 } { t += $1 } END { if (!bad && NR) print t }' \
	"$tmp/top.truth" 2>/dev/null)
live=$(sed -n 's/^identity: mapped [0-9]* = live \([0-9]*\) .*/\1/p' "$tmp/top.last")
[[ "$truth" =~ ^[0-9]+$ ]] && [ "$truth" -gt 0 ] && [[ "$live" =~ ^[0-9]+$ ]] &&
	[ "$live" -ge "$truth" ] && [ "$live" -le $((truth + block)) ]
check top-live $? "live '$live', the workload's truth '$truth' (+ at most $block)"
finish
