#!/usr/bin/env bash
# Integration tests of heap profiles by call site (root): `tally profile` on
# a workload with three sites (tests/profile/sites_workload.c, built without
# frame pointers) read back with the real pprof and compared with the
# workload's own count; the folded format, the snapshot's "sites", serve's
# /debug/pprof/heap, a late attach, a binary without symbols, real programs,
# and bad input. Each check prints "ok" or "FAIL"; the last line is
# "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY_BIN:-$PWD/$BUILD/tally}
PPROF=$PWD/$BUILD/pprof
WL=$PWD/$BUILD/tests/profile/sites_workload
WL_STRIPPED=$PWD/$BUILD/tests/profile/sites_workload_stripped
. tests/lib.sh

need_root profile

# pprof's flat figure of one function, in bytes or objects (0 when absent)
flat() { # FILE SAMPLE_INDEX FUNCTION
	"$PPROF" -top -unit=B -nodecount=200 -nodefraction=0 -sample_index="$2" "$1" 2>/dev/null |
		awk -v f="$3" '$NF == f { v = $1; sub(/B$/, "", v); print v; found = 1 }
			END { if (!found) print 0 }'
}

# The sampler (alloc/sample.c) draws exponential gaps of mean RATE bytes: a
# Poisson process over the bytes, so a block of s bytes is sampled with
# p = 1 - exp(-s/RATE), independently of the others, and counted s/p. The
# estimate of a site's bytes is unbiased with variance sum(s^2 (1 - p)/p)
# over its blocks. Their sizes are the workload's own formulas, so the
# standard error is known: at 64 KiB, keep_small (400000 blocks of 24..223
# B, 49.4 MB) 1.80 MB (3.6 %), keep_large (48 of 64..352 KiB, 10.1 MB)
# 0.29 MB (2.9 %), churn (100000 of 64..2063 B, 106 MB) 2.63 MB (2.5 %).
# A check allows 5 standard errors (a false failure 6e-7 of the time).
sd() { # SITE RATE: the standard error of the site's sampled bytes
	awk -v site="$1" -v R="$2" 'BEGIN {
		n = site == "keep_small" ? 400000 : site == "keep_large" ? 48 : 100000
		for (i = 0; i < n; i++) {
			if (site == "keep_small") s = 24 + (i * 37) % 200
			else if (site == "keep_large") s = (64 + (i % 7) * 48) * 1024
			else s = 64 + (i * 131) % 2000
			p = 1 - exp(-s / R); v += s * s * (1 - p) / p
		}
		printf "%.0f\n", sqrt(v) }'
}

# |got - want| <= 5 standard errors (and a truth to compare with)
within_sd() { # GOT WANT SD
	[ -n "$2" ] && [ "$2" -gt 0 ] 2>/dev/null &&
		awk -v g="$1" -v w="$2" -v e="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(d <= 5 * e) }'
}

truth() { # STDERR-FILE SITE FIELD: the workload's own count; a failure when its line is missing
	grep '^{"keep_small"' "$1" | jq -er ".$2.$3" 2>/dev/null
}

# --- sampled at 64 KiB: each site within 5 standard errors of the truth
"$TALLY" profile --rate 65536 -o "$tmp/r64.pb.gz" -- "$WL" 2>"$tmp/r64.err"
check "profile at --rate 65536: written, exit 0" $? "$(tail -2 "$tmp/r64.err")"
for site in keep_small keep_large churn; do
	e=$(sd $site 65536)
	want=$(truth "$tmp/r64.err" $site bytes)
	for kind in inuse_space alloc_space; do
		[ $site = churn ] && [ $kind = inuse_space ] && continue
		got=$(flat "$tmp/r64.pb.gz" $kind $site)
		within_sd "$got" "$want" "$e"
		check "rate 65536: $site ${kind%_space} $got within 5 x $e of ${want:-(no truth line)}" $? ""
	done
