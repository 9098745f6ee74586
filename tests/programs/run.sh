#!/usr/bin/env bash
# Real programs we did not write, run under tally (root): a bash script that
# forks a lot, a shim that execs a script that execs Python (json, sqlite3),
# the sqlite3 shell, sort of 50 MB and make -j2 of a small C project. Each is
# run twice: untraced, then under `tally snapshot -o FILE -- CMD` (which
# preloads the allocator), itself under `strace -f` so that every process of
# the tree is seen to end. Per program: the same output and exit status as
# untraced; a valid snapshot, exact and balanced; tally's Stats equal to the
# allocator's own at exit; no process killed by a signal. Each check prints
# "ok" or "FAIL"; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
HERE=$PWD/tests/programs
. tests/lib.sh

need_root programs
for t in jq strace sqlite3 python3 gcc make; do
	if ! command -v "$t" >/dev/null; then
		skip "programs (every one)" "$t is missing: scripts/setup.sh installs it"
		finish
		exit
	fi
done
# a make above us (make test) must not hand this suite its jobserver or level
unset MAKEFLAGS MFLAGS MAKELEVEL
export LC_ALL=C

# the eleven Stats fields
F11='["mapped","live","rounding","cache","span_free","returned","virgin","hysteresis","segment_overhead","large_count","spans_assigned"]'

# run_prog NAME CMD...: CMD untraced, then traced, with stdin from $IN
# (default /dev/null) and in the directory $DIR (default the repository);
# the function named by $BETWEEN, if any, runs between the two. Leaves
# $tmp/NAME.{u,t}.{out,err}, $tmp/NAME.snap.json, $tmp/NAME.strace, and sets
# urc (CMD's status untraced) and trc (tally's status).
run_prog() {
	local name=$1
	shift
	local in=${IN:-/dev/null} dir=${DIR:-$PWD}
	(cd "$dir" && exec env -u LD_PRELOAD timeout 120 "$@") <"$in" >"$tmp/$name.u.out" 2>"$tmp/$name.u.err"
	urc=$?
	[ -n "${BETWEEN:-}" ] && "$BETWEEN"
	(cd "$dir" && exec env -u LD_PRELOAD timeout 150 strace -f -qq -e trace=none -o "$tmp/$name.strace" \
		"$TALLY" snapshot -o "$tmp/$name.snap.json" -- "$@") <"$in" >"$tmp/$name.t.out" 2>"$tmp/$name.t.err"
	trc=$?
}

