#!/usr/bin/env bash
# GPU figures through the driver uprobes, against a fake libcuda.so.1
# (tests/fake_cuda): a started workload, a late attach, a driver that is
# dlopened after tally attached, and the image fixtures. The workload counts
# for itself what every instance should show (tests/gpu/workload.c); tally
# must report exactly that. Root only; the last line is "N passed, M failed".
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
WL=$PWD/$BUILD/tests/gpu/gpu_workload
DL=$PWD/$BUILD/tests/gpu/dlopen_workload
IMG=$PWD/$BUILD/tests/gpu/image_workload
FAKE=$PWD/$BUILD/tests/fake_cuda/libcuda.so.1
ALLOC=$PWD/$BUILD/libtally_alloc.so
export TALLY_LIBCUDA=$FAKE
. tests/lib.sh


need_root GPU

FIELDS='{kernels_launched, graph_launches, failed_launches, back_pressure_rejections, yield_count, os_yields, device_bytes_allocated, host_pinned_bytes, bytes_pinned}'
# the figures of a tally snapshot, shaped as the workload writes them
tally_view() {
	jq -cS "{instance: (.instance | $FIELDS),
		groups: ([.groups[] | select(.name == \"root\" or .name == \"train\" or .name == \"infer\")
			  | {(.name): (.instance | $FIELDS)}] | add)}" "$1"
}
want_view() {
	jq -cS "{instance: (.instance | $FIELDS), groups: (.groups | map_values($FIELDS))}" "$1"
}

# 1. a started workload: every entry point, frees across groups, all released at the end
timeout 120 "$TALLY" snapshot -- "$WL" run "$tmp/run.json" >"$tmp/s1.json" 2>"$tmp/s1.err" </dev/null
rc=$?
want=$(want_view "$tmp/run.json.end" 2>&1)
got=$(tally_view "$tmp/s1.json" 2>&1)
check "snapshot -- CMD: every instance's GPU figures exact, gauges back to 0" \
	"$([ $rc -eq 0 ] && [ "$want" = "$got" ]; echo $?)" "rc=$rc $(head -c 200 "$tmp/s1.err")
  want $want
  got  $got"
check "snapshot -- CMD: the source is the driver" \
	"$(jq -e '.target.cuda == "driver"' "$tmp/s1.json" >/dev/null; echo $?)" "$(jq -c .target "$tmp/s1.json" 2>&1)"

# 2. late attach: tally attaches at the workload's first gate, before any GPU work
LD_PRELOAD=$ALLOC "$WL" late "$tmp/late.json" </dev/null &
wpid=$!
pids+=("$wpid")
wait_file "$tmp/late.json.ready"
timeout 120 "$TALLY" snapshot -v -p "$wpid" >"$tmp/s2.json" 2>"$tmp/s2.err" &
tpid=$!
pids+=("$tpid")
wait_attached "$tmp/s2.err"
kill -USR1 "$wpid" # the GPU work, then the figures, then the second gate
wait_file "$tmp/late.json"
kill -USR1 "$wpid" # release everything and exit
wait "$tpid"
rc=$?
want=$(want_view "$tmp/late.json.end" 2>&1)
got=$(tally_view "$tmp/s2.json" 2>&1)
check "late -p PID: every instance's GPU figures exact, gauges back to 0" \
	"$([ $rc -eq 0 ] && [ "$want" = "$got" ]; echo $?)" "rc=$rc $(head -c 200 "$tmp/s2.err")
  want $want
  got  $got"

# 3. a driver dlopened after tally attached
LD_PRELOAD=$ALLOC "$DL" "$FAKE" 5 "$tmp/dl.ready" &
dpid=$!
pids+=("$dpid")
wait_file "$tmp/dl.ready" || sleep 0.5
timeout 60 "$TALLY" snapshot -v -p "$dpid" >"$tmp/s3.json" 2>"$tmp/s3.err" &
tpid=$!
pids+=("$tpid")
wait_attached "$tmp/s3.err"
kill -USR1 "$dpid"
wait "$tpid"
rc=$?
check "a driver dlopened after the attach is counted (4 launches, 1 refused, 1 MiB freed)" \
	"$([ $rc -eq 0 ] && jq -e '.instance.kernels_launched == 4 and .instance.failed_launches == 1 and .instance.device_bytes_allocated == 0 and .instance.bytes_pinned == 0 and .target.cuda == "driver"' "$tmp/s3.json" >/dev/null; echo $?)" \
	"rc=$rc $(jq -c '[.target, .instance]' "$tmp/s3.json" 2>&1) $(head -c 200 "$tmp/s3.err")"

# 4. the image fixtures (tests/image_fixtures.c), on which the CUPTI library's
# side of the definition is tested too (tests/test_image_size.c): each loaded
# in a group of its own, every group's bytes_pinned the size bpf/image_size.h
# gives it
timeout 60 "$TALLY" snapshot -- "$IMG" "$tmp/img.json" >"$tmp/s4.json" 2>"$tmp/s4.err" </dev/null
rc=$?
want=$(jq -cS . "$tmp/img.json" 2>&1)
got=$(jq -cS --slurpfile w "$tmp/img.json" \
	'[.groups[] | select(.name as $n | $w[0] | has($n)) | {(.name): .instance.bytes_pinned}] | add' \
	"$tmp/s4.json" 2>&1)
check "image fixtures: each group's bytes_pinned is its image's size (bpf/image_size.h)" \
	"$([ $rc -eq 0 ] && [ "$want" = "$got" ]; echo $?)" "rc=$rc $(head -c 200 "$tmp/s4.err")
  want $want
  got  $got"

finish