done
got=$(flat "$tmp/r64.pb.gz" inuse_space churn)
[ "$got" = 0 ]
check "rate 65536: the freed site (churn) holds nothing in use" $? "got $got"
top=$("$PPROF" -top -sample_index=alloc_space "$tmp/r64.pb.gz" 2>&1)
for site in keep_small keep_large churn; do
	grep -q " $site\$" <<<"$top"
	check "pprof -top lists $site" $? "$top"
done
tags=$("$PPROF" -tags -sample_index=inuse_space -focus='^keep_small$' "$tmp/r64.pb.gz" 2>&1)
grep -q '(  100%): cache' <<<"$tags"
check "the group label (cache) is on keep_small's samples" $? "$tags"
tags=$("$PPROF" -tags -sample_index=inuse_space -focus='^keep_large$' "$tmp/r64.pb.gz" 2>&1)
grep -q '(  100%): root' <<<"$tags" && ! grep -q cache <<<"$tags"
check "keep_large's samples are in root" $? "$tags"
"$PPROF" -raw "$tmp/r64.pb.gz" 2>/dev/null | grep -qE 'Build ID: [0-9a-f]{40}|build ID.*[0-9a-f]{40}|[0-9a-f]{40}'
check "the mappings carry build IDs" $? "$("$PPROF" -raw "$tmp/r64.pb.gz" 2>&1 | grep -A3 Mappings)"

# --- every allocation: exact
"$TALLY" profile --rate 1 -o "$tmp/r1.pb.gz" -- "$WL" 2>"$tmp/r1.err"
check "profile at --rate 1: written, exit 0" $? "$(tail -2 "$tmp/r1.err")"
for site in keep_small keep_large; do
	for kind in bytes:inuse_space objects:inuse_objects bytes:alloc_space objects:alloc_objects; do
		got=$(flat "$tmp/r1.pb.gz" "${kind#*:}" $site)
		want=$(truth "$tmp/r1.err" $site "${kind%%:*}")
		[ "$got" = "$want" ]
		check "rate 1: $site ${kind#*:} exact ($got, the workload says $want)" $? ""
	done
done
got=$(flat "$tmp/r1.pb.gz" alloc_space churn)
want=$(truth "$tmp/r1.err" churn bytes)
[ "$got" = "$want" ]
check "rate 1: churn allocated exact ($got, the workload says $want)" $? ""

# --- folded stacks, outermost first, of in-use bytes
"$TALLY" profile --rate 1 --format folded -o "$tmp/r1.folded" -- "$WL" 2>"$tmp/f.err"
want=$(truth "$tmp/f.err" keep_small bytes)
grep -qE "^_start;.*;main;keep_small $want\$" "$tmp/r1.folded"
check "folded: main;keep_small with its exact in-use bytes" $? "$(head -3 "$tmp/r1.folded")"
! grep -qE ';churn [0-9]+$' "$tmp/r1.folded"
check "folded: no line for the freed site" $? "$(grep churn "$tmp/r1.folded")"

# --- --value: a program that frees everything has no bytes in use at its end
# (its folded file was empty, silently): tally says so, and --value alloc
# draws what it allocated; pprof shows that value first
"$TALLY" profile --rate 65536 --format folded -o "$tmp/fin.folded" -- "$WL" churn 2>"$tmp/fin.err"
rc=$?
[ $rc -eq 0 ] && [ ! -s "$tmp/fin.folded" ] &&
	grep -qx "tally: $tmp/fin.folded is empty: no bytes in use at the end (try --value peak or alloc)" "$tmp/fin.err"
check "folded, all freed: empty file, exit 0, one line on stderr that says so" $? \
	"rc $rc: $(cat "$tmp/fin.err")"
"$TALLY" profile --rate 65536 --format folded --value alloc -o "$tmp/fal.folded" -- "$WL" churn \
	2>"$tmp/fal.err"
