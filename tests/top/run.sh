#!/usr/bin/env bash
# Integration tests of `tally top` (root): batch frames, the live view in a
# real terminal (a private tmux server), names that attack the terminal,
# NO_COLOR, and bad options. Each check prints "ok" or "FAIL" with what it
# saw; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
DEMO=$PWD/$BUILD/demo_workload
EVIL=$PWD/$BUILD/tests/top_evil_workload
SITES_WL=$PWD/$BUILD/tests/profile/sites_workload # tests/profile/sites_workload.c
GROUPS_RE='ingest|decode|render|layout|cache' # demo/workload.c
TM=(tmux -L "tallytest$$" -f /dev/null)
S=tallytest
suite_cleanup() {
	"${TM[@]}" kill-server 2>/dev/null
	# the demo runs on after tally quits (as with snapshot): stop ours
	for p in $(cat "$tmp"/*.pid 2>/dev/null); do kill "$p" 2>/dev/null; done
}
. tests/lib.sh


need_root top
if ! command -v tmux >/dev/null; then
	echo "FAIL - tmux is not installed (apt-get install tmux)"
	echo "0 passed, 1 failed"
	exit 1
fi

# the pid in a batch file's first header, so that cleanup can stop it
remember_pid() { # FILE NAME
	sed -nE 's/^target: .*, pid ([0-9]+), .*/\1/p' "$1" | head -n1 >"$tmp/$2.pid"
}

# Group names of each frame's table rows: "K NAME" per line.
frame_groups() {
	awk '/^--- frame [0-9]+ ---$/ { k = $3 } $1 ~ /^[0-9]+$/ && NF == 12 && k { print k, $2 }' "$1"
}

# 1. batch: exactly 3 frames, each with every demo group and its figures
timeout 60 "$TALLY" top -b -n 3 -i 300 -- "$DEMO" -s 3 >"$tmp/b.txt" 2>"$tmp/b.err"
rc=$?
remember_pid "$tmp/b.txt" b
n=$(grep -c '^--- frame [0-9]* ---$' "$tmp/b.txt")
check "batch: -b -n 3 exits 0 with exactly 3 frames" "$([ $rc -eq 0 ] && [ "$n" -eq 3 ]; echo $?)" \
	"rc=$rc frames=$n $(head -c 300 "$tmp/b.err")"
missing=""
for k in 1 2 3; do
	for g in ingest decode render layout cache; do
		frame_groups "$tmp/b.txt" | grep -qx "$k $g" || missing="$missing frame$k:$g"
	done
done
check "batch: every frame has a row for each demo group" "$([ -z "$missing" ]; echo $?)" \
	"missing:$missing"
# figures: CPU %, live, peak, rates and the rest are numbers (rates are known from
# frame 1: the first frame's base is the attach; the peak, as the demo runs on
# tally's allocator)
bad=$(awk '$1 ~ /^[0-9]+$/ && NF == 12 && $2 ~ /^('"$GROUPS_RE"')$/ {
	for (i = 3; i <= 12; i++) if ($i !~ /^-?[0-9]+(\.[0-9])?$/) { print; break } }' "$tmp/b.txt")
check "batch: every group row has its ten figures" "$([ -z "$bad" ]; echo $?)" "$bad"
# PEAK ($5): each group's live at its process's peak; the root's groups add
# up to its peak of live in the header, to the byte (the replay's figures at
# one record; "~" when that record is not one moment of the process)
peaks=$(awk '/^--- frame/ { if (k) print k, pk, sum; k = $3; sum = 0; blk = 0 }
	/^peak: live/ { v = $3; sub(/^~/, "", v); pk = v } /^process / { blk++ }
	blk == 1 && $1 ~ /^[0-9]+$/ && NF == 12 { sum += $5 } END { print k, pk, sum }' "$tmp/b.txt")
check "batch: the root's groups' PEAK add up to the header's peak in every frame" \
	"$(echo "$peaks" | awk 'NF == 3 && $2 > 0 && $2 == $3 { n++ } END { exit n != 3 }'; echo $?)" \
	"frame, peak, sum: $(echo $peaks)"
check "batch: the header (its peak too), identity and bar in every frame" \
	"$([ "$(grep -c '^events: .* received, .* lost' "$tmp/b.txt")" -eq 3 ] &&
		[ "$(grep -cE '^peak: live ~?[0-9]+ at [0-9]+\.[0-9] s' "$tmp/b.txt")" -eq 3 ] &&
		[ "$(grep -c '^identity: mapped [0-9]* = live -\?[0-9]* + rounding' "$tmp/b.txt")" -eq 3 ] &&
		[ "$(grep -c '^bar: \[[LrcfRvho]*\]' "$tmp/b.txt")" -eq 3 ]; echo $?)" \
	"$(grep -E '^(events|peak|identity|bar):' "$tmp/b.txt" | head -4)"
allocs=$(awk '/^--- frame/ { k = $3 } k >= 2 && $2 == "render" && NF == 12 { print $7 }' "$tmp/b.txt")
check "batch: render allocates (ALLOC/s > 0 in frames 2 and 3)" \
	"$(echo "$allocs" | awk 'NF { n++; if ($1 <= 0) bad = 1 } END { exit !(n == 2 && !bad) }'; echo $?)" \
	"ALLOC/s: $allocs"

# 1b. the target exits before -n frames: a last frame that says so, then the end
timeout 60 "$TALLY" top -b -n 50 -i 200 -- "$DEMO" -s 1 >"$tmp/e.txt" 2>"$tmp/e.err"
rc=$?
n=$(grep -c '^--- frame [0-9]* ---$' "$tmp/e.txt")
last=$(awk '/^--- frame/ { f = "" } { f = f $0 "\n" } END { printf "%s", f }' "$tmp/e.txt")
check "batch: a target that exits first ends the frames with 'target exited (status 0)'" \
	"$([ $rc -eq 0 ] && [ "$n" -ge 2 ] && [ "$n" -lt 50 ] &&
		echo "$last" | grep -q 'target exited (status 0)' &&
		echo "$last" | grep -qE '^ +[0-9]+ render '; echo $?)" \
	"rc=$rc frames=$n $(echo "$last" | head -3)"

