#!/usr/bin/env bash
# -o FILE's temporaries (user/cmd/outfile.c): a tally killed with SIGKILL
# runs no handler and leaves its ".FILE.tally-PID-XXXXXX" beside FILE (183
# piled up in one directory); the next tally writing FILE removes those
# whose owner is gone or is not a tally, and leaves a live tally's alone.
# TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
. tests/lib.sh

need_root outfile
export LC_ALL=C
d=$tmp/out

# temps NAME: the temporaries beside $d/NAME
temps() { find "$d" -maxdepth 1 -name ".$1.tally-*" -printf '%f\n' 2>/dev/null | sort; }

# killed CMD FILE: `tally CMD -o $d/FILE -- sleep 60`, killed with SIGKILL
# once its temporary is there; its command killed too
killed() {
	"$TALLY" "$1" -o "$d/$2" -- sleep 60 >/dev/null 2>&1 &
	local t=$! c=""
	pids+=("$t")
	for _ in $(seq 100); do [ -n "$(temps "$2")" ] && c=$(pgrep -P "$t") && [ -n "$c" ] && break; sleep 0.1; done
	kill -9 "$t" 2>/dev/null
	wait "$t" 2>/dev/null
	[ -n "$c" ] && kill -9 $c 2>/dev/null
}

mkdir -p "$d"
for cmd in snapshot record profile; do
	killed "$cmd" "$cmd.out"
	left=$(temps "$cmd.out")
	"$TALLY" "$cmd" -o "$d/$cmd.out" -- true >/dev/null 2>"$tmp/$cmd.err"
	rc=$?
	check "$cmd -o: the temporary a SIGKILLed tally left is gone after the next run" \
		"$([ -n "$left" ] && [ $rc -eq 0 ] && [ -s "$d/$cmd.out" ] && [ -z "$(temps "$cmd.out")" ]
			echo $?)" "left: '$left', after: '$(temps "$cmd.out")' rc=$rc $(head -c 200 "$tmp/$cmd.err")"
done

# a live tally's temporary is kept, and its FILE written whole
"$TALLY" snapshot -d 4 -o "$d/live.json" -- sleep 60 >/dev/null 2>"$tmp/live.err" &
t=$!
pids+=("$t")
for _ in $(seq 100); do [ -n "$(temps live.json)" ] && break; sleep 0.1; done
first=$(temps live.json)
# and beside it, one whose pid is a live process but not a tally, one whose
# pid is no process, and a file by another name
sleep 60 &
other=$!
pids+=("$other")
touch "$d/.live.json.tally-$other-abcdef" "$d/.live.json.tally-999999999-abcdef" "$d/.live.json.keep"
"$TALLY" snapshot -o "$d/live.json" -- true >/dev/null 2>"$tmp/live2.err"
after=$(temps live.json)
check "a live tally's temporary is kept, those of a dead pid or a process that is no tally removed" \
	"$([ -n "$first" ] && [ "$after" = "$first" ] && [ -e "$d/.live.json.keep" ]; echo $?)" \
	"first: '$first', after: '$after'"
wait "$t"
rc=$?
check "... and that tally puts its FILE in place whole at its end" \
	"$([ $rc -eq 0 ] && jq -e .target.pid "$d/live.json" >/dev/null && [ -z "$(temps live.json)" ]
		echo $?)" "rc=$rc $(head -c 300 "$tmp/live.err") left: $(temps live.json)"
finish