got=$(awk '/;main;churn [0-9]+$/ { print $NF }' "$tmp/fal.folded")
want=$(awk 'BEGIN { for (i = 0; i < 100000; i++) s += 64 + (i * 131) % 2000; print s }')
within_sd "${got:-0}" "$want" "$(sd churn 65536)" && ! grep -q empty "$tmp/fal.err"
check "folded --value alloc: main;churn allocated $got within 5 standard errors of $want" $? \
	"$(cat "$tmp/fal.folded" "$tmp/fal.err")"
"$TALLY" profile --rate 65536 --value alloc -o "$tmp/fal.pb.gz" -- "$WL" churn 2>/dev/null
"$PPROF" -top "$tmp/fal.pb.gz" 2>&1 | grep -q 'Type: alloc_space'
check "pprof --value alloc: alloc_space is the sample type shown first" $? \
	"$("$PPROF" -top "$tmp/fal.pb.gz" 2>&1 | head -5)"

# --- a tree: a child that ended before its parent keeps its sites
"$TALLY" profile --rate 1 --format folded -o "$tmp/tree.folded" -- sh -c "$WL; true" \
	2>"$tmp/tree.err"
want=$(truth "$tmp/tree.err" keep_small bytes)
grep -qE ";main;keep_small $want\$" "$tmp/tree.folded"
check "a tree: the ended child's sites are in the profile (keep_small exact)" $? \
	"$(cut -c1-200 "$tmp/tree.folded" | head -3)"

# --- the snapshot's sites
"$TALLY" snapshot --rate 65536 -o "$tmp/snap.json" -- "$WL" 2>/dev/null
jq -e '.sampling.rate == 65536 and (.sites | length) >= 2 and
	.sites[0].frames[0].function == "keep_small" and .sites[0].group == "cache" and
	(.sites[0].frames[0].file | endswith("sites_workload.c")) and .sites[0].frames[0].line > 0 and
	(.sites[0].frames[0].module | endswith("sites_workload")) and
	.sites[1].frames[0].function == "keep_large" and .sites[0].inuse_bytes >= .sites[1].inuse_bytes' \
	"$tmp/snap.json" >/dev/null
check "snapshot: sites, largest first, with function, file, line, module and group" $? \
	"$(jq -c '.sites[0:2]' "$tmp/snap.json" 2>&1 | head -c 600)"
"$TALLY" snapshot --no-sample -o "$tmp/nos.json" -- "$WL" 2>/dev/null
jq -e '.sampling.rate == 0 and .sites == [] and .exact == true' "$tmp/nos.json" >/dev/null
check "snapshot --no-sample: no sites, figures still exact" $? "$(jq -c '.sampling, .exact' "$tmp/nos.json" 2>&1)"

# --- no symbols: addresses with the mapping's name
"$TALLY" profile --rate 65536 --format folded -o "$tmp/strip.folded" -- "$WL_STRIPPED" 2>/dev/null
check "a binary without symbols: profiled, exit 0" $? ""
grep -qE 'sites_workload_stripped\+0x[0-9a-f]+ [0-9]+$' "$tmp/strip.folded"
check "a binary without symbols: its frames are the mapping's name and offset" $? \
	"$(head -3 "$tmp/strip.folded")"

# --- a late attach: what was allocated before it is one named site
mkfifo "$tmp/in"
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so "$WL" wait <"$tmp/in" >"$tmp/late.out" 2>"$tmp/late.err" &
wl=$!
pids+=("$wl")
exec 7>"$tmp/in"
wait_file "$tmp/late.out"
"$TALLY" profile -p "$wl" -d 0.5 --format folded -o "$tmp/late.folded" 2>"$tmp/late.tally"
check "profile -p PID -d: written, exit 0" $? "$(cat "$tmp/late.tally")"
# Not an estimate: the blocks live at the attach are read from the
# allocator's state, exactly. They are what the workload kept and stdout's
# buffer (puts "ready": glibc's buffer is the file's st_blksize), nothing
# sampled since (it waits).
got=$(awk '/^\(allocated before attach\) / { s += $NF } END { print s + 0 }' "$tmp/late.folded")
ks=$(truth "$tmp/late.err" keep_small bytes)
kl=$(truth "$tmp/late.err" keep_large bytes)
want=$([ -n "$ks" ] && [ -n "$kl" ] && echo $((ks + kl + $(stat -c %o "$tmp/late.out"))))
[ -n "$want" ] && [ "$got" = "$want" ]
check "late attach: '(allocated before attach)' holds the live bytes ($got, kept + stdout's buffer ${want:-(no truth line)})" $? \
	"$(cat "$tmp/late.folded")"