# checks NAME [OUT-NAME]: the four properties of the last run_prog NAME; the
# outputs compared are $tmp/NAME.{u,t}.out, or $tmp/OUT-NAME.{u,t}.out
checks() {
	local name=$1 out=${2:-$1} snap=$tmp/$1.snap.json err
	err="tally rc=$trc: $(head -n 1 "$tmp/$name.t.err" | head -c 200)"
	local us ts
	us=$(sha256sum <"$tmp/$out.u.out" | cut -c1-16)
	ts=$(sha256sum <"$tmp/$out.t.out" | cut -c1-16)
	check "$name: the same output as untraced" "$([ "$us" = "$ts" ]; echo $?)" \
		"sha256 untraced $us ($(wc -c <"$tmp/$out.u.out") bytes) traced $ts ($(wc -c <"$tmp/$out.t.out") bytes); $err
  first difference: $(cmp "$tmp/$out.u.out" "$tmp/$out.t.out" 2>&1 | head -n 1)"
	check "$name: tally exits 0, the target's exit status as untraced ($urc), no signal" \
		"$([ "$trc" -eq 0 ] && jq -e --argjson rc "$urc" '.target.exit_code == $rc and .target.signal == null' \
			"$snap" >/dev/null 2>&1; echo $?)" \
		"$err; target $(jq -c '.target | {pid, comm, exit_code, signal}' "$snap" 2>&1 | head -c 200)"
	check "$name: the snapshot is valid JSON, exact, balanced" \
		"$(jq -e '.exact == true and .stats.balanced == true' "$snap" >/dev/null 2>&1; echo $?)" \
		"$(jq -c '{exact, events, balanced: .stats.balanced}' "$snap" 2>&1 | head -c 300); $err"
	if [ "$urc" -lt 128 ]; then # the program ends normally
		check "$name: stats equals stats_inprocess on the 11 fields" \
			"$(jq -e --argjson f "$F11" '.stats_inprocess != null
				and ([.stats[$f[]]] == [.stats_inprocess[$f[]]])' "$snap" >/dev/null 2>&1; echo $?)" \
			"$(jq -c --argjson f "$F11" 'if .stats_inprocess == null then "stats_inprocess is null"
				else [$f[] as $k | select(.stats[$k] != .stats_inprocess[$k])
					| "\($k): tally \(.stats[$k]) in-process \(.stats_inprocess[$k])"] end' "$snap" 2>&1 | head -c 600)"
	fi
	# every process of the tree (issue 14): listed with how it ended, each exact
	check "$name: every process of the tree listed, ended, each exact" \
		"$(jq -e 'all(.processes[]; .exact and .target.exit_code != null)' "$snap" >/dev/null 2>&1
			echo $?)" \
		"$(jq -c '{n: (.processes | length), bad: [.processes[] | select((.exact and .target.exit_code != null) | not)
			| {pid: .target.pid, comm: .target.comm, exit: .target.exit_code, why: .inexact_why}]}' "$snap" 2>&1 | head -c 600)"
	local killed
	killed=$(grep -c 'killed by SIG' "$tmp/$name.strace" 2>/dev/null)
	check "$name: no process of the tree killed by a signal" \
		"$([ -e "$tmp/$name.strace" ] && [ "${killed:-0}" -eq 0 ]; echo $?)" \
		"${killed:-no strace log} killed: $(grep -o 'killed by SIG[A-Z0-9]*' "$tmp/$name.strace" 2>/dev/null |
			sort | uniq -c | tr -s ' \n' ' ')"
}

# 1. bash: command substitutions, a pipeline, a subshell, a background job
run_prog bash "$HERE/script.sh"
checks bash

# 2. a shim (sh) that execs a script (bash) that execs Python: the real
#    interpreter, then python3 through PATH (on this machine possibly a shim
#    itself, e.g. pyenv's, which forks and execs again)
real_py=$(python3 -c 'import sys; print(sys.executable)')
run_prog python "$HERE/shim.sh" "$real_py"
checks python
run_prog python-path "$HERE/shim.sh" python3
checks python-path

# 3. the sqlite3 shell: a database made untraced, queried twice
sqlite3 "$tmp/db.sqlite" <"$HERE/gen.sql"
IN=$HERE/query.sql run_prog sqlite3 sqlite3 -batch -init /dev/null "$tmp/db.sqlite"
checks sqlite3

# 4. sort of a 50 MB file (2.2 M lines): the sorted output by checksum
awk 'BEGIN { srand(11); for (i = 0; i < 2200000; i++)
	printf "%08x %07d %s\n", int(rand() * 4294967295), i, substr("abcdefghij", 1 + i % 10) }' >"$tmp/big.txt"
run_prog sort sort "$tmp/big.txt"
checks sort

# 5. make -j2 of a small C project, built twice in the same directory; the
#    output compared is make's stdout, the program's checksum and its output
cp -r "$HERE/cproj" "$tmp/cproj"
make_result() { # WHICH: u or t
	{
		cat "$tmp/make.$1.out"
		sha256sum "$tmp/cproj/prog" 2>&1 | cut -c1-64
		"$tmp/cproj/prog" 2>&1
	} >"$tmp/make-build.$1.out"
}
make_between() {
	make_result u
	make -s -C "$tmp/cproj" clean >/dev/null 2>&1
}
DIR=$tmp/cproj BETWEEN=make_between run_prog make make -j2
make_result t
checks make make-build

finish
