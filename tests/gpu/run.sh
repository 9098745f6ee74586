#!/usr/bin/env bash
# GPU figures through the driver uprobes, against a fake libcuda.so.1
# (tests/fake_cuda): a started workload, a late attach, a driver that is
# dlopened after tally attached, the image fixtures, a driver found only
# through LD_LIBRARY_PATH (in the process tally starts, in a child of it,
# loaded by a plugin), a late attach after the GPU work (not exact, and
# NVML's device_memory_used from the fake NVML), and CUPTI refusing tally's
# subscriber (the real CUPTI, which a fake driver cannot serve). The workload counts
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
LDP=$PWD/$BUILD/tests/gpu/gpu_ldpath
PLUGIN=$PWD/$BUILD/tests/gpu/libgpu_plugin.so
CUPTI_LIB=$PWD/$BUILD/libtally_cupti.so
FAKE_CUPTI_DIR=$PWD/$BUILD/tests/fake_cupti
. tests/lib.sh
# no GPU here: tally follows the dynamic loader for the fake driver all the same
export TALLY_GPU=on
# the fake driver's state for the fake NVML, which tally loads
export TALLY_NVML=$PWD/$BUILD/tests/fake_cuda/libnvidia-ml.so.1


need_root GPU
# dlopen_workload's READY_FILE is empty: there, not full
wait_exists() { # FILE: 10 s at most
	for _ in $(seq 100); do [ -e "$1" ] && return 0; sleep 0.1; done
	return 1
}

# NAME ENV LIB [before]: dlopen_workload (ENV: its environment, as
# VAR=VALUE) with tally attached by PID at its gate, then let go; tally's
# snapshot in $tmp/NAME.json, its stderr in $tmp/NAME.err, its status in rc
attach_then_go() {
	local name=$1 envs=$2 lib=$3 dpid tpid
	shift 3
	env "$envs" "$DL" "$lib" 5 "$tmp/$name.ready" "$@" &
	dpid=$!
	pids+=("$dpid")
	wait_exists "$tmp/$name.ready"
	timeout 60 "$TALLY" snapshot -v -p "$dpid" >"$tmp/$name.json" 2>"$tmp/$name.err" &
	tpid=$!
	pids+=("$tpid")
	wait_attached "$tmp/$name.err"
	kill -USR1 "$dpid"
	wait "$tpid"
	rc=$?
}
export FAKE_CUDA_STATE=$tmp/nvml
mkdir -p "$FAKE_CUDA_STATE" "$tmp/drv"
# a directory of its own, named nowhere but in LD_LIBRARY_PATH
cp "$FAKE" "$tmp/drv/libcuda.so.1"

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
attach_then_go s3 "LD_PRELOAD=$ALLOC" "$FAKE"
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

# 5. the driver found only through LD_LIBRARY_PATH, in the process tally starts
LD_LIBRARY_PATH=$tmp/drv timeout 120 "$TALLY" snapshot -- "$LDP" run "$tmp/ldp.json" \
	>"$tmp/s5.json" 2>"$tmp/s5.err" </dev/null
rc=$?
want=$(want_view "$tmp/ldp.json.end" 2>&1)
got=$(tally_view "$tmp/s5.json" 2>&1)
check "LD_LIBRARY_PATH driver: every instance's GPU figures exact" \
	"$([ $rc -eq 0 ] && [ "$want" = "$got" ] && jq -e '.target.cuda == "driver" and .instance.exact' "$tmp/s5.json" >/dev/null; echo $?)" "rc=$rc $(head -c 300 "$tmp/s5.err")
  want $want
  got  $got"