# 1c. stdout not a terminal, no -b: batch frames all the same
timeout 60 "$TALLY" top -n 1 -i 200 -- "$DEMO" -s 1 2>"$tmp/p.err" | cat >"$tmp/p.txt"
check "without a terminal and without -b: batch frames" \
	"$(grep -q '^--- frame 1 ---$' "$tmp/p.txt"; echo $?)" "$(head -c 200 "$tmp/p.txt" "$tmp/p.err")"

# 1d. the sites view: the heap profile by call site, each site's stack named
#     by the workload's own functions. The workload says "ready" (on tally's
#     stderr) once its three sites are done, then waits on its stdin (a FIFO
#     held open here): frame F, the second to begin after "ready", shows
#     all three (a fixed -n 2 -i 1000 missed keep_large on a loaded
#     machine, where keep_small takes seconds); then the FIFO is closed,
#     the workload exits, and so does tally.
sites_rows() { # FILE: "K IN_USE ALLOCATED GROUP LEAF PEAK" per site row of frame K
	awk '/^--- frame [0-9]+ ---$/ { k = $3; t = 0 }
		/^ +IN USE +PEAK +OBJECTS +ALLOCATED +GROUP +PID STACK$/ { t = 1; next }
		/^$/ { t = 0 } t && k { print k, $1, $4, $5, $7, $2 }' "$1"
}
if [ ! -x "$SITES_WL" ]; then
	check "the sites workload is built" 1 "no $SITES_WL (make $BUILD/tests/profile/sites_workload)"
