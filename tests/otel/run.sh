#!/usr/bin/env bash
# Integration tests of OpenTelemetry's memory probes and thread context
# (root; docs/DESIGN.md §7.1 and §3.1), read by readers no one here wrote:
# Debian's bpftrace on libtally_alloc.so's otel_memory:alloc(ptr, size,
# weighted_bytes) and otel_memory:free(ptr), and gdb (libthread_db finds the
# thread's TLS, as the OTEP's readers do) for libtally.so's
# otel_thread_ctx_v1. The workload (tests/otel/workload.c) allocates a known
# mix in the group "ingest" under LD_PRELOAD of libtally_alloc.so.
#
# 1. bpftrace alone (no tally): its semaphores make the allocator sample at
#    TALLY_SAMPLE_RATE; the samples' count and the sum of their weights are
#    within 5 standard errors of what the workload's sizes predict, every
#    sampled block's free fires once, and the thread context holds "ingest".
# 2. bpftrace beside `tally profile`: both see the same samples, so the sum
#    of the weights equals tally's own alloc bytes (its folded profile)
#    within the rounding of each weight to bytes (half a byte a sample).
# 3. Two forked children under bpftrace: they exit 0, each fires its own
#    alloc and free probes, as many of each.
# Each check prints "ok" or "FAIL"; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY_BIN:-$PWD/$BUILD/tally}
LIB=$(realpath "$BUILD/libtally_alloc.so")
WL=$PWD/$BUILD/tests/otel/otel_workload
RATE=65536
. tests/lib.sh

need_root otel

if ! command -v bpftrace >/dev/null || ! command -v gdb >/dev/null; then
	skip "otel" "bpftrace or gdb not installed (scripts/setup.sh installs them)" 14
	finish
	exit
fi

# The reader: counts and sums per probe, and pairs each free with a sampled
# allocation. BEGIN runs once every probe is attached: the workload starts
# only then (an allocation sampled before would have its free unmatched).
bt_script() { # PID
	cat <<EOF
BEGIN { printf("ready\n"); }
usdt:$LIB:otel_memory:alloc /pid == $1/ { @n++; @w += arg2; @live[arg0] = 1; }
usdt:$LIB:otel_memory:free /pid == $1/ {
	@f++;
	if (@live[arg0] == 1) { @fm++; delete(@live[arg0]); }
}
END {
	printf("otel alloc %d weight %d free %d matched %d\n", @n, @w, @f, @fm);
	clear(@live); clear(@n); clear(@w); clear(@f); clear(@fm);
}
EOF
}

# bpftrace on the workload whose pid is in DIR/pid, then DIR/go; its output
# in DIR/bt. Returns when it is ready (1: it never was). Not -p PID: its
# watch of the target ended bpftrace early, its counts cut short, in 2 of
# about 150 runs here (bpftrace 0.17); on the library's path, the kernel
# raises the probes' semaphores in every process that maps it, and the
# script keeps the workload's events. stop ends it.
attach() { # DIR
	local d=$1 wpid
	wait_file "$d/pid" || return 1
	wpid=$(cat "$d/pid")
	bt_script "$wpid" >"$d/script.bt"
	bpftrace "$d/script.bt" >"$d/bt" 2>&1 &
	bpid=$!
	pids+=("$bpid")
	wait_line "$d/bt" '^ready' 20 || return 1
	touch "$d/go"
}

# INT again until bpftrace is gone, 10 s at most: one run here sent INT once
# (through a `timeout`, which passes a signal on once and then ignores it)
# and waited 120 s, bpftrace asleep in epoll_wait with nothing pending (the
# signal came and went, its loop did not notice); a second signal ended it,
# its END printed as usual. bpftrace is started bare, so that each INT
# reaches it; lib.sh kills it at the end if it is still there.
stop() { # DIR: bpftrace's END, once the workload has ended
	for _ in $(seq 50); do
		kill -INT "$bpid" 2>/dev/null || break
		sleep 0.2
	done
	kill -9 "$bpid" 2>/dev/null
	wait "$bpid"
	wait_line "$1/bt" '^(otel alloc|@f)' 5
}

