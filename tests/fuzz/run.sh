#!/usr/bin/env bash
# A bounded fuzz pass over the readers of untrusted input (tests/fuzz): each
# libFuzzer target runs for FUZZ_SECONDS (default 20) over a copy of its kept
# corpus (tests/fuzz/corpus/NAME), so that the pass never writes to the tree.
# One test per target: passed when it neither crashed, hung, leaked nor
# broke a contract the target checks. A failure's input is kept in
# $BUILD/tests/fuzz/artifacts/ and its stack is printed. Without clang's
# libFuzzer the targets are not built: each is skipped.
# A longer run: build/tests/fuzz/fuzz_remote -max_total_time=3600 tests/fuzz/corpus/remote
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
FUZZ_SECONDS=${FUZZ_SECONDS:-20}
TARGETS=(remote decoder json_read pprof_read diff)
. tests/lib.sh

rt="$(clang -print-runtime-dir 2>/dev/null)/libclang_rt.fuzzer-$(uname -m).a"
if [ ! -f "$rt" ]; then
	skip "fuzz ${TARGETS[*]}" "clang's libFuzzer is not installed (libclang-rt-14-dev; scripts/setup.sh installs it)" ${#TARGETS[@]}
	finish
	exit
fi

artifacts=$BUILD/tests/fuzz/artifacts
mkdir -p "$artifacts"
for name in "${TARGETS[@]}"; do
	bin=$BUILD/tests/fuzz/fuzz_$name
	# make, not only when missing: run alone, the script must not fuzz a stale build
	if ! make -s BUILD="$BUILD" "$bin" >"$tmp/build.log" 2>&1; then
		check "fuzz_$name: builds" 1 "$(tail -n 5 "$tmp/build.log")"
		continue
	fi
	mkdir -p "$tmp/corpus-$name"
	cp tests/fuzz/corpus/"$name"/* "$tmp/corpus-$name/" 2>/dev/null
	# -timeout: one input; -rss_limit_mb: the whole process; leaks are LeakSanitizer's
	"$bin" -max_total_time="$FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
		-print_final_stats=1 -artifact_prefix="$artifacts/$name-" "$tmp/corpus-$name" \
		>"$tmp/$name.log" 2>&1
	rc=$?
	runs=$(sed -nE 's/^stat::number_of_executed_units: *([0-9]+).*/\1/p' "$tmp/$name.log")
	rate=$(sed -nE 's/^stat::average_exec_per_sec: *([0-9]+).*/\1/p' "$tmp/$name.log")
	cov=$(grep -E '^#[0-9]+' "$tmp/$name.log" | tail -n 1 | sed -nE 's/.* cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/\1 edges, \2 features, \3 inputs/p')
	detail=$(grep -E 'ERROR|runtime error|SUMMARY|Test unit written|^    #[0-9]' "$tmp/$name.log" | head -n 25)
	check "fuzz_$name: ${FUZZ_SECONDS} s, ${runs:-?} inputs (${rate:-?}/s), ${cov:-coverage unknown}: no crash, hang or leak" \
		"$rc" "status $rc
$detail"
done
finish