else
	mkfifo "$tmp/sites.in"
	exec 7<>"$tmp/sites.in"
	# (7>&-: the workload must not hold the FIFO's writing end itself)
	timeout 120 "$TALLY" top -b -n 1000 -i 300 --view sites -- "$SITES_WL" wait <"$tmp/sites.in" \
		>"$tmp/s.txt" 2>"$tmp/s.err" 7>&- &
	sp=$!
	pids+=("$sp")
	wait_line "$tmp/s.err" '^ready$' 60
	F=$(($(grep -c '^--- frame [0-9]* ---$' "$tmp/s.txt") + 2))
	wait_line "$tmp/s.txt" "^--- frame $((F + 1)) ---$" 30 # frame F written whole
	exec 7>&- # the workload reads the end of its input, and exits
	wait "$sp"
	rc=$?
	remember_pid "$tmp/s.txt" s
	sites_rows "$tmp/s.txt" >"$tmp/s.rows"
	check "sites view, batch: exits 0 as its target does, the frame after the sites with a sites table" \
		"$([ $rc -eq 0 ] && grep -q "^$F " "$tmp/s.rows" && grep -q 'target exited (status 0)' "$tmp/s.txt"; echo $?)" \
		"rc=$rc frame $F: $(tail -8 "$tmp/s.txt") $(head -c 300 "$tmp/s.err")"
	check "sites view, batch: a site of group cache whose stack begins at keep_small, bytes in use" \
		"$(awk '$4 == "cache" && $5 == "keep_small" && $2 > 0 { f = 1 } END { exit !f }' "$tmp/s.rows"; echo $?)" \
		"$(cat "$tmp/s.rows")"
	check "sites view, batch: the frame after the sites: keep_large holds bytes, churn none but allocated some" \
		"$(awk -v f="$F" '$1 == f && $5 == "keep_large" && $2 > 0 { l = 1 }
			$1 == f && $5 == "churn" && $2 == 0 && $3 > 0 { c = 1 }
			END { exit !(l && c) }' "$tmp/s.rows"; echo $?)" "frame $F: $(grep "^$F " "$tmp/s.rows")"
	# the workload's live only grows until its sites are done, and what it
	# keeps it keeps: both kept sites held at the peak what they hold now
	check "sites view, batch: PEAK, the frame after the sites: keep_small and keep_large at the peak as now" \
		"$(awk -v f="$F" '$1 == f && ($5 == "keep_small" || $5 == "keep_large") && $2 > 0 && $6 == $2 { n++ }
			END { exit n != 2 }' "$tmp/s.rows"; echo $?)" "frame $F: $(grep "^$F " "$tmp/s.rows")"
	check "sites view, batch: most bytes in use first" \
		"$(awk '$1 == k && $2 > prev { bad = 1 } { k = $1; prev = $2 } END { exit bad }' "$tmp/s.rows"; echo $?)" \
		"$(cat "$tmp/s.rows")"
	check "sites view, batch: the stack goes on to the caller ('keep_small < main')" \
		"$(grep -qE ' keep_small < main( |$)' "$tmp/s.txt"; echo $?)" "$(grep keep_small "$tmp/s.txt" | head -2)"
fi
timeout 60 "$TALLY" top -b -n 1 -i 200 --no-sample --view sites -- "$DEMO" -s 1 >"$tmp/ns.txt" 2>&1
rc=$?
remember_pid "$tmp/ns.txt" ns
check "sites view, --no-sample: the table says so in one line" \
	"$([ $rc -eq 0 ] && grep -qx 'no sites: sampling is off (--no-sample)' "$tmp/ns.txt"; echo $?)" \
	"rc=$rc $(tail -4 "$tmp/ns.txt")"

# 2. the live view in a real terminal
"${TM[@]}" new-session -d -s "$S" -x 200 -y 50 \
	env -i PATH="$PATH" HOME="$HOME" TERM=screen-256color PS1='tallytest$ ' \
	bash --norc --noprofile