field() { # FILE KEY: the workload's figure
	jq -er ".$2" "$1" 2>/dev/null
}
bt_field() { # FILE NAME: bpftrace's figure after NAME
	awk -v k="$2" '/^otel alloc/ { for (i = 1; i < NF; i++) if ($i == k) print $(i + 1) }' "$1"
}
within() { # GOT WANT TOLERANCE
	awk -v g="$1" -v w="$2" -v e="$3" 'BEGIN { d = g - w; if (d < 0) d = -d; exit !(g != "" && d <= e) }'
}

# OTEP 4947's record, read by gdb while the thread is stopped: the pointer
# (libthread_db resolves the TLS variable), then 28 + 2 + 31 bytes of the
# record, parsed here by the OTEP's layout: valid at 24, trace-flags at 25,
# attrs-data-size at 26 (host order), then key, length, value.
tls_record() { # PID: "valid=V size=N key=K value=STRING", or why not
	local out bytes
	out=$(gdb -p "$1" -batch -ex 'print/x (unsigned long) otel_thread_ctx_v1' \
		-ex 'x/61ub (unsigned char *) otel_thread_ctx_v1' 2>&1)
	bytes=$(grep -E '^0x[0-9a-f]+( <[^>]*>)?:' <<<"$out" | sed -E 's/^[^:]*://' | tr -s ' \t' '\n' |
		grep -E '^[0-9]+$')
	if [ -z "$bytes" ]; then
		echo "no record: $(grep -E '^\$1|No symbol|Cannot' <<<"$out" | head -2)"
		return
	fi
	awk '{ b[NR - 1] = $1 + 0 }
		END {
			n = b[26] + 256 * b[27]; len = b[29]; v = ""
			for (i = 0; i < len && 30 + i < NR; i++) v = v sprintf("%c", b[30 + i])
			printf "valid=%d size=%d key=%d value=%s\n", b[24], n, b[28], v
		}' <<<"$bytes"
}

# --- 1. bpftrace alone: the otel probes make the allocator sample
d1=$tmp/alone
mkdir -p "$d1"
TALLY_SAMPLE_RATE=$RATE LD_PRELOAD=$LIB "$WL" "$d1" $RATE >"$d1/out" 2>"$d1/err" &
wl=$!
pids+=("$wl")
attach "$d1"
check "bpftrace attached to otel_memory:alloc and :free of libtally_alloc.so" $? \
	"$(grep -v RLIMIT "$d1/bt" 2>/dev/null | head -3)"
if wait_file "$d1/ingroup"; then
	rec=$(tls_record "$wl")
	[ "$rec" = "valid=1 size=8 key=0 value=ingest" ]
	check "gdb reads otel_thread_ctx_v1 in the group: $rec" $? "want valid=1 size=8 key=0 value=ingest"
else
	check "the workload reached its group" 1 "no $d1/ingroup: $(tail -2 "$d1/err")"
fi
touch "$d1/checked"
wait "$wl"
check "the workload ran to its end" $? "$(tail -2 "$d1/err")"
stop "$d1"
n=$(bt_field "$d1/bt" alloc)
w=$(bt_field "$d1/bt" weight)
f=$(bt_field "$d1/bt" free)
fm=$(bt_field "$d1/bt" matched)
bytes=$(field "$d1/out" bytes)
sd=$(field "$d1/out" sd)
ns=$(field "$d1/out" samples)
nsd=$(field "$d1/out" samples_sd)
[ -n "$n" ] && [ "$n" -gt 0 ]
check "otel_memory:alloc fired with only bpftrace attached: ${n:-none} samples" $? \
	"$(grep -v RLIMIT "$d1/bt" | head -5)"