exec 7>&-
wait "$wl"

# --- a late attach to a process that samples while the probes go in: its
# objects, announced with its first samples, are in the profile (their
# batches came before the state read and were left out whole: every frame
# was <unknown>, as of an nginx worker under load)
mkfifo "$tmp/in3"
LD_PRELOAD=$PWD/$BUILD/libtally_alloc.so "$WL" busy <"$tmp/in3" >"$tmp/busy.out" 2>/dev/null &
wl=$!
pids+=("$wl")
exec 7>"$tmp/in3"
wait_file "$tmp/busy.out"
# (five tracers, one after the other: the old code lost them at about three
# attaches in five; every batch through the BPF ring, or not)
for rings in off on off on off; do
	TALLY_HEAP_RINGS=$rings "$TALLY" profile -p "$wl" -d 0.3 -o "$tmp/busy.pb.gz" \
		2>"$tmp/busy.tally"
	"$PPROF" -top -sample_index=alloc_space "$tmp/busy.pb.gz" >"$tmp/busy.top" 2>&1
	grep -qE ' churn$' "$tmp/busy.top" && ! grep -q '<unknown>' "$tmp/busy.top"
	check "late attach to a busy process (heap rings $rings): its frames are symbolized (churn)" \
		$? "$(sed -n 5,9p "$tmp/busy.top"; cat "$tmp/busy.tally")"
done
# its snapshot lists the sites that allocated and hold nothing now (churn),
# after those that hold bytes (it listed only "(allocated before attach)")
"$TALLY" snapshot -p "$wl" -d 0.3 -o "$tmp/busy.json" 2>/dev/null
jq -e '[.sites[] | select(.frames[0].function == "churn" and .alloc_bytes > 0 and
	.inuse_bytes == 0)] | length > 0' "$tmp/busy.json" >/dev/null
check "late snapshot of a busy process: its sites list churn (allocated, nothing in use)" $? \
	"$(jq -c '[.sites[] | [.frames[0].function, .inuse_bytes, .alloc_bytes]]' "$tmp/busy.json" 2>&1 | head -c 400)"
exec 7>&-
wait "$wl"

# --- the live view's sites and its identity are one cut: at --rate 1, through
# a producer-consumer pipeline, each frame's sites hold the frame's live
# bytes but the blocks whose stacks are being unwound at the cut (a sample's
# record follows its block's, at most one a thread: here the producer's, at
# most 1531 bytes). A record applied as pending at a cut was applied again
# when its batch came: a sample freed since came back live, 0.6 MB over.
timeout 60 "$TALLY" top -b --view sites --rate 1 -n 20 -i 100 -- "$WL" pipeline \
	>"$tmp/pipe.top" 2>&1
# each frame: live, the sum of its sites' in-use bytes
awk '/^identity:/ { for (i = 1; i <= NF; i++) if ($i == "live") live = $(i + 1) }
	/IN USE/ { on = 1; s = 0; next }
	on && NF == 0 { print live, s; on = 0 }
	on { s += $1 }' "$tmp/pipe.top" >"$tmp/pipe.sums"
[ "$(wc -l <"$tmp/pipe.sums")" -ge 10 ] &&
	awk '{ d = $1 - $2; if (d < 0 || d > 4096) bad = 1 } END { exit bad }' "$tmp/pipe.sums"