pane() { "${TM[@]}" capture-pane -t "$S" -p "$@"; }
wait_pane() { # REGEX TENTHS
	for _ in $(seq "$2"); do pane | grep -qE -- "$1" && return 0; sleep 0.1; done
	return 1
}
# The screen, not the clock, says when a key or a resize has been dealt
# with: each wait below is for what the view draws in answer (a sort mark,
# a view's name, a frame's size), and the check after it then reads it.
until_ok() { # TENTHS CMD...: until CMD succeeds
	local n=$1
	shift
	for _ in $(seq "$n"); do "$@" && return 0; sleep 0.1; done
	return 1
}
table() { pane | awk '$1 ~ /^[0-9]+$/ && NF == 12'; }
names() { table | awk '{ print $2 }' | tr '\n' ' '; }
five_groups() { [ "$(table | awk '{ print $2 }' | grep -cE "^($GROUPS_RE)$")" -eq 5 ]; }
# a whole frame of LINES lines: the header on top, the footer on the last line
framed() { # LINES
	pane | head -1 | grep -q '^tally top ' && [ "$(pane | wc -l)" -eq "$1" ] &&
		pane | tail -1 | grep -q '^q Quit'
}
stty_to() { # FILE: the shell in the pane writes its terminal's modes there, whole
	"${TM[@]}" send-keys -t "$S" "stty -g >$1.part && mv $1.part $1" Enter
	wait_file "$1"
}
wait_pane 'tallytest\$' 50
stty_to "$tmp/stty.before"
# (-s 120: it runs on past the checks below, on a busy machine too (with
# -s 20 it ended before them under load); q ends tally, a kill the demo)
t0=$(date +%s)
"${TM[@]}" send-keys -t "$S" "$TALLY top -i 200 -- $DEMO -s 120; echo TALLY_EXIT=\$?" Enter
wait_pane '^ +[0-9]+ render ' 100
until_ok 100 five_groups # each group's row comes with its first figures
table >"$tmp/t1"
got=$(awk '{ print $2 }' "$tmp/t1" | grep -cE "^($GROUPS_RE)$")
check "live: a row per demo group" "$([ "$got" -eq 5 ]; echo $?)" "$(pane | head -20)"
# the uptime no more than the time since the command was typed (a loaded
# machine may take seconds to attach: not a fixed bound)
up=$(pane | sed -nE '1s/^tally top  demo_workload \(pid [0-9]+, started\)  up ([0-9]+):([0-9]{2}):([0-9]{2}).*/\1 \2 \3/p' |
	awk '{ print $1 * 3600 + $2 * 60 + $3 }')
check "live: the header (target, uptime, events, lost, exact) and the identity bar" \
	"$([ -n "$up" ] && [ "$up" -le $(($(date +%s) - t0 + 1)) ] &&
		pane | grep -qE '^events [0-9.]+[KM]?/s  received [0-9]+  lost 0  figures (NOT )?exact' &&
		pane | grep -qE '^\[[LrcfRvho]+\]$' && pane | grep -q 'segment_overhead' &&
		pane | head -1 | grep -qE '  peak ~?[0-9.]+[BKMGTPE] at [0-9]+\.[0-9]s'; echo $?)" \
	"$(pane | head -6)"
pane | sed -nE 's/.*\(pid ([0-9]+), .*/\1/p' | head -n1 >"$tmp/live.pid"
changed() { table >"$tmp/t2" && ! cmp -s "$tmp/t1" "$tmp/t2"; }
until_ok 100 changed
check "live: figures change between two captures (10 s at most)" $? "$(cat "$tmp/t1")"
check "live: colors in a terminal that has them" \
	"$(pane -e | grep -qE $'\e\\[[0-9;]*4[0-7]m'; echo $?)" "no background color in capture -e"
"${TM[@]}" send-keys -t "$S" n
wait_pane '^ +ID\^NAME ' 100 # the sort mark: up, on NAME
order=$(names)
want=$(names | tr ' ' '\n' | grep . | LC_ALL=C sort | tr '\n' ' ')
check "live: 'n' sorts by name, A to Z" \
	"$([ "$order" = "$want" ] && [ "$(echo "$order" | wc -w)" -ge 6 ]; echo $?)" "order: $order"
"${TM[@]}" send-keys -t "$S" n
wait_pane '^ +IDvNAME ' 100
order=$(names)
want=$(names | tr ' ' '\n' | grep . | LC_ALL=C sort -r | tr '\n' ' ')
check "live: 'n' again reverses" \
	"$([ "$order" = "$want" ] && [ "$(echo "$order" | wc -w)" -ge 6 ]; echo $?)" "order: $order"