# CUPTI (tally injects it when it was built) refuses a fake driver: the
# driver's probes count, said once on stderr and in the snapshot
if [ -f "$CUPTI_LIB" ]; then
	check "CUPTI refused: \"cuda\": \"driver\" with CUPTI's reason, one line on stderr" \
		"$(jq -e '.target.cuda == "driver" and (.target.cuda_why | test("CUPTI_ERROR"))' "$tmp/s5.json" >/dev/null &&
			[ "$(grep -c "CUPTI refused tally's subscriber" "$tmp/s5.err")" = 1 ]; echo $?)" \
		"$(jq -c .target "$tmp/s5.json" 2>&1) $(head -c 300 "$tmp/s5.err")"
else
	skip_absent "CUPTI refused" "no CUDA toolkit with CUPTI (tally built without its CUPTI library)"
fi

# 6. ... in a child of the process tally starts
LD_LIBRARY_PATH=$tmp/drv timeout 120 "$TALLY" snapshot -- sh -c "\"$LDP\" run \"$tmp/child.json\"; true" \
	>"$tmp/s6.json" 2>"$tmp/s6.err" </dev/null
rc=$?
want=$(want_view "$tmp/child.json.end" 2>&1)
got=$(jq -cS "{instance: (.processes[] | select(.target.comm == \"gpu_ldpath\") | .instance | $FIELDS),
	groups: ([.processes[] | select(.target.comm == \"gpu_ldpath\") | .groups[]
		  | select(.name == \"root\" or .name == \"train\" or .name == \"infer\")
		  | {(.name): (.instance | $FIELDS)}] | add)}" "$tmp/s6.json" 2>&1)
check "a child loads the driver through LD_LIBRARY_PATH: its GPU figures exact" \
	"$([ $rc -eq 0 ] && [ "$want" = "$got" ]; echo $?)" "rc=$rc $(head -c 300 "$tmp/s6.err")
  want $want
  got  $got"

# 7. ... loaded by a plugin the program dlopens, after tally attached
attach_then_go s7 "LD_LIBRARY_PATH=$tmp/drv" "$PLUGIN"
check "a plugin loads the driver by its soname: counted (4 launches, 1 refused)" \
	"$([ $rc -eq 0 ] && jq -e '.instance.kernels_launched == 4 and .instance.failed_launches == 1 and .instance.device_bytes_allocated == 0 and .instance.exact and .target.cuda == "driver"' "$tmp/s7.json" >/dev/null; echo $?)" \
	"rc=$rc $(jq -c '[.target, .instance]' "$tmp/s7.json" 2>&1) $(head -c 300 "$tmp/s7.err")"

# 8. a late attach after GPU work: not exact, said why; the work after it
# counted exactly (a second round: 4 launches, 1 refused)
attach_then_go s8 "LD_LIBRARY_PATH=$tmp/drv" "$PLUGIN" before
check "late -p after GPU work: instance.exact false with the reason, on stderr too" \
	"$([ $rc -eq 0 ] && jq -e '(.instance.exact | not) and (.instance.inexact_why[0] | test("before tally attached")) and (.exact | not) and ([.groups[].instance.exact] | all | not)' "$tmp/s8.json" >/dev/null &&
		grep -q "loaded the CUDA driver before tally attached" "$tmp/s8.err"; echo $?)" \
	"rc=$rc $(jq -c '.instance' "$tmp/s8.json" 2>&1) $(head -c 300 "$tmp/s8.err")"
check "late -p after GPU work: the work after the attach counted exactly" \
	"$(jq -e '.instance.kernels_launched == 4 and .instance.failed_launches == 1 and .instance.device_bytes_allocated == 0' "$tmp/s8.json" >/dev/null; echo $?)" \
	"$(jq -c '.instance' "$tmp/s8.json" 2>&1)"

# 9. NVML's device_memory_used: the driver's own figure, which a late
# attach cannot rebuild (tally's device_bytes_allocated counts from it)
LD_PRELOAD=$ALLOC "$WL" wait "$tmp/nv.json" </dev/null &
wpid=$!
pids+=("$wpid")
wait_file "$tmp/nv.json"
timeout 60 "$TALLY" snapshot -p "$wpid" -d 0.5 >"$tmp/s9.json" 2>"$tmp/s9.err"
rc=$?
kill -USR1 "$wpid"
want=$(jq '.instance.device_bytes_allocated' "$tmp/nv.json" 2>&1)
check "late -p: device_memory_used is NVML's ($want bytes), tally's own count from the attach" \
	"$([ $rc -eq 0 ] && [ "$want" -gt 0 ] && jq -e --argjson w "$want" '.instance.device_memory_used == $w and .instance.device_bytes_allocated == 0 and (.instance.exact | not)' "$tmp/s9.json" >/dev/null; echo $?)" \
	"rc=$rc $(jq -c .instance "$tmp/s9.json" 2>&1) $(head -c 300 "$tmp/s9.err")"

# 12. tally stopped while a thread waits at the driver's load: the thread
# goes on at the deadline (2 s); once tally runs again it says so, and the
# figures are not exact
LD_LIBRARY_PATH=$tmp/drv "$DL" "$PLUGIN" 5 "$tmp/st.ready" &
dpid=$!
pids+=("$dpid")
wait_exists "$tmp/st.ready"
timeout 60 "$TALLY" snapshot -v -p "$dpid" >"$tmp/s12.json" 2>"$tmp/s12.err" &
tpid=$!
pids+=("$tpid")
wait_attached "$tmp/s12.err"
tally_pid=$(pgrep -P "$tpid" -x tally)
kill -STOP "$tally_pid"
t0=$(date +%s%N)
kill -USR1 "$dpid"
wait "$dpid"
wrc=$?
ms=$((($(date +%s%N) - t0) / 1000000))
kill -CONT "$tally_pid"
wait "$tpid"
rc=$?
check "tally stopped at a driver's load: the target goes on after the 2 s hold (rc $wrc, $ms ms), tally says so" \
	"$([ $wrc -eq 0 ] && [ $ms -ge 1900 ] && [ $ms -lt 10000 ] && [ $rc -eq 0 ] &&
		grep -q "its first GPU calls may be missing" "$tmp/s12.err" &&
		jq -e '(.instance.exact | not) and (.instance.inexact_why | any(test("came after")))' "$tmp/s12.json" >/dev/null; echo $?)" \
	"rc=$rc $(jq -c .instance "$tmp/s12.json" 2>&1) $(head -c 300 "$tmp/s12.err")"

# 13. ... and killed (-9) there: the target goes on all the same
LD_LIBRARY_PATH=$tmp/drv "$DL" "$PLUGIN" 5 "$tmp/k9.ready" &
dpid=$!
pids+=("$dpid")
wait_exists "$tmp/k9.ready"
timeout 60 "$TALLY" snapshot -v -p "$dpid" >/dev/null 2>"$tmp/s13.err" &
tpid=$!
pids+=("$tpid")
wait_attached "$tmp/s13.err"
tally_pid=$(pgrep -P "$tpid" -x tally)
kill -STOP "$tally_pid"
kill -USR1 "$dpid"
# the driver mapped: the loader's hook, and its hold (2 s, tally stopped),
# come next; the kill lands there, not before the load began
for _ in $(seq 200); do grep -q "$tmp/drv/libcuda.so" /proc/"$dpid"/maps 2>/dev/null && break; sleep 0.05; done
kill -9 "$tally_pid"
wait "$dpid"
wrc=$?
wait "$tpid" 2>/dev/null
check "tally killed (-9) while a thread waits at the driver's load: the target finishes its GPU work (rc $wrc)" \
	"$([ $wrc -eq 0 ]; echo $?)" "$(head -c 300 "$tmp/s13.err")"

# 14. thirty processes of a tree load the driver one after another: each is
# held, probed and counted, and its probes go when it ends (a pid that
# comes back is a new process)
LD_LIBRARY_PATH=$tmp/drv timeout 120 "$TALLY" snapshot --no-sample -- sh -c \
	"for i in \$(seq 30); do \"$LDP\" run \"$tmp/many.json\" || exit 1; done" \
	>"$tmp/s14.json" 2>"$tmp/s14.err" </dev/null
rc=$?
want=$(jq '.instance.kernels_launched' "$tmp/many.json.end" 2>&1)
check "30 processes load the driver in turn: each counted ($want launches each)" \
	"$([ $rc -eq 0 ] && jq -e --argjson w "$want" '[.processes[] | select(.target.comm == "gpu_ldpath") | .instance | select(.kernels_launched == $w and .exact)] | length == 30' "$tmp/s14.json" >/dev/null; echo $?)" \
	"rc=$rc $(jq -c '[.processes[] | select(.target.comm == "gpu_ldpath") | .instance.kernels_launched]' "$tmp/s14.json" 2>&1) $(head -c 300 "$tmp/s14.err")"

# 15. TALLY_GPU: auto (the default) follows the loader only where an NVIDIA
# driver is installed; off attaches no GPU probe at all; a bad value is said
want_cuda=none
[ -e /proc/driver/nvidia ] || [ -e /dev/nvidiactl ] || [ -e /dev/dxg ] && want_cuda=driver
TALLY_GPU=auto LD_LIBRARY_PATH=$tmp/drv timeout 60 "$TALLY" snapshot -v -- "$LDP" run "$tmp/auto.json" \
	>"$tmp/s15.json" 2>"$tmp/s15.err" </dev/null
rc=$?
check "TALLY_GPU=auto: the loader followed only with a GPU driver installed (here: $want_cuda)" \
	"$([ $rc -eq 0 ] && jq -e --arg w "$want_cuda" '.target.cuda == $w' "$tmp/s15.json" >/dev/null &&
		{ [ "$want_cuda" = driver ] || grep -q 'TALLY_GPU=on follows it' "$tmp/s15.err"; }; echo $?)" \
	"rc=$rc $(jq -c .target "$tmp/s15.json" 2>&1) $(head -c 300 "$tmp/s15.err")"
