#!/usr/bin/env bash
# Tracer benchmark: the small-object churn (alloc_bench churn 1, one thread pinned to the last
# CPU) on tally untraced and traced by build/tally with every event carried, in the same
# rounds; beside it, the same workload on glibc untraced, under bcc's memleak-bpfcc and under
# heaptrack. Prints each run as it goes, then the medians as a markdown table and the verdict.
#
# usage: scripts/bench-trace.sh [--quick] [-h|--help]
#
#   --quick                one round with a tenth of the work (alloc_bench -q): a smoke test
#   BENCH_RUNS             rounds (default 5); the table shows the median of the rounds
#   BENCH_BIN              a prebuilt alloc_bench to use instead of build/alloc_bench
#   BENCH_TALLY            a tally binary to use instead of build/tally
#   BENCH_TIMEOUT          seconds before a run counts as hung (default 120)
#   BENCH_MEMLEAK_RUNS     rounds that include the memleak row (default 1; 0 leaves it out)
#   BENCH_MEMLEAK_TIMEOUT  seconds before a memleak run counts as hung (default 600)
#   BENCH_GLIBC_MODE_RUNS  rounds that include the glibc-mode row, on the -q workload
#                          (default 1; 0 leaves it out)
#   BENCH_ROWS             the rows to run, separated by spaces (default: every row); a row's
#                          baseline runs with it, and the other rows say SKIP. E.g.
#                          BENCH_ROWS=glibc-inject runs glibc-untraced and glibc-inject only
#
# Rows and their baselines: tally-traced against tally-untraced (the acceptance figure, at
# most 1.25x slower), glibc-memleak and glibc-heaptrack against glibc-untraced. Slowdown is
# untraced ops/s over traced ops/s, both measured by the workload itself in the same round,
# the median over the rounds. tally-fork-traced
# against tally-fork-untraced: the same churn in 8 processes forked one after another
# (alloc_bench forks 8), every one followed; reported, not gated.
#
# memleak takes a uprobe trap and a user stack walk on every malloc and free: tens of
# microseconds per pair on these VMs, so a full churn run would take half an hour. Its row
# therefore always runs the -q workload (5M pairs, about 3 minutes) and only in the first
# BENCH_MEMLEAK_RUNS rounds; ops/s is a rate, so the ratio to the full glibc run still holds.
# BCC compiles its BPF program at run time against kernel headers. When the running kernel
# has none (no /lib/modules/$(uname -r)/build, no CONFIG_IKHEADERS) but Debian's
# linux-headers-<version>-<arch> and -common are installed, the script merges the two into a
# temporary tree and points BCC_KERNEL_SOURCE at it; memleak's uprobe programs only use the
# user-space pt_regs layout, which does not change between kernel versions. Without any
# headers the row says SKIP.
#
# Only the workload is pinned: tally's consumer, heaptrack's interpreter and memleak's
# Python process run wherever the scheduler puts them.
#
# Raw output stays in build/bench-trace/: one log per run, results.txt (every figure parsed)
# and summary.md (the table). The verdict reports, it does not gate: the exit status is 0
# whenever the benchmark ran, even with FAIL or SKIP verdicts, and non-zero when the script
# broke or a baseline (tally-untraced, glibc-untraced) produced no figure at all.
#
# EXAMPLES:
#   scripts/bench-trace.sh --quick
#   BENCH_RUNS=9 BENCH_MEMLEAK_RUNS=0 scripts/bench-trace.sh
#   BENCH_RUNS=9 BENCH_ROWS=glibc-inject scripts/bench-trace.sh
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
start_s=$SECONDS

usage()
{
	sed -n '2,/^set -euo/{/^set -euo/d; s/^# \{0,1\}//; p}' "$root/scripts/bench-trace.sh"
}