check "top --view sites at --rate 1, a pipeline: each frame's sites hold its live bytes (within one block in flight)" \
	$? "$(tr '\n' ' ' <"$tmp/pipe.sums"; tail -3 "$tmp/pipe.top")"

# --- serve's /debug/pprof/heap, as pprof fetches it
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkfifo "$tmp/in2"
"$TALLY" serve --listen "127.0.0.1:$port" --rate 65536 -- "$WL" wait <"$tmp/in2" \
	>"$tmp/serve.out" 2>"$tmp/serve.err" &
srv=$!
pids+=("$srv")
exec 8>"$tmp/in2"
wait_file "$tmp/serve.out"
"$PPROF" -top -sample_index=inuse_space "http://127.0.0.1:$port/debug/pprof/heap" \
	>"$tmp/serve.top" 2>&1
grep -q ' keep_small$' "$tmp/serve.top" && grep -q 'Type: inuse_space' "$tmp/serve.top"
check "serve: pprof reads /debug/pprof/heap (keep_small in it)" $? "$(head -12 "$tmp/serve.top")"
curl -s -o "$tmp/allocs.pb.gz" "http://127.0.0.1:$port/debug/pprof/allocs"
"$PPROF" -top "$tmp/allocs.pb.gz" 2>&1 | grep -q 'Type: alloc_space'
check "serve: /debug/pprof/allocs shows allocated bytes first" $? ""
exec 8>&-
kill -INT "$srv"
wait "$srv"

# --- real programs: the profile is read by pprof, with their functions in it
"$TALLY" profile --rate 4096 -o "$tmp/py.pb.gz" -- python3 -c \
	'import json; d = [json.dumps({"k": i, "v": "x" * (i % 300)}) for i in range(50000)]; print(len(d))' \
	>/dev/null 2>"$tmp/py.err"
"$PPROF" -top -sample_index=alloc_space "$tmp/py.pb.gz" >"$tmp/py.top" 2>&1
grep -qE 'Py|_Py|json' "$tmp/py.top"
check "python3: profiled, pprof shows CPython's functions" $? "$(head -14 "$tmp/py.top"; tail -3 "$tmp/py.err")"
seq 200000 | sort -R >"$tmp/nums"
# --value alloc: what sort still holds at its exit is a few hundred bytes,
# which a 4096-byte sampling rate can miss altogether (a CI run: the folded
# file then empty, said on stderr); what it allocated is megabytes, sampled
# every time. (Debian's sort has no symbols of its own: its frames are
# sort+0xOFFSET)
"$TALLY" profile --rate 4096 --format folded --value alloc -o "$tmp/sort.folded" -- \
	sort -n "$tmp/nums" >/dev/null 2>"$tmp/sort.err"
[ -s "$tmp/sort.folded" ] && grep -qE '^sort\+0x[0-9a-f]+;__libc_start_main' "$tmp/sort.folded"
check "sort: profiled, folded stacks through libc's start" $? "$(head -3 "$tmp/sort.folded"; tail -3 "$tmp/sort.err")"

# --- bad input: one line, the usage status, nothing started
for args in "--rate 0" "--rate -5" "--rate abc" "--rate 1.5" "--format xml" \
	"-o /nonexistent/dir/p.pb.gz" "--no-sample" "--rate 1 --no-sample" "--value bogus"; do
	rm -f "$tmp/started"
	# shellcheck disable=SC2086 # the words of $args are the options
	"$TALLY" profile $args -- touch "$tmp/started" >"$tmp/bad.out" 2>"$tmp/bad.err"
	rc=$?
	[ $rc -eq 2 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && [ ! -e "$tmp/started" ] &&
		[ ! -s "$tmp/bad.out" ]
	check "profile $args: one line, exit 2, nothing started" $? "rc $rc: $(cat "$tmp/bad.err")"
done

finish