TALLY_GPU=off LD_LIBRARY_PATH=$tmp/drv timeout 60 "$TALLY" snapshot -- "$LDP" run "$tmp/off.json" \
	>"$tmp/s16.json" 2>"$tmp/s16.err" </dev/null
rc=$?
TALLY_GPU=bogus timeout 60 "$TALLY" snapshot -- true >/dev/null 2>"$tmp/s17.err" </dev/null
rc2=$?
check "TALLY_GPU=off: no GPU probes (cuda none); TALLY_GPU=bogus: one line, auto" \
	"$([ $rc -eq 0 ] && [ $rc2 -eq 0 ] && jq -e '.target.cuda == "none" and .instance.kernels_launched == 0' "$tmp/s16.json" >/dev/null &&
		[ "$(grep -c 'TALLY_GPU=bogus: want on, off or auto' "$tmp/s17.err")" = 1 ]; echo $?)" \
	"rc=$rc rc2=$rc2 $(jq -c .target "$tmp/s16.json" 2>&1) $(cat "$tmp/s17.err")"

# 10-11. CUPTI with the fake driver: the fake CUPTI (tests/cupti/fake_cupti.c,
# built with a CUDA toolkit) under the real one's soname, found first
if [ -f "$CUPTI_LIB" ] && ls "$FAKE_CUPTI_DIR"/libcupti.so.* >/dev/null 2>&1; then
	# 10. another tool holds CUPTI: the driver's probes count, whole
	FAKE_CUPTI_HELD_BY=nsys LD_LIBRARY_PATH=$tmp/drv:$FAKE_CUPTI_DIR timeout 120 "$TALLY" \
		snapshot -- "$LDP" run "$tmp/held.json" >"$tmp/s10.json" 2>"$tmp/s10.err" </dev/null
	rc=$?
	want=$(want_view "$tmp/held.json.end" 2>&1)
	got=$(tally_view "$tmp/s10.json" 2>&1)
	check "CUPTI held by another tool: the driver's figures, whole, and who holds it" \
		"$([ $rc -eq 0 ] && [ "$want" = "$got" ] &&
			jq -e '.target.cuda == "driver" and .target.cuda_why == "CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED; held by nsys"' "$tmp/s10.json" >/dev/null &&
			grep -q 'held by nsys' "$tmp/s10.err"; echo $?)" "rc=$rc $(jq -c .target "$tmp/s10.json" 2>&1) $(head -c 300 "$tmp/s10.err")
  want $want
  got  $got"

	# 11. CUPTI speaks: after its first batch the driver's probes let go
	LD_LIBRARY_PATH=$tmp/drv:$FAKE_CUPTI_DIR timeout 60 "$TALLY" record -v -o "$tmp/t11.json" -- \
		"$DL" "$PLUGIN" 5 "$tmp/c.ready" before >"$tmp/s11.out" 2>"$tmp/s11.err" </dev/null &
	tpid=$!
	pids+=("$tpid")
	for _ in $(seq 100); do grep -q 'CUPTI speaks for it' "$tmp/s11.err" && break; sleep 0.1; done
	wpid=$(sed -nE 's/^tally: ([0-9]+): CUPTI speaks for it.*/\1/p' "$tmp/s11.err" | head -1)
	[ -n "$wpid" ] && kill -USR1 "$wpid"
	wait "$tpid"
	rc=$?
	# each round: an image loaded and unloaded, 1 MiB allocated and freed,
	# 5 launches: 9 GPU events; the driver's only in the first round
	n_cupti=$(jq '[.traceEvents[] | select(.cat == "gpu" and .args.source == "cupti")] | length' "$tmp/t11.json" 2>&1)
	n_driver=$(jq '[.traceEvents[] | select(.cat == "gpu" and .args.source == "driver")] | length' "$tmp/t11.json" 2>&1)
	check "CUPTI speaks: the driver's probes fire no more (driver events $n_driver of want 9, CUPTI's $n_cupti of want 18)" \
		"$([ $rc -eq 0 ] && [ -n "$wpid" ] && [ "$n_driver" = 9 ] && [ "$n_cupti" = 18 ]; echo $?)" \
		"rc=$rc pid=$wpid $(head -c 400 "$tmp/s11.err")"
else
	skip_absent "CUPTI held by another tool, CUPTI speaks" "no CUDA toolkit with CUPTI" 2
fi
finish
