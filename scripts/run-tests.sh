#!/usr/bin/env bash
# Run every test suite, print each suite's own summary, then one line with the
# totals, "N passed, M failed, K skipped", naming every skip. Called by `make
# test` after the build; BUILD may point elsewhere. The rules (docs/TESTING.md):
# - the suites test tally against the kernel (BPF, uprobes, ptrace): not root,
#   they cannot test what they exist for, and this refuses to start;
# - a suite that ends without its summary line, or with a status other than 0
#   and no failure counted, is one failure (it crashed, hung or said nothing);
# - a skip is counted and named ("skip - NAME: WHY", cmocka's "[  SKIPPED ]
#   NAME"); skips without a name are a failure; under CI (CI=true) a skip of
#   anything a CI machine has is a failure where it happens (tests/lib.sh,
#   tests/test_skip.h).
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
STRESS_RUNS=${STRESS_RUNS:-3}
passed=0
failed=0
skipped=0
broken=()
skip_names=()
times=() # "SECONDS NAME" per suite: the slowest are listed at the end (the suite's budget is 20 min)

if [ "$(id -u)" -ne 0 ]; then
	echo "make test: the suites run tally's BPF programs, uprobes and ptrace on real processes" \
		"and need root; run it as root (sudo make test)" >&2
	exit 1
fi

# run NAME TIMEOUT CMD...: counts cmocka's "[  PASSED  ] N" / "[  FAILED  ] N" /
# "[  SKIPPED ] N" lines, or a plain "N passed, M failed[, K skipped]" line.
run() {
	local name=$1 limit=$2
	shift 2
	local log t0=$SECONDS
	log=$(mktemp)
	echo "=== $name"
	timeout "$limit" "$@" >"$log" 2>&1
	local rc=$?
	times+=("$((SECONDS - t0)) $name")
	grep -vE '^\[ +(RUN|OK) +\]' "$log"
	local p f k
	p=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p; s/^([0-9]+) passed, [0-9]+ failed.*/\1/p' "$log" | tail -n1)
	f=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p; s/^[0-9]+ passed, ([0-9]+) failed.*/\1/p' "$log" | tail -n1)
	k=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) test.*/\1/p; s/^[0-9]+ passed, [0-9]+ failed, ([0-9]+) skipped.*/\1/p' "$log" | tail -n1)
	if [ -z "$p" ] && [ -z "$f" ]; then
		echo "--- $name ended (status $rc) without its summary line: one failure"
		f=1
		broken+=("$name")
	elif [ "$rc" -ne 0 ] && [ "${f:-0}" -eq 0 ]; then
		# crashed, hung or failed without saying how many: count it as one
		echo "--- $name exited with status $rc"
		f=1
		broken+=("$name")
	fi
	p=${p:-0}
	f=${f:-0}
	k=${k:-0}
	local names
	names=$(sed -nE 's/^skip - (.*)/\1/p; /^\[  SKIPPED \] [0-9]+ test/d; s/^\[  SKIPPED \] (.+)/\1/p' "$log" | sort -u)
	if [ "$k" -gt 0 ] && [ -z "$names" ]; then
		echo "--- $name: $k skipped without a name: one failure"
		f=$((f + 1))
		broken+=("$name")
	fi
	while IFS= read -r n; do
		[ -n "$n" ] && skip_names+=("$name: $n")
	done <<<"$names"
	skipped=$((skipped + k))
	passed=$((passed + p))
	failed=$((failed + f))
	rm -f "$log"
}

run layout 60 scripts/check-layout.sh
# docs/STYLE.md rule 2: every C file as .clang-format writes it
run format 120 bash -c 'out=$(make -s format-check 2>&1); echo "$out" | tail -n 20
	[ "$out" = "format: clean" ] && echo "1 passed, 0 failed" || echo "0 passed, 1 failed"'
