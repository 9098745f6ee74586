#!/usr/bin/env bash
# Children of a traced process are never harmed (issue 11, part 1): on kernel
# 6.18 a probe site that has been hit becomes a call into a trampoline page
# that fork does not copy. Under `tally snapshot`, after the parent's batches:
# children made by fork (ending by exit and by _exit, forking again), from a
# second thread, with a pthread_atfork handler that allocates, by the raw fork
# system call, by vfork + exec and by posix_spawn, and bash's command
# substitutions. Each must exit 0, and the parent's snapshot stay exact and
# equal to the allocator's own figures. TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
WL=${WL:-$PWD/$BUILD/tests/fork_workload}
. tests/lib.sh

need_root fork

# EXACT: the snapshot in $1 is exact, balanced and equal to the allocator's own
exact() {
	jq -e ".exact and .stats.balanced and .target.exit_code == 0 and $STATS_OWN" "$1" >/dev/null 2>&1
}

for mode in exit _exit nested threads atfork rawfork vfork spawn; do
	timeout 120 "$TALLY" snapshot -o "$tmp/$mode.json" -- "$WL" "$mode" >"$tmp/$mode.out" 2>"$tmp/$mode.err"
	rc=$?
	check "fork $mode: every child exits 0" \
		"$([ $rc -eq 0 ] && grep -q "^$mode: 0 of 20 children failed" "$tmp/$mode.out"; echo $?)" \
		"rc=$rc $(head -c 300 "$tmp/$mode.out") $(head -c 300 "$tmp/$mode.err")"
	check "fork $mode: the parent's snapshot is exact and its own" \
		"$(exact "$tmp/$mode.json"; echo $?)" \
		"$(jq -c '{exact, target, b: .stats.balanced, stats, stats_inprocess}' "$tmp/$mode.json" 2>&1 | head -c 600)"
done

# the issue's reproduction: 100 command substitutions in a traced bash
script='bad=0; for i in $(seq 100); do x=$(echo $i); [ "$x" = "$i" ] || bad=$((bad+1)); done; echo bad=$bad'
out=$(timeout 120 "$TALLY" snapshot -o "$tmp/bash.json" -- bash -c "$script" 2>"$tmp/bash.err")
check "bash: 100 command substitutions of a traced shell" "$([ "$out" = bad=0 ]; echo $?)" \
	"$out $(head -c 300 "$tmp/bash.err")"
check "bash: the shell's snapshot is exact and its own" "$(exact "$tmp/bash.json"; echo $?)" \
	"$(jq -c '{exact, target, stats_inprocess}' "$tmp/bash.json" 2>&1 | head -c 400)"

# a child forked while traced and still running after tally stopped: it was
# made untraced, so it goes on unharmed (its parent's probes are gone too)
timeout 60 "$TALLY" snapshot -o "$tmp/late.json" -- bash -c \
	'(sleep 1; x=$(echo late); [ "$x" = late ] && echo survived >'"$tmp"'/late.out) & exit 0' \
	>/dev/null 2>&1
wait_file "$tmp/late.out"
check "a child that outlives tally goes on unharmed" "$(grep -q survived "$tmp/late.out"; echo $?)" \
	"$(cat "$tmp/late.out" 2>&1)"

finish