"${TM[@]}" send-keys -t "$S" l
wait_pane ' vLIVE ' 100
check "live: 'l' sorts by live bytes, most first" \
	"$(table | awk '{ v = $4; m = 1; if (v ~ /K$/) m = 1024; else if (v ~ /M$/) m = 1048576;
		else if (v ~ /G$/) m = 1073741824; sub(/[BKMG]$/, "", v); x = v * m;
		if (NR > 1 && x > prev) bad = 1; prev = x } END { exit bad }'; echo $?)" "$(table)"
"${TM[@]}" send-keys -t "$S" m
wait_pane ' vPEAK ' 100
check "live: 'm' sorts by live bytes at the peak, most first" \
	"$(table | awk '{ v = $5; m = 1; if (v ~ /K$/) m = 1024; else if (v ~ /M$/) m = 1048576;
		else if (v ~ /G$/) m = 1073741824; sub(/[BKMG]$/, "", v); x = v * m;
		if (NR > 1 && x > prev) bad = 1; prev = x } END { exit bad }'; echo $?)" "$(table)"
"${TM[@]}" send-keys -t "$S" h
sites_table() { pane | grep -E '^ +[0-9.]+[BKMGTPE] +([0-9.]+[BKMGTPE]|-) +[0-9.]+[KMGTP]? +[0-9.]+[BKMGTPE] +[^ ]+ +[0-9]+ [^ ]'; }
wait_pane '^ IN USE   vPEAK OBJECTS ALLOCATED GROUP +PID STACK' 100
# the sites come with the view's first frame of samples
until_ok 100 eval 'sites_table | grep -qE " ($GROUPS_RE|root) "'
check "live: 'h' shows the heap's sites (bytes in use, at the peak (m: by it), group, pid, stack)" \
	"$(pane | grep -qE '^ IN USE   vPEAK OBJECTS ALLOCATED GROUP +PID STACK' &&
		pane | grep -q 'view sites' && sites_table | grep -qE " ($GROUPS_RE|root) "; echo $?)" \
	"$(pane | sed -n 1,14p)"
"${TM[@]}" send-keys -t "$S" l
wait_pane '^vIN USE    PEAK OBJECTS ALLOCATED GROUP +PID STACK' 100
check "live: 'l' in the sites view: most bytes in use first again" \
	"$(pane | grep -qE '^vIN USE    PEAK OBJECTS ALLOCATED GROUP +PID STACK' &&
		sites_table | awk '{ v = $1; m = 1; if (v ~ /K$/) m = 1024; else if (v ~ /M$/) m = 1048576;
		else if (v ~ /G$/) m = 1073741824; sub(/[BKMG]$/, "", v); x = v * m;
		if (NR > 1 && x > prev) bad = 1; prev = x } END { exit bad }'; echo $?)" "$(pane | sed -n 1,14p)"
"${TM[@]}" send-keys -t "$S" h
wait_pane '^ +ID NAME .*CPU%' 100
check "live: 'h' again: back to the groups" \
	"$([ "$(table | grep -cE " ($GROUPS_RE) ")" -eq 5 ] && pane | grep -q 'view groups'; echo $?)" \
	"$(pane | sed -n 1,14p)"
"${TM[@]}" send-keys -t "$S" t
wait_pane '^ +TID NAME +GROUP' 100
check "live: 't' shows the threads (tid, name, group)" \
	"$(pane | grep -qE '^ +TID NAME +GROUP' && pane | grep -qE '^ +[0-9]+ demo_workload +[0-9]+ (ingest|decode|render|cache)$'; echo $?)" \
	"$(pane | sed -n 7,14p)"
"${TM[@]}" send-keys -t "$S" t p
wait_pane '^tally top .*PAUSED' 100
check "live: 'p' pauses (and says so)" "$(pane | head -1 | grep -q PAUSED; echo $?)" "$(pane | head -1)"
"${TM[@]}" send-keys -t "$S" p
"${TM[@]}" resize-window -t "$S" -x 90 -y 20
until_ok 100 framed 20
check "live: a resize to 90x20 redraws: header on top, footer on the last line" \
	"$(pane | head -1 | grep -q '^tally top ' && [ "$(pane | wc -l)" -eq 20 ] &&
		pane | tail -1 | grep -q '^q Quit' && [ "$(table | wc -l)" -eq 6 ]; echo $?)" "$(pane)"