quick=
runs=${BENCH_RUNS:-5}
run_timeout=${BENCH_TIMEOUT:-120}
memleak_runs=${BENCH_MEMLEAK_RUNS:-1}
glibc_mode_runs=${BENCH_GLIBC_MODE_RUNS:-1}
memleak_timeout=${BENCH_MEMLEAK_TIMEOUT:-600}
case "${1:-}" in
--quick) quick=-q; runs=1 ;;
-h | --help) usage; exit 0 ;;
'') ;;
*) usage >&2; exit 2 ;;
esac
for v in BENCH_RUNS:"$runs" BENCH_TIMEOUT:"$run_timeout" \
	 BENCH_MEMLEAK_TIMEOUT:"$memleak_timeout"; do
	if ! [[ ${v#*:} =~ ^[1-9][0-9]*$ ]]; then
		echo "bench-trace: ${v%%:*} must be a positive integer, not '${v#*:}'" >&2
		exit 2
	fi
done
if ! [[ $memleak_runs =~ ^[0-9]+$ ]]; then
	echo "bench-trace: BENCH_MEMLEAK_RUNS must be a number, not '$memleak_runs'" >&2
	exit 2
fi

outdir=$root/build/bench-trace
mkdir -p "$outdir"
# Stale logs from an earlier run would be indistinguishable from this one's.
rm -f "$outdir"/*.log "$outdir"/*.out "$outdir"/results.txt "$outdir"/summary.md

tmp=$(mktemp -d "${TMPDIR:-/tmp}/bench-trace.XXXXXX")
heaptrack_client=	# the workload under heaptrack while it runs: not one of our jobs
# On an interrupted run, ends the background jobs still running (only this shell's own, whose
# PIDs cannot have been reused) and the workload heaptrack started.
cleanup()
{
	local p

	for p in $(jobs -p) $heaptrack_client; do
		kill -KILL "$p" 2>/dev/null || true
	done
	rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -n "${BENCH_BIN:-}" ]; then
	bin=$BENCH_BIN
else
	bin=$root/build/alloc_bench
	if [ ! -x "$bin" ] || [ bench/alloc_bench.c -nt "$bin" ] || [ bench/bench_util.h -nt "$bin" ]; then
		mkdir -p "$root/build"
		cc -O2 -g -pthread -Wall -Wextra -Werror bench/alloc_bench.c -o "$bin"
	fi
fi
tally_lib=$root/build/libtally_alloc.so
if [ ! -e "$tally_lib" ]; then
	echo "bench-trace: ${tally_lib#"$root"/} not found; run make first" >&2
	exit 1
fi

# The tracer under test, in one place: build/tally starts the command after "--", carries
# every event until it exits, then prints a JSON snapshot on stdout. The workload already
# preloads the allocator itself, hence --no-preload.
tally_bin=${BENCH_TALLY:-$root/build/tally}
tally_trace_cmd=("$tally_bin" snapshot --no-preload)
trace_flags=() # a row's own flags (sampling)

pin_cpu=$(($(nproc) - 1))
kernel=$(uname -r)
# shellcheck disable=SC2206 # split on purpose: an optional flag, a workload and its argument
workload=($quick churn 1)
# shellcheck disable=SC2206
fork_workload=($quick forks 8)
memleak_workload=(-q churn 1)

# tally-traced samples for heap profiles at the default rate (512 KiB), as tally
# does unless told otherwise; tally-traced-nosample is the same trace with
# --no-sample (its baseline for the sampling's cost), tally-traced-rate64k
# samples eight times as often; tally-traced-norings carries every batch through the probe
# and the BPF ring (TALLY_HEAP_RINGS=off), as before the heaps' shared rings.
# glibc-inject: the workload on glibc, started and waiting, then attached with
# `tally snapshot -p PID --inject` (libtally_interpose.so) before its timed loop;
# glibc-mode: tally's probe per call (--no-preload), on the -q workload in the memleak
# rounds only (it takes microseconds a call: BENCH_GLIBC_MODE_RUNS, default 1).
rows=(tally-untraced tally-traced tally-traced-nosample tally-traced-rate64k tally-traced-norings
	tally-fork-untraced
	tally-fork-traced glibc-untraced glibc-inject glibc-mode glibc-memleak glibc-heaptrack)
declare -A baseline=(
	[tally-traced]=tally-untraced [tally-traced-nosample]=tally-untraced
	[tally-traced-rate64k]=tally-traced-nosample [tally-traced-norings]=tally-untraced
	[glibc-memleak]=glibc-untraced [glibc-inject]=glibc-untraced [glibc-mode]=glibc-untraced
	[glibc-heaptrack]=glibc-untraced [tally-fork-traced]=tally-fork-untraced
)
declare -A expect_from=(
	[tally-untraced]=libtally_alloc.so [tally-traced]=libtally_alloc.so
	[tally-traced-nosample]=libtally_alloc.so [tally-traced-rate64k]=libtally_alloc.so
	[tally-traced-norings]=libtally_alloc.so [tally-fork-untraced]=libtally_alloc.so [tally-fork-traced]=libtally_alloc.so
	[glibc-untraced]=libc.so.6 [glibc-memleak]=libc.so.6 [glibc-inject]=libc.so.6
	[glibc-mode]=libc.so.6
	[glibc-heaptrack]=libheaptrack_preload.so
)
# the workload's result line, by row (default churn-1t)
declare -A result_name=([tally-fork-untraced]=churn-fork [tally-fork-traced]=churn-fork)
declare -A skip		# row -> why the whole row did not run
declare -A nfail	# row -> runs that failed
declare -A first_fail	# row -> the first failure's reason
declare -A note		# row -> a remark for the table
results=$outdir/results.txt
: >"$results"

# ---- availability of the tracers ----

if [ ! -x "$tally_bin" ]; then
	skip[tally-traced]="${tally_bin#"$root"/} not built"
elif [ "$(id -u)" -ne 0 ]; then
	skip[tally-traced]="tracing needs root"
fi
if [ -n "${skip[tally-traced]:-}" ]; then
	for r in tally-fork-traced tally-traced-nosample tally-traced-rate64k tally-traced-norings \
		glibc-inject glibc-mode; do
		skip[$r]=${skip[tally-traced]}
	done
fi

if ! command -v heaptrack >/dev/null 2>&1; then
	skip[glibc-heaptrack]="heaptrack not installed (Debian package heaptrack)"
fi

# Finds kernel headers BCC can compile against; sets BCC_KERNEL_SOURCE when it has to build
# them, and returns non-zero with the reason in $bcc_why when there are none.
bcc_why=
bcc_headers()
{
	local arch flavour common

	if [ -n "${BCC_KERNEL_SOURCE:-}" ]; then
		note[glibc-memleak]="headers: BCC_KERNEL_SOURCE=$BCC_KERNEL_SOURCE"
		return 0
	fi
	if [ -d "/lib/modules/$kernel/build/include" ] || [ -e /sys/kernel/kheaders.tar.xz ]; then
		return 0
	fi
	# Debian splits its headers into a per-flavour tree (generated files, config) and a
	# -common tree (the sources), which /lib/modules/VERSION/{build,source} would join.
	arch=$(dpkg --print-architecture 2>/dev/null || echo amd64)
	flavour=$(find /usr/src -maxdepth 1 -name "linux-headers-*-$arch" 2>/dev/null |
		sort -V | tail -n 1)
	common=${flavour%-"$arch"}-common
	if [ -z "$flavour" ] || [ ! -d "$common" ]; then
		bcc_why="no kernel headers for $kernel (no /lib/modules/$kernel/build, no"
		bcc_why+=" /sys/kernel/kheaders.tar.xz); apt-get install linux-headers-$arch"
		return 1
	fi
	mkdir -p "$tmp/kheaders"
	cp -as "$common/." "$tmp/kheaders/"
	cp -asf "$flavour/." "$tmp/kheaders/"
	export BCC_KERNEL_SOURCE=$tmp/kheaders
	note[glibc-memleak]="BPF built against Debian's ${flavour#/usr/src/linux-headers-}"
	note[glibc-memleak]+=" headers (kernel $kernel has none)"
}

if ! [[ $glibc_mode_runs =~ ^[0-9]+$ ]]; then
	echo "bench-trace: BENCH_GLIBC_MODE_RUNS must be a number, not '$glibc_mode_runs'" >&2
	exit 2
fi
[ "$glibc_mode_runs" -gt 0 ] || skip[glibc-mode]="BENCH_GLIBC_MODE_RUNS=0"
if [ "$memleak_runs" -eq 0 ]; then
	skip[glibc-memleak]="BENCH_MEMLEAK_RUNS=0"
elif ! command -v memleak-bpfcc >/dev/null 2>&1; then
	skip[glibc-memleak]="memleak-bpfcc: not installed (Debian package bpfcc-tools)"
elif [ "$(id -u)" -ne 0 ]; then
	skip[glibc-memleak]="memleak-bpfcc: needs root"
elif ! bcc_headers; then
	skip[glibc-memleak]="memleak-bpfcc: $bcc_why"
fi

# BENCH_ROWS: the rows asked for and their baselines; the rest are skipped (after the checks
# above, which skip a row for a tracer it lacks, not for a row left out).
if [ -n "${BENCH_ROWS:-}" ]; then
	declare -A wanted
	for r in $BENCH_ROWS; do
		if [ -z "${expect_from[$r]:-}" ]; then
			echo "bench-trace: BENCH_ROWS: no row '$r' (rows: ${rows[*]})" >&2
			exit 2
		fi
		wanted[$r]=1
		[ -z "${baseline[$r]:-}" ] || wanted[${baseline[$r]}]=1
	done
	for r in "${rows[@]}"; do
		[ -n "${wanted[$r]:-}" ] || [ -n "${skip[$r]:-}" ] || skip[$r]="not in BENCH_ROWS"
	done
fi

# ---- one run per row ----

# Checks the workload's result line in $1 and appends its figure to results.txt; on failure
# sets $why and returns non-zero.
why=
take_result()
{
	local row=$1 round=$2 log=$3 line from ops

	line=$(grep "^result ${result_name[$row]:-churn-1t} " "$log" | tail -n 1) || true
	if [ -z "$line" ]; then
		why="no result line"
		return 1
	fi
	from=$(sed -n 's/.* malloc_from=\([^ ]*\).*/\1/p' <<<"$line")
	if [ "$from" != "${expect_from[$row]}" ]; then
		why="malloc came from '$from', not ${expect_from[$row]}"
		return 1
	fi
	ops=$(sed -n 's/.* ops_per_s=\([0-9.]*\).*/\1/p' <<<"$line")
	echo "$row $round ops_per_s $ops" >>"$results"
}

# why_from_log LOG: the last line of a log, for a one-line failure reason.
why_from_log()
{
	local line

	line=$(grep -v '^[[:space:]]*$' "$1" 2>/dev/null | tail -n 1 | cut -c 1-160) || true
	echo "${line:-no output}"
}

# exit_why RC LIMIT: "exit RC", and why when RC is the one of a run past its time limit.
exit_why()
{
	if [ "$1" -eq 124 ]; then echo "exit $1 (timed out after ${2}s)"; else echo "exit $1"; fi
}

# Runs a plain command with a time limit, output to $log.
run_plain()
{
	local rc=0

	timeout "$run_timeout" "$@" >"$log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		why=$(exit_why $rc "$run_timeout")
		return 1
	fi
}

run_tally_untraced()
{
	run_plain env "LD_PRELOAD=$tally_lib" taskset -c "$pin_cpu" "$bin" "${workload[@]}"
}

run_glibc_untraced()
{
	run_plain env -u LD_PRELOAD taskset -c "$pin_cpu" "$bin" "${workload[@]}"
}

run_tally_fork_untraced()
{
	run_plain env "LD_PRELOAD=$tally_lib" taskset -c "$pin_cpu" "$bin" "${fork_workload[@]}"
}

run_tally_traced()
{
	traced_run tally-traced "${workload[@]}"
}

run_tally_fork_traced()
{
	traced_run tally-fork-traced "${fork_workload[@]}"
}

run_tally_traced_nosample()
{
	local rc=0
	trace_flags=(--no-sample)
	traced_run tally-traced-nosample "${workload[@]}" || rc=$?
	trace_flags=()
	return $rc
}

run_tally_traced_rate64k()
{
	local rc=0
	trace_flags=(--rate 65536)
	traced_run tally-traced-rate64k "${workload[@]}" || rc=$?
	trace_flags=()
	return $rc
}

run_tally_traced_norings()
{
	local rc=0 saved=("${tally_trace_cmd[@]}")
	tally_trace_cmd=(env TALLY_HEAP_RINGS=off "${saved[@]}")
	traced_run tally-traced-norings "${workload[@]}" || rc=$?
	tally_trace_cmd=("${saved[@]}")
	return $rc
}

# traced_run ROW WORKLOAD...: the workload under tally; exact means every process of the
# tree is (the snapshot's root and each of its processes).
traced_run()
{
	local row=$1 out=${log%.log}.out json fields rc=0
	shift

	timeout --kill-after=10 "$run_timeout" "${tally_trace_cmd[@]}" ${trace_flags[@]+"${trace_flags[@]}"} -- \
		env "LD_PRELOAD=$tally_lib" taskset -c "$pin_cpu" "$bin" "$@" \
		>"$out" 2>"$log" || rc=$?
	if [ $rc -ne 0 ]; then
		why="tally $(exit_why $rc "$run_timeout"): $(why_from_log "$log")"
		return 1
	fi
	# The workload's result line shares stdout with the snapshot; the snapshot is the one
	# document that starts with '{'.
	grep '^result ' "$out" >>"$log" || true
	json=$tmp/snapshot.json
	grep -v '^result ' "$out" | sed -n '/^{/,$p' >"$json"
	if ! fields=$(jq -er '[(.exact and all((.processes // [])[]; .exact)),
			([(.processes // [.])[].events.received] | add), .events.lost,
			([(.processes // [.])[].events.records // 0] | add)]
			| map(tostring) | join(" ")' "$json" 2>>"$log"); then
		why="no snapshot with .exact, .events.received and .events.lost on stdout"
		return 1
	fi
	read -r exact received lost records <<<"$fields"
	if ! [[ $exact =~ ^(true|false)$ && $received =~ ^[0-9]+$ && $lost =~ ^[0-9]+$ ]]; then
		why="snapshot without boolean .exact and numeric .events.received, .events.lost"
		return 1
	fi
	{
		echo "$row $round exact $exact"
		echo "$row $round received $received"
		echo "$row $round lost $lost"
		echo "$row $round records $records"
	} >>"$results"
	extra="exact=$exact received=$received lost=$lost records=$records"
}

# Waits until memleak ($1, log $2) has attached its uprobes: it prints "Attaching" before
# attaching them and prints nothing after, so wait for its perf event fds to stop growing.
memleak_attached()
{
	local pid=$1 mlog=$2 deadline=$((SECONDS + 120)) n prev=-1 stable=0

	while [ $SECONDS -lt $deadline ]; do
		kill -0 "$pid" 2>/dev/null || return 1
		if grep -q '^Attaching to pid' "$mlog"; then
			n=$(find "/proc/$pid/fd" -lname 'anon_inode:*perf_event*' 2>/dev/null | wc -l)
			if [ "$n" -gt 0 ] && [ "$n" -eq "$prev" ]; then
				stable=$((stable + 1))
				[ $stable -ge 10 ] && return 0
			else
				stable=0
			fi
			prev=$n
		fi
		sleep 0.1
	done
	return 1
}

# Stops a background process we started. Not with SIGINT: a non-interactive shell starts
# background jobs with SIGINT ignored, and Python then never installs its handler. SIGTERM
# ends memleak at once; closing its perf event fds detaches its uprobes.
stop_pid()
{
	local pid=$1 i

	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 50; i++)); do
		kill -0 "$pid" 2>/dev/null || break
		sleep 0.1
	done
	kill -KILL "$pid" 2>/dev/null || true
	wait "$pid" 2>/dev/null || true
}

# Waits for a background process until $2 (in $SECONDS); returns its exit status, 124 when it
# ran past the deadline and was killed.
wait_until()
{
	local pid=$1 deadline=$2 rc=0

	while kill -0 "$pid" 2>/dev/null && [ $SECONDS -lt "$deadline" ]; do
		sleep 0.2
	done
	if kill -0 "$pid" 2>/dev/null; then
		kill -KILL "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		return 124
	fi
	wait "$pid" || rc=$?
	return $rc
}

# memleak either starts the command itself (-c), racing its own compile and attach, or
# attaches to a PID. So the workload is started first, held on a fifo, and let go once the
# probes are in; it execs in place, keeping the PID memleak watches.
run_glibc_memleak()
{
	local mlog=${log%.log}.memleak.log fifo=$tmp/go.$round wpid mpid rc=0 alive

	rm -f "$fifo"
	mkfifo "$fifo"
	(
		read -r _ <"$fifo"
		exec env -u LD_PRELOAD taskset -c "$pin_cpu" "$bin" "${memleak_workload[@]}"
	) >"$log" 2>&1 &
	wpid=$!
	# Sample rate 1 (every event, the default, spelled out); a report once an hour, so
	# never during a run.
	PYTHONUNBUFFERED=1 memleak-bpfcc -p "$wpid" -s 1 3600 >"$mlog" 2>&1 &
	mpid=$!
	if ! memleak_attached "$mpid" "$mlog"; then
		why="memleak-bpfcc: $(grep -m 1 -E 'error:|Unable to|Exception:' "$mlog" ||
			why_from_log "$mlog")"
		# The kernel refuses a second uprobe on the same instruction when the two disagree
		# on the USDT semaphore; it says so only in the kernel log.
		if grep -q 'Failed to attach BPF to uprobe' "$mlog" &&
			dmesg 2>/dev/null | tail -n 50 | grep -q 'ref_ctr_offset mismatch'; then
			why+=" (dmesg: ref_ctr_offset mismatch: another tracer holds a uprobe on libc)"
		fi
		stop_pid "$mpid"
		kill -KILL "$wpid" 2>/dev/null || true
		wait "$wpid" 2>/dev/null || true
		# A tracer that cannot compile or attach will not do better next round.
		skip[glibc-memleak]=$why
		return 1
	fi
	# Opening a fifo read-write never blocks, even if the reader is gone.
	echo go 1<>"$fifo"
	wait_until "$wpid" $((SECONDS + memleak_timeout)) || rc=$?
	kill -0 "$mpid" 2>/dev/null && alive=1 || alive=0
	stop_pid "$mpid"
	if [ $rc -ne 0 ]; then
		why="memleak-bpfcc: workload $(exit_why $rc "$memleak_timeout")"
		return 1
	fi
	if [ $alive -eq 0 ]; then
		why="memleak-bpfcc died during the run: $(why_from_log "$mlog")"
		return 1
	fi
	extra="(-q workload)"
}

# The snapshot's figures ($1: a JSON file) into the results, as traced_run does.
snapshot_fields()
{
	local row=$1 json=$2 fields
	if ! fields=$(jq -er '[.exact, .events.received, .events.lost, (.events.records // 0)]
			| map(tostring) | join(" ")' "$json" 2>>"$log"); then
		why="no snapshot with .exact, .events.received and .events.lost"
		return 1
	fi
	read -r exact received lost records <<<"$fields"
	{
		echo "$row $round exact $exact"
		echo "$row $round received $received"
		echo "$row $round lost $lost"
		echo "$row $round records $records"
	} >>"$results"
	extra="exact=$exact received=$received lost=$lost records=$records"
}

# The end of a run whose snapshot went to a file: ROW OUT JSON RC TIMEOUT.
snapshot_run_end()
{
	grep '^result ' "$2" >>"$log" || true
	if [ "$4" -ne 0 ]; then
		why="tally $(exit_why "$4" "$5"): $(why_from_log "$log")"
		return 1
	fi
	snapshot_fields "$1" "$3"
}

run_glibc_mode()
{
	local out=${log%.log}.out json=$tmp/glibc-mode.json rc=0
	timeout --kill-after=10 "$memleak_timeout" "$tally_bin" snapshot --no-preload -o "$json" -- \
		env -u LD_PRELOAD taskset -c "$pin_cpu" "$bin" "${memleak_workload[@]}" \
		>"$out" 2>"$log" || rc=$?
	snapshot_run_end glibc-mode "$out" "$json" "$rc" "$memleak_timeout"
}

# The workload fills its ring and waits (-w); tally injects; SIGUSR1 starts the timed loop
# once the interposer's thread runs.
run_glibc_inject()
{
	local out=${log%.log}.out json=$tmp/glibc-inject.json wpid tpid i rc=0
	env -u LD_PRELOAD taskset -c "$pin_cpu" "$bin" -w "${workload[@]}" >"$out" 2>"$log" &
	wpid=$!
	for ((i = 0; i < 200; i++)); do grep -q '^waiting' "$out" && break; sleep 0.05; done
	"$tally_bin" snapshot -p "$wpid" --inject -o "$json" 2>>"$log" &
	tpid=$!
	for ((i = 0; i < 200; i++)); do
		grep -qx tally-inject /proc/"$wpid"/task/*/comm 2>/dev/null && break
		sleep 0.05
	done
	kill -USR1 "$wpid" 2>/dev/null || true
	local trc=0
	wait_until "$wpid" $((SECONDS + run_timeout)) || rc=$?
	wait "$tpid" || trc=$?
	[ $rc -ne 0 ] || rc=$trc
	snapshot_run_end glibc-inject "$out" "$json" "$rc" "$run_timeout"
}

# heaptrack traces only the program it starts (its preload removes itself from the
# environment), so the workload cannot go through taskset: it is pinned once it is running,
# all threads, and again a moment later for any thread created in between.
run_glibc_heaptrack()
{
	local hpid cpid comm i rc=0

	comm=$(basename "$bin" | cut -c 1-15)
	env -u LD_PRELOAD heaptrack -o "$tmp/heaptrack.$round" "$bin" "${workload[@]}" \
		>"$log" 2>&1 &
	hpid=$!
	cpid=
	for ((i = 0; i < 500; i++)); do
		cpid=$(pgrep -P "$hpid" -x "$comm" | head -n 1) || true
		[ -z "$cpid" ] || break
		sleep 0.01
	done
	if [ -n "$cpid" ]; then
		heaptrack_client=$cpid
		taskset -a -p -c "$pin_cpu" "$cpid" >/dev/null 2>&1 || true
		sleep 0.2
		taskset -a -p -c "$pin_cpu" "$cpid" >/dev/null 2>&1 || true
	fi
	wait_until "$hpid" $((SECONDS + run_timeout)) || rc=$?
	# On a timeout wait_until killed the heaptrack script; the workload is its child.
	if [ $rc -eq 124 ] && [ -n "$cpid" ]; then
		kill -KILL "$cpid" 2>/dev/null || true
	fi
	heaptrack_client=
	rm -f "$tmp"/heaptrack."$round".*
	if [ $rc -ne 0 ]; then
		why=$(exit_why $rc "$run_timeout")
		return 1
	fi
	if [ -z "$cpid" ]; then
		why="could not find the workload's process to pin it"
		return 1
	fi
}

run_row()
{
	local row=$1 round=$2 ops

	log=$outdir/$row.$round.log
	why=
	extra=
	if "run_${row//-/_}" && take_result "$row" "$round" "$log"; then
		ops=$(awk -v r="$row" -v n="$round" '$1 == r && $2 == n && $3 == "ops_per_s" { print $4 }' \
			"$results")
		printf 'bench-trace: round %d/%d %-16s %12s ops/s %s\n' "$round" "$runs" "$row" \
			"$(fmt_ops "$ops")" "$extra" >&2
		return 0
	fi
	nfail[$row]=$((${nfail[$row]:-0} + 1))
	[ -n "${first_fail[$row]:-}" ] || first_fail[$row]=$why
	printf 'bench-trace: round %d/%d %-16s FAILED: %s (see %s)\n' "$round" "$runs" "$row" \
		"$why" "${log#"$root"/}" >&2
}

# ---- formatting ----

fmt_ops()
{
	awk -v v="$1" 'BEGIN {
		if (v >= 1e6) printf "%.2f M\n", v / 1e6
		else if (v >= 1e3) printf "%.1f k\n", v / 1e3
		else printf "%.0f\n", v }'
}

values()
{
	awk -v r="$1" -v k="$2" '$1 == r && $3 == k { print $4 }' "$results" | sort -g
}

median()
{
	values "$1" ops_per_s | awk '{ v[NR] = $1 }
		END { if (NR) printf "%.6g\n", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

# A row's slowdown against its baseline: the median over the rounds where both have a
# figure of baseline ops/s over the row's in that round. The VM's speed drifts between
# rounds (by a third at times), and within one round it hits both rows alike.
slowdown()
{
	awk -v r="$1" -v b="$2" '$3 == "ops_per_s" && ($1 == r || $1 == b) { v[$1 " " $2] = $4 }
		END { for (k in v) { split(k, f, " ")
			if (f[1] == r && v[k] > 0 && (b " " f[2]) in v) print v[b " " f[2]] / v[k] } }' \
		"$results" | sort -g | awk '{ v[NR] = $1 }
		END { if (NR) printf "%.6g\n", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

# A slowdown x, digits to match its size.
fmt_slow()
{
	awk -v x="$1" 'BEGIN { printf (x < 10 ? "%.2fx\n" : x < 100 ? "%.1fx\n" : "%.0fx\n"), x }'
}

count_ok()
{
	values "$1" ops_per_s | wc -l
}

# ---- the rounds ----

echo "bench-trace: alloc_bench ${workload[*]} pinned to CPU $pin_cpu, $runs round(s)" \
     "${quick:+(quick)}" >&2
for r in "${rows[@]}"; do
	[ -z "${skip[$r]:-}" ] || echo "bench-trace: skipping $r: ${skip[$r]}" >&2
done

for ((round = 1; round <= runs; round++)); do
	# Every row runs in the same round, so a noisy minute on the VM hits them alike; the
	# order rotates between rounds so that none always goes first.
	for ((i = 0; i < ${#rows[@]}; i++)); do
		row=${rows[(i + round - 1) % ${#rows[@]}]}
		[ -z "${skip[$row]:-}" ] || continue
		[ "$row" != glibc-memleak ] || [ "$round" -le "$memleak_runs" ] || continue
		[ "$row" != glibc-mode ] || [ "$round" -le "$glibc_mode_runs" ] || continue
		run_row "$row" "$round"
	done
done

# A traced row that never produced a figure is reported as skipped, with its first reason.
for r in "${rows[@]}"; do
	if [ -z "${skip[$r]:-}" ] && [ "$(count_ok "$r")" -eq 0 ] && [ -n "${first_fail[$r]:-}" ]; then
		skip[$r]=${first_fail[$r]}
	fi
done

# ---- the report ----

declare -A med
for r in "${rows[@]}"; do
	med[$r]=$(median "$r")
done

runs_cell()
{
	local r=$1 ok n

	ok=$(count_ok "$r")
	n=${nfail[$r]:-0}
	if [ "$n" -gt 0 ]; then echo "$ok of $((ok + n))"; else echo "$ok"; fi
}

# Notes for a traced tally row: the snapshot's completeness over the runs.
traced_events()
{
	local r=$1 total lost_runs inexact received records

	total=$(values "$r" exact | wc -l)
	[ "$total" -gt 0 ] || return 0
	inexact=$(values "$r" exact | grep -vc '^true$') || true
	lost_runs=$(values "$r" lost | awk '$1 != 0' | wc -l)
	received=$(values "$r" received | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	records=$(values "$r" records | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }')
	echo "exact in $((total - inexact))/$total runs; events received $received," \
	     "records $records (medians); runs with lost events: $lost_runs"
}

report_row()
{
	local r=$1 b=${baseline[$1]:-} ops cell_ops cell_x notes x

	if [ -n "${skip[$r]:-}" ]; then
		echo "| $r | - | - | SKIP (${skip[$r]}) | |"
		return
	fi
	ops=${med[$r]}
	notes=${note[$r]:-}
	[ "${nfail[$r]:-0}" -eq 0 ] || notes+="${notes:+; }first failure: ${first_fail[$r]}"
	case $r in
	tally-traced | tally-fork-traced | tally-traced-nosample | tally-traced-rate64k | \
		tally-traced-norings | glibc-inject)
		notes="$(traced_events "$r")${notes:+; $notes}" ;;
	tally-fork-untraced) notes="alloc_bench ${fork_workload[*]}${notes:+; $notes}" ;;
	esac
	[ "$r" != glibc-memleak ] || notes="-q workload (5M pairs)${notes:+; $notes}"
	cell_ops=$(fmt_ops "$ops")
	if [ -z "$b" ]; then
		cell_x="baseline"
	elif x=$(slowdown "$r" "$b") && [ -n "$x" ]; then
		cell_x="$(fmt_slow "$x") (vs $b)"
	else
		cell_x="- (no $b figure)"
	fi
	echo "| $r | $(runs_cell "$r") | $cell_ops | $cell_x | $notes |"
}

verdict()
{
	local t=${med[tally-traced]:-} u=${med[tally-untraced]:-} x inexact lost_runs total

	if [ -n "${skip[tally-traced]:-}" ] || [ -z "$t" ] || [ -z "$u" ]; then
		echo "- SKIP tally traced slowdown <= 1.25x on 1 thread" \
		     "(${skip[tally-traced]:-no tally-untraced figure})"
		return
	fi
	x=$(slowdown tally-traced tally-untraced)
	total=$(values tally-traced exact | wc -l)
	inexact=$(values tally-traced exact | grep -vc '^true$') || true
	lost_runs=$(values tally-traced lost | awk '$1 != 0' | wc -l)
	if [ "$inexact" -gt 0 ] || [ "$lost_runs" -gt 0 ]; then
		echo "- FAIL tally traced slowdown = $(fmt_slow "$x") (need <= 1.25), but not every event was" \
		     "carried: $inexact of $total snapshots inexact, $lost_runs with lost events"
	elif awk -v x="$x" 'BEGIN { exit !(x <= 1.25) }'; then # unrounded
		echo "- PASS tally traced slowdown = $(fmt_slow "$x") (need <= 1.25); every event" \
		     "carried (exact, 0 lost) in $total/$total runs"
	else
		echo "- FAIL tally traced slowdown = $(fmt_slow "$x") (need <= 1.25)"
	fi
}

# Heap-profile sampling at the default rate against the same trace without it.
sampling_line()
{
	local t=${med[tally-traced]:-} n=${med[tally-traced-nosample]:-} r=${med[tally-traced-rate64k]:-}

	if [ -n "${skip[tally-traced-nosample]:-}" ] || [ -z "$t" ] || [ -z "$n" ]; then
		echo "- SKIP sampling at the default rate <= 1.03x of traced without it" \
		     "(${skip[tally-traced-nosample]:-no runs})"
		return
	fi
	local x
	x=$(slowdown tally-traced tally-traced-nosample)
	if awk -v x="$x" 'BEGIN { exit !(x <= 1.03) }'; then
		echo "- PASS sampling at the default rate (512 KiB) = $(fmt_slow "$x") of traced" \
		     "without it (need <= 1.03)"
	else
		echo "- FAIL sampling at the default rate (512 KiB) = $(fmt_slow "$x") of traced" \
		     "without it (need <= 1.03)"
	fi
	[ -z "$r" ] || echo "- sampling at --rate 65536:" \
		"$(fmt_slow "$(slowdown tally-traced-rate64k tally-traced-nosample)") of traced" \
		"without it (reported, not gated)"
}

# The forking row: reported beside the verdict, not gated.
fork_line()
{
	local t=${med[tally-fork-traced]:-} u=${med[tally-fork-untraced]:-}

	if [ -n "${skip[tally-fork-traced]:-}" ] || [ -z "$t" ] || [ -z "$u" ]; then
		echo "- tally traced, 8 forked processes: no figure (${skip[tally-fork-traced]:-no runs})"
		return
	fi
	echo "- tally traced, 8 forked processes:" \
	     "$(fmt_slow "$(slowdown tally-fork-traced tally-fork-untraced)") slower than untraced;" \
	     "$(traced_events tally-fork-traced) (reported, not gated)"
}

# --inject against glibc untraced (issue 34: at most 1.6x; issue 18's was 2.5x), every event kept.
inject_line()
{
	local t=${med[glibc-inject]:-} u=${med[glibc-untraced]:-}

	if [ -n "${skip[glibc-inject]:-}" ] || [ -z "$t" ] || [ -z "$u" ]; then
		echo "- SKIP --inject <= 1.6x glibc untraced (${skip[glibc-inject]:-no runs})"
		return
	fi
	local x
	x=$(slowdown glibc-inject glibc-untraced)
	if awk -v x="$x" 'BEGIN { exit !(x <= 1.6) }'; then
		echo "- PASS --inject = $(fmt_slow "$x") of glibc untraced (need <= 1.6);" \
		     "$(traced_events glibc-inject)"
	else
		echo "- FAIL --inject = $(fmt_slow "$x") of glibc untraced (need <= 1.6);" \
		     "$(traced_events glibc-inject)"
	fi
}

report()
{
	echo "## Tracer benchmark: alloc_bench churn 1 ($runs round(s)${quick:+, quick}; medians)"
	echo
	echo "Kernel $kernel, $(nproc) CPUs, workload pinned to CPU $pin_cpu." \
	     "Slowdown = untraced ops/s / traced ops/s in the same round, the median over the" \
	     "rounds (the VM's speed drifts between rounds)."
	echo
	echo "| row | runs | median ops/s | slowdown | notes |"
	echo "| --- | ---: | ---: | --- | --- |"
	for r in "${rows[@]}"; do
		report_row "$r"
	done
	echo
	verdict
	sampling_line
	fork_line
	inject_line
	echo
	echo "Runs failed: $(printf '%s\n' 0 "${nfail[@]}" | awk '{ n += $1 } END { print n }')." \
	     "Total time: $((SECONDS - start_s)) s. Logs: ${outdir#"$root"/}/"
}

report | tee "$outdir/summary.md"

# The benchmark ran unless a baseline produced nothing to compare against.
for r in tally-untraced glibc-untraced; do
	if [ -z "${med[$r]}" ] && [ "${skip[$r]:-}" != "not in BENCH_ROWS" ]; then
		echo "bench-trace: an untraced baseline produced no figure; see ${outdir#"$root"/}/" >&2
		exit 1
	fi
done
