#!/usr/bin/env bash
# Run the CUPTI library's unit tests and print cmocka's output, then one line
# with the totals, "N passed, M failed, K skipped": the image-size definition
# (build/tests/test_image_size, `make test-build`; no CUDA toolkit needed),
# then the library's handler (built by cupti/build.sh into BUILD: the
# first argument, else $BUILD, else build/). Without a CUDA toolkit the
# handler's tests count as skipped.
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
CUDA=${CUDA:-/usr/local/cuda}
passed=0
failed=0
skipped=0

# cmocka BINARY: runs it, adds its summary lines (cmocka's, or "N passed, M
# failed") to the totals
cmocka() {
	local log rc p f k
	log=$(mktemp)
	"$1" >"$log" 2>&1
	rc=$?
	cat "$log"
	p=$(sed -nE 's/^\[  PASSED  \] ([0-9]+) test.*/\1/p; s/^([0-9]+) passed, [0-9]+ failed.*/\1/p' "$log" | tail -n1)
	f=$(sed -nE 's/^\[  FAILED  \] ([0-9]+) test.*/\1/p; s/^[0-9]+ passed, ([0-9]+) failed.*/\1/p' "$log" | tail -n1)
	k=$(sed -nE 's/^\[  SKIPPED \] ([0-9]+) test.*/\1/p' "$log" | tail -n1)
	rm -f "$log"
	# crashed or failed without saying how many: one failure
	[ "$rc" -ne 0 ] && [ -z "$f" ] && f=1
	passed=$((passed + ${p:-0}))
	failed=$((failed + ${f:-0}))
	skipped=$((skipped + ${k:-0}))
}

if [ -x "$BUILD/tests/test_image_size" ]; then
	cmocka "$BUILD/tests/test_image_size"
else
	echo "cupti tests: $BUILD/tests/test_image_size is not built (make test-build)" >&2
	failed=$((failed + 1))
fi

test_bin=$BUILD/tests/cupti/test_cupti
# the toolkits build.sh skips (no CUPTI, or CUPTI without its parameter structs)
if [ ! -f "$CUDA/include/cupti.h" ] || { [ ! -f "$CUDA/include/generated_cuda_meta.h" ] &&
	[ ! -f "$CUDA/extras/CUPTI/include/generated_cuda_meta.h" ]; }; then
	# its tests, one T(name) line each; a toolkit is not a Debian package:
	# a machine may lack it even under CI (tests/lib.sh's skip_absent)
	echo "skip - cupti handler: no CUDA toolkit with CUPTI at $CUDA"
	skipped=$((skipped + $(grep -cE '^[[:space:]]*T\(' tests/cupti/test_cupti.c) + 2)) # + test_nosdk's
elif [ ! -x "$test_bin" ]; then
	echo "cupti tests: $test_bin is not built (cupti/build.sh)" >&2
	failed=$((failed + 1))
else
	cmocka "$test_bin"
	cmocka "$BUILD/tests/cupti/test_nosdk"
fi

echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" -eq 0 ]