run replay 60 "$BUILD/tests/test_replay"
run alloc_unit 300 "$BUILD/tests/test_alloc_unit"
run span 60 "$BUILD/tests/test_span"
run sdk 60 "$BUILD/tests/test_sdk"
run model 60 "$BUILD/tests/test_model"
run tree 60 "$BUILD/tests/test_tree"
run figures 60 "$BUILD/tests/test_figures"
run json 60 "$BUILD/tests/test_json"
run text 60 "$BUILD/tests/test_text"
run json_read 60 "$BUILD/tests/test_json_read"
run cli 60 "$BUILD/tests/test_cli"
run target 60 "$BUILD/tests/test_target"
run glibc_site 60 "$BUILD/tests/test_glibc_site"
run target_ns 60 "$BUILD/tests/test_target_ns"
run remote 60 "$BUILD/tests/test_remote"
run cut 120 "$BUILD/tests/test_cut"
run cut_model 120 tests/cut_model/run.sh
run heap_rings 60 "$BUILD/tests/test_heap_rings"
run trace 60 "$BUILD/tests/test_trace"
run prom 60 "$BUILD/tests/test_prom"
run report_unit 60 "$BUILD/tests/test_report"
run top 60 "$BUILD/tests/test_top"
run sites 60 "$BUILD/tests/test_sites"
run sample 120 "$BUILD/tests/test_sample"
run symbols 60 "$BUILD/tests/test_symbols"
run usdt 60 "$BUILD/tests/test_usdt" "$BUILD/libtally_alloc.so"
run pprof_unit 60 "$BUILD/tests/test_pprof"
run pprof 120 tests/pprof/run.sh
run sdk_with_tally_alloc 60 "$BUILD/tests/test_sdk_alloc"
run alloc_idle 300 "$BUILD/tests/test_alloc_idle"
for i in $(seq 1 "$STRESS_RUNS"); do
	run "alloc_stress (seed $i)" 300 "$BUILD/tests/test_alloc_stress" "$i"
	run "alloc_stress, product library untraced (seed $i)" 300 \
		"$BUILD/tests/test_alloc_fastpath" "$i"
	# the same with a 30 ms purge delay: the purger at work all through
	run "alloc_stress, purger every few ms (seed $i)" 300 \
		env TALLY_ALLOC_PURGE_MS=30 "$BUILD/tests/test_alloc_stress" "$i"
	run "alloc_stress, product library, purger every few ms (seed $i)" 300 \
		env TALLY_ALLOC_PURGE_MS=30 "$BUILD/tests/test_alloc_fastpath" "$i"
done
run alloc_probes 60 tests/test_probes.sh "$BUILD"
run fork 300 tests/fork/run.sh
run tree_follow 300 tests/tree/run.sh
run hostile 120 tests/hostile/run.sh
# libFuzzer on the remote state reader, the event decoder, the JSON reader, the pprof
# reader and tally diff's matching, about 20 s each
run fuzz 200 tests/fuzz/run.sh
run snapshot 300 tests/snapshot/run.sh
run programs 600 tests/programs/run.sh
run preload 300 tests/preload/run.sh "$BUILD/libtally_alloc.so"
run tracer 600 tests/tracer/run.sh
run busy 600 tests/busy/run.sh
run cupti 120 tests/cupti/run.sh "$BUILD"
run gpu_driver 300 tests/gpu/run.sh
run top_view 300 tests/top/run.sh
run demo 120 tests/demo/run.sh
run record 300 tests/record/run.sh
run report 300 tests/report/run.sh
run serve 300 tests/serve/run.sh
run serve_all 300 tests/serve_all/run.sh
run profile 300 tests/profile/run.sh
# OpenTelemetry's memory probes and thread context, read by bpftrace and gdb
run otel 120 tests/otel/run.sh
run peak 120 tests/peak/run.sh
run diff 120 tests/diff/run.sh
run container 120 tests/container/run.sh
run glibc_mode 300 "$BUILD/tests/test_glibc" "$BUILD/tests/glibc_workload"
run inject 300 tests/inject/run.sh
run inject_chaos 400 tests/inject/chaos.sh
run cpu 60 tests/cpu/run.sh
run outfile 60 tests/outfile/run.sh
run cmdline 120 tests/cmdline/run.sh
run conformance 120 tests/conformance/run.sh
run exit 120 tests/exit/run.sh
run oom 300 tests/oom/run.sh
run servers 600 tests/servers/run.sh
run servers_chaos 600 tests/servers/chaos.sh

echo
echo "slowest suites (s): $(printf '%s\n' "${times[@]}" | sort -rn | head -n 8 | awk '{printf "%s%s %s", (NR > 1 ? ", " : ""), $2, $1}'); all: $SECONDS s"
[ ${#broken[@]} -gt 0 ] && echo "suites that exited abnormally: ${broken[*]}"
for n in "${skip_names[@]}"; do echo "skipped: $n"; done
if [ ${#skip_names[@]} -gt 0 ]; then
	names=$(printf '%s; ' "${skip_names[@]}")
	echo "$passed passed, $failed failed, $skipped skipped (${names%; })"
else
	echo "$passed passed, $failed failed, $skipped skipped"
fi
[ "$failed" -eq 0 ]