within "$n" "$ns" "$(awk -v e="$nsd" 'BEGIN { print 5 * e }')"
check "samples ${n:-none} within 5 x $nsd of the ${ns:-?} expected at $RATE" $? \
	"bpftrace: $(grep '^otel alloc' "$d1/bt")"
within "$w" "$bytes" "$(awk -v e="$sd" 'BEGIN { print 5 * e }')"
check "sum of weighted_bytes ${w:-none} within 5 x $sd of the $bytes bytes allocated" $? ""
[ -n "$f" ] && [ "$f" = "$n" ] && [ "$fm" = "$n" ]
check "otel_memory:free fired once for each sampled block freed: ${f:-none} of $n, $fm matched" $? \
	"bpftrace: $(grep '^otel alloc' "$d1/bt")"

# --- 2. beside tally profile: the same samples, the same weights
d2=$tmp/beside
mkdir -p "$d2"
"$TALLY" profile --rate $RATE --format folded --value alloc -o "$d2/folded" -- "$WL" "$d2" $RATE \
	>"$d2/out" 2>"$d2/err" &
tp=$!
pids+=("$tp")
attach "$d2" && touch "$d2/checked"
check "bpftrace attached beside tally profile" $? "$(grep -v RLIMIT "$d2/bt" 2>/dev/null | head -3)"
wait "$tp"
check "tally profile: exit 0" $? "$(tail -2 "$d2/err")"
stop "$d2"
n=$(bt_field "$d2/bt" alloc)
w=$(bt_field "$d2/bt" weight)
tw=$(awk '{ s += $NF } END { printf "%.0f\n", s }' "$d2/folded" 2>/dev/null)
within "$w" "$tw" "$(awk -v n="${n:-0}" 'BEGIN { print n / 2 + 1 }')"
check "bpftrace's weights ${w:-none} ($n samples) = tally's alloc bytes ${tw:-none} within half a byte a sample" \
	$? ""

# --- 3. forked children: each re-armed (alloc/common/probe_guard.c), each
# firing its own probes, none harmed
d3=$tmp/fork
mkdir -p "$d3"
cat >"$d3/script.bt" <<EOF
BEGIN { printf("ready\n"); }
usdt:$LIB:otel_memory:alloc { @a[pid] = count(); }
usdt:$LIB:otel_memory:free { @f[pid] = count(); }
EOF
bpftrace "$d3/script.bt" >"$d3/bt" 2>&1 &
bpid=$!
pids+=("$bpid")
if wait_line "$d3/bt" '^ready' 20; then
	TALLY_SAMPLE_RATE=$RATE LD_PRELOAD=$LIB "$WL" "$d3" $RATE fork >"$d3/out" 2>"$d3/err" &
	wl=$!
	pids+=("$wl")
	wait_file "$d3/pid" && touch "$d3/go"
	wait "$wl"
	check "the forking workload ran to its end: $(cat "$d3/out")" $? "$(tail -2 "$d3/err")"
	stop "$d3"
	read -r _ k1 k2 _ s1 s2 <"$d3/out"
	[ "${s1:-1}" = 0 ] && [ "${s2:-1}" = 0 ]
	check "its children exited 0 under the otel reader" $? "statuses ${s1:-?} ${s2:-?}"
	for k in ${k1:-} ${k2:-}; do
		a=$(awk -v m="@a[$k]:" '$1 == m { print $2 }' "$d3/bt")
		f=$(awk -v m="@f[$k]:" '$1 == m { print $2 }' "$d3/bt")
		[ -n "$a" ] && [ "$a" -gt 0 ] && [ "$a" = "$f" ]
		check "child $k fired its own otel_memory:alloc ${a:-none} and :free ${f:-none} times" $? \
			"$(grep -v RLIMIT "$d3/bt" | head -20)"
	done
else
	check "bpftrace attached for the forked children" 1 "$(grep -v RLIMIT "$d3/bt" | head -3)"
fi

finish