"${TM[@]}" resize-window -t "$S" -x 200 -y 50
until_ok 100 framed 50
"${TM[@]}" send-keys -t "$S" q
wait_pane '^TALLY_EXIT=' 100
check "live: q exits 0" "$(pane | grep -q '^TALLY_EXIT=0$'; echo $?)" "$(pane | tail -5)"
check "live: after q the screen is the shell's again (no header left)" \
	"$(! pane | grep -qE '^(events .* received|tally top  demo)'; echo $?)" "$(pane | head -5)"
# q leaves CMD running: stop it before it prints over the next test's screen
kill "$(cat "$tmp/live.pid")" 2>/dev/null
stty_to "$tmp/stty.after"
check "live: the terminal's modes are restored (stty -g)" \
	"$(cmp -s "$tmp/stty.before" "$tmp/stty.after"; echo $?)" \
	"$(cat "$tmp/stty.before" "$tmp/stty.after" 2>&1)"

# 2b. the target exits while the view is up: it says so and keeps the figures
"${TM[@]}" send-keys -t "$S" clear Enter
"${TM[@]}" send-keys -t "$S" "$TALLY top -i 200 -- $DEMO -s 1.5; echo TALLY_EXIT=\$?" Enter
wait_pane 'target exited \(status 0\)' 150
check "live: a target that exits: 'target exited', the last figures stay" \
	"$(pane | head -1 | grep -q 'target exited (status 0)' && [ "$(table | grep -cE " ($GROUPS_RE) ")" -eq 5 ]; echo $?)" \
	"$(pane | head -12)"
"${TM[@]}" send-keys -t "$S" q
wait_pane '^TALLY_EXIT=' 100
check "live: q after the target exited: exit 0" "$(pane | grep -q '^TALLY_EXIT=0$'; echo $?)" \
	"$(pane | tail -3)"

# 2c. SIGTERM and ^C end the view as q does: terminal restored, exit 0
"${TM[@]}" send-keys -t "$S" clear Enter
"${TM[@]}" send-keys -t "$S" "sh -c 'echo \$\$ >$tmp/term.tally; exec $TALLY top -i 200 -- $DEMO -s 10'; echo TALLY_EXIT=\$?" Enter
wait_pane '^ +[0-9]+ render ' 100
pane | sed -nE 's/.*\(pid ([0-9]+), .*/\1/p' | head -n1 >"$tmp/term.pid"
kill -TERM "$(cat "$tmp/term.tally")"
wait_pane '^TALLY_EXIT=' 100
kill "$(cat "$tmp/term.pid")" 2>/dev/null
stty_to "$tmp/stty.term"
check "live: SIGTERM: exit 0, the screen and the terminal's modes restored" \
	"$(pane | grep -q '^TALLY_EXIT=0$' && ! pane | grep -q '^tally top  demo' &&
		cmp -s "$tmp/stty.before" "$tmp/stty.term"; echo $?)" "$(pane | tail -4)"
"${TM[@]}" send-keys -t "$S" clear Enter
"${TM[@]}" send-keys -t "$S" "$TALLY top -i 200 -- $DEMO -s 10; echo TALLY_EXIT=\$?" Enter
wait_pane '^ +[0-9]+ render ' 100
"${TM[@]}" send-keys -t "$S" C-c
wait_pane '^TALLY_EXIT=' 100
stty_to "$tmp/stty.int"
check "live: ^C: exit 0, the screen and the terminal's modes restored" \
	"$(pane | grep -q '^TALLY_EXIT=0$' && ! pane | grep -q '^tally top  demo' &&
		cmp -s "$tmp/stty.before" "$tmp/stty.int"; echo $?)" "$(pane | tail -4)"

# 3. names that attack the terminal: a thread and a group with escapes,
#    quotes, backslashes, CR/LF, C1 and bytes that are not UTF-8
mkdir -p "$(dirname "$EVIL")"
cc -std=gnu11 -O2 -Wall -Wextra -Werror -D_GNU_SOURCE -pthread -o "$EVIL" tests/top/evil_workload.c \
	-L"$BUILD" -l:libtally.so -Wl,-rpath,"$PWD/$BUILD" 2>"$tmp/cc.err"
