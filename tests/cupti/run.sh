#!/usr/bin/env bash
# Run the CUPTI library's unit test (built by tests/cupti/build.sh into BUILD:
# the first argument, else $BUILD, else build/) and print cmocka's summary.
# Without a CUDA toolkit there is nothing to test: "0 passed, 0 failed, N skipped".
set -u
cd "$(dirname "$0")/../.."
BUILD=${1:-${BUILD:-build}}
CUDA=${CUDA:-/usr/local/cuda}

# the toolkits build.sh skips (no CUPTI, or CUPTI without its parameter structs)
if [ ! -f "$CUDA/include/cupti.h" ] || { [ ! -f "$CUDA/include/generated_cuda_meta.h" ] &&
	[ ! -f "$CUDA/extras/CUPTI/include/generated_cuda_meta.h" ]; }; then
	echo "cupti tests: skipped (no CUDA toolkit at $CUDA)"
	echo "0 passed, 0 failed, $(grep -c 'cmocka_unit_test' tests/cupti/test_cupti.c) skipped"
	exit 0
fi
test_bin=$BUILD/tests/cupti/test_cupti
if [ ! -x "$test_bin" ]; then
	echo "cupti tests: $test_bin is not built (tests/cupti/build.sh)" >&2
	exit 1
fi
exec "$test_bin"
