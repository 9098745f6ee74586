#!/usr/bin/env bash
# The heap profile as the real pprof reads it (no root needed): test_pprof
# writes its fixture (a server allocating through xmalloc, an inlined parser
# and a library without symbols; groups and pids as labels) with pprof_write
# and folded_write; build/pprof (Debian's sources, built by make test-build)
# must read it without a word on stderr and show the functions, labels and
# totals put in. -symbolize=none: the fixture's library is not on this
# machine, and pprof would say so when it tries to symbolize it. Each check
# prints "ok" or "FAIL"; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
PPROF=${PPROF_BIN:-$PWD/$BUILD/pprof}
GEN=$PWD/$BUILD/tests/test_pprof
. tests/lib.sh

prof=$tmp/heap.pb.gz
# pprof ARGS...: stdout in $tmp/out, stderr in $tmp/err; status 0 when pprof
# exited 0 and said nothing on stderr
pprof() {
	"$PPROF" -symbolize=none "$@" >"$tmp/out" 2>"$tmp/err" && [ ! -s "$tmp/err" ]
}
# has LINE-PATTERN...: every extended regular expression matches a line of $tmp/out
has() {
	local p
	for p in "$@"; do
		grep -qE -- "$p" "$tmp/out" || { echo "no line matches: $p"; return 1; }
	done
}
detail() { # what pprof printed, for a failed check
	head -c 2000 "$tmp/out" "$tmp/err"
}

"$GEN" --write "$prof" --folded "$tmp/heap.folded" 2>"$tmp/gen.err"
rc=$?
magic=$(head -c 2 "$prof" 2>/dev/null | od -An -tx1 | tr -d ' ')
check "the fixture written: gzip, by pprof_write and folded_write" \
	"$([ $rc -eq 0 ] && [ -x "$PPROF" ] && [ "$magic" = 1f8b ]; echo $?)" \
	"rc=$rc, pprof at $PPROF: $([ -x "$PPROF" ] && echo yes || echo no) $(cat "$tmp/gen.err")"

pprof -top -sample_index=inuse_space -unit=B "$prof"
rc=$?
m=$(has '^Build ID: abcdef0123456789$' '^Type: inuse_space$' '^Duration: 5s' \
	'accounting for 6324224B, 100% of 6324224B total' \
	'^ +6291456B +99\.48% +99\.48% +6291456B +99\.48% +xmalloc$' \
	'^ +32768B .* \[libfoo\.so\.1\]$' '^ +0 .* 6291456B +99\.48% +handle_request$' \
	'^ +0 .* 6324224B +100% +main$' '^ +0 .* 4194304B +66\.32% +parse$' \
	'^ +0 .* 4194304B +66\.32% +parse_header \(inline\)$')
check "-top, inuse_space: every function, the inlined one, the library, 6324224 bytes in all" \
	"$([ $rc -eq 0 ] && [ -z "$m" ]; echo $?)" "$m $(detail)"

pprof -top -unit=B "$prof"
rc=$?
m=$(has '^Type: inuse_space$' 'of 6324224B total')
check "the default sample type: inuse_space" "$([ $rc -eq 0 ] && [ -z "$m" ]; echo $?)" \
	"$m $(detail)"

pprof -top -sample_index=alloc_space -unit=B "$prof"
rc=$?
m=$(has '^Type: alloc_space$' 'of 10555392B total')
pprof -top -sample_index=alloc_objects "$prof" && rc2=0 || rc2=1
m2=$(has '^Type: alloc_objects$' 'of 176 total')
check "-top, alloc_space and alloc_objects: their totals" \
	"$([ $rc -eq 0 ] && [ "$rc2" -eq 0 ] && [ -z "$m$m2" ]; echo $?)" "$m $m2 $(detail)"

pprof -raw "$prof"
rc=$?
m=$(has '^PeriodType: space bytes$' '^Period: 524288$' '^Duration: 5s$' \
	'^alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes\[dflt\] peak_objects/count peak_space/bytes$' \
	'^ +100 +6291456 +40 +4194304 +60 +5242880: 1 2 3 4 $' \
	'^ +50 +3145728 +25 +1048576 +30 +2097152: 5 3 4 $' \
	'^ +8 +65536 +4 +32768 +0 +0: 6 4 $' '^ +2 +4096 +0 +0 +0 +0: 7 $' \
	'^ +16 +1048576 +16 +1048576 +0 +0: 8 3 4 $' \
	'^ +group:\[parse\]$' '^ +group:\[io\]$' '^ +pid:\[4242\]$' '^ +pid:\[7\]$' \
	'^ +2: 0x403000 M=1 parse_header parse\.h:7 s=0$' '^ +parse parse\.c:100 s=0$' \
	'^ +5: 0x404100 M=1 xmalloc util\.c:6 s=0$' '^ +6: 0x7f0000001234 M=2 *$' '^ +7: 0xdead *$' \
	'^1: 0x400000/0x500000/0x0 /usr/bin/server abcdef0123456789 \[FN\]\[FL\]\[LN\]$' \
	'^2: 0x7f0000000000/0x7f0000100000/0x2000 /usr/lib/libfoo\.so\.1 *$')
check "-raw: sample types in order, period, each sample's values and labels, locations, mappings" \
	"$([ $rc -eq 0 ] && [ -z "$m" ]; echo $?)" "$m $(detail)"
cp "$tmp/out" "$tmp/raw"

pprof -tags "$prof"
rc=$?
m=$(has '^ group: Total 6\.0MB$' '^ +5\.0MB \(83\.33%\): parse$' '^ +1\.0MB \(16\.67%\): io$' \
	'^ pid: Total 6\.0MB$' '^ +5\.0MB \(83\.33%\): 4242$' '^ +1\.0MB \(16\.67%\): 7$')
check "-tags: the group and pid labels and their bytes" "$([ $rc -eq 0 ] && [ -z "$m" ]; echo $?)" \
	"$m $(detail)"

pprof -top -unit=B -tagfocus=group=io "$prof"
rc=$?
m=$(has 'accounting for 1048576B, 16\.58% of 6324224B total')
check "-tagfocus=group=io: that group's bytes" "$([ $rc -eq 0 ] && [ -z "$m" ]; echo $?)" \
	"$m $(detail)"

# pprof's own encoding of what it read, read again: nothing lost or changed
pprof -proto "$prof" && cp "$tmp/out" "$tmp/rt.pb.gz" && pprof -raw "$tmp/rt.pb.gz"
rc=$?
check "-proto, read again: the same -raw" \
	"$([ $rc -eq 0 ] && cmp -s "$tmp/raw" "$tmp/out"; echo $?)" \
	"$(diff "$tmp/raw" "$tmp/out" | head -20) $(head -c 300 "$tmp/err")"

want='main;handle_request;parse;parse_header;xmalloc 4194304
main;handle_request;xmalloc 2097152
main;libfoo.so.1+0x3234 32768'
sum=$(awk '{ s += $NF } END { print s }' "$tmp/heap.folded")
check "folded: the stacks, sorted, equal ones summed, 6324224 bytes as pprof's total" \
	"$([ "$(cat "$tmp/heap.folded")" = "$want" ] && [ "$sum" = 6324224 ]; echo $?)" \
	"$(cat "$tmp/heap.folded")"

finish