check "the hostile workload builds" "$?" "$(head -c 300 "$tmp/cc.err")"
timeout 60 "$TALLY" top -b -t -n 3 -i 400 -- "$EVIL" 2 >"$tmp/evil.txt" 2>"$tmp/evil.err"
rc=$?
ctl=$(LC_ALL=C tr -d '\n\040-\176' <"$tmp/evil.txt" | wc -c)
check "hostile names, batch: no ESC or other control or non-ASCII byte in the output" \
	"$([ $rc -eq 0 ] && [ "$ctl" -eq 0 ]; echo $?)" "rc=$rc, $ctl such bytes"
check "hostile names, batch: the thread and group names shown escaped" \
	"$(grep -qF '\x1b[2J\x1b[31mev"\\n' "$tmp/evil.txt" &&
		grep -qF '\x1b]0;pwned\x07\x1b[31mgrp"\\\x0d\x0a\xc2\x9b\xff' "$tmp/evil.txt"; echo $?)" \
	"$(grep -E 'x1b' "$tmp/evil.txt" | head -4)"
"${TM[@]}" send-keys -t "$S" clear Enter
"${TM[@]}" send-keys -t "$S" "$TALLY top -t -i 200 -- $EVIL 3; echo TALLY_EXIT=\$?" Enter
wait_pane 'x1b\[2J' 100
check "hostile names, live: the thread view shows the names as text" \
	"$(pane | grep -qF '\x1b[2J\x1b[31mev"\\n' && pane | grep -qF '\x1b]0;pwned'; echo $?)" \
	"$(pane | sed -n 7,12p)"
title=$("${TM[@]}" display-message -p -t "$S" '#{pane_title}')
check "hostile names, live: the window title is not the target's" \
	"$([ "$title" != pwned ]; echo $?)" "title=$title"
# a frame's repaint may be caught half drawn: the header is looked for a few times
hdr=1
for _ in $(seq 10); do pane | head -1 | grep -q '^tally top ' && { hdr=0; break; }; sleep 0.1; done
check "hostile names, live: the screen was not cleared by them (header still there)" \
	"$hdr" "$(pane | head -2)"
"${TM[@]}" send-keys -t "$S" q
wait_pane '^TALLY_EXIT=' 100

# 4. NO_COLOR: attributes at most, no color
"${TM[@]}" send-keys -t "$S" clear Enter
"${TM[@]}" send-keys -t "$S" "NO_COLOR=1 $TALLY top -i 200 -- $DEMO -s 3; echo TALLY_EXIT=\$?" Enter
# a whole frame drawn, every row and the footer, before its colors are read
until_ok 100 eval 'five_groups && framed 50'
# SGR parameters 30-37, 38, 40-47, 48, 90-97, 100-107 set a color (39 and 49 reset it)
colors=$(pane -e | grep -oE $'\e\\[[0-9;]*m' | tr -d $'\e[m' | tr ';' '\n' |
	grep -cE '^(3[0-8]|4[0-8]|9[0-7]|10[0-7])$')
check "NO_COLOR=1: no color in capture -e" \
	"$(pane | grep -q '^tally top ' && [ "$colors" -eq 0 ]; echo $?)" "$colors color parameters"
"${TM[@]}" send-keys -t "$S" q
wait_pane '^TALLY_EXIT=' 100
pane | sed -nE 's/.*\(pid ([0-9]+), .*/\1/p' | head -n1 >"$tmp/nc.pid"

# 5. bad options: one line on stderr, exit 2, nothing on stdout
bad() { # NAME ARGS...
	local name=$1
	shift
	timeout 30 "$TALLY" top "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
	local rc=$?
	check "$name: exit 2, one line, nothing on stdout" \
		"$([ $rc -eq 2 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && [ ! -s "$tmp/bad.out" ]; echo $?)" \
		"rc=$rc err=$(head -c 300 "$tmp/bad.err")"
}
bad "-i 0" -i 0 -- true
bad "-i 1.5" -i 1.5 -- true
bad "-n 0" -b -n 0 -- true
bad "-n abc" -b -n abc -- true
bad "a bad -s" -s bogus -- true
bad "no target" -b

finish
