#!/usr/bin/env bash
# Builds the fake CUDA driver and the GPU test workload:
#   BUILD/tests/fake_cuda/libcuda.so.1   (soname libcuda.so.1)
#   BUILD/tests/gpu/gpu_workload         (finds both libraries through its rpath)
#   BUILD/tests/gpu/image_workload       (the image fixtures, tests/image_fixtures.c)
#   BUILD/tests/gpu/gpu_ldpath           (gpu_workload finding the driver only
#                                         through LD_LIBRARY_PATH)
#   BUILD/tests/gpu/dlopen_workload, libgpu_plugin.so (a driver loaded late, or
#                                         by a library the program loads)
#   BUILD/tests/fake_cuda/libnvidia-ml.so.1 (the fake NVML)
# Usage: tests/gpu/build.sh BUILD   (BUILD/libtally.so must exist: `make`)
# CC and EXTRA_CFLAGS are taken from the environment.
set -eu
cd "$(dirname "$0")/../.."
BUILD=${1:?usage: tests/gpu/build.sh BUILD}
CC=${CC:-cc}
WARN="-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2"
CFLAGS="-std=gnu11 -O2 -g $WARN -D_GNU_SOURCE ${EXTRA_CFLAGS:-}"

if [ ! -f "$BUILD/libtally.so" ]; then
	echo "tests/gpu/build.sh: $BUILD/libtally.so is missing; run make first" >&2
	exit 1
fi
mkdir -p "$BUILD/tests/fake_cuda" "$BUILD/tests/gpu"

# Every entry point must open with `push %rbp` and be a function of its own
# (one call, one uprobe hit): frame pointers, no endbr64 before them, and no
# folding of identical entry points (cuLaunchKernel and its _ptsz twin; gcc
# only: clang folds nothing at compile time).
NO_ICF=
if $CC -fno-ipa-icf -Werror -x c -c -o /dev/null /dev/null 2>/dev/null; then
	NO_ICF=-fno-ipa-icf
fi
$CC $CFLAGS -shared -fPIC -pthread -fvisibility=hidden -fno-omit-frame-pointer \
	-fcf-protection=none $NO_ICF -Wl,-soname,libcuda.so.1 \
	-o "$BUILD/tests/fake_cuda/libcuda.so.1" tests/fake_cuda/libcuda.c

$CC $CFLAGS -pthread -o "$BUILD/tests/gpu/gpu_workload" tests/gpu/workload.c \
	-L"$BUILD/tests/fake_cuda" -l:libcuda.so.1 -Wl,-rpath,'$ORIGIN/../fake_cuda' \
	-L"$BUILD" -l:libtally.so -Wl,-rpath,'$ORIGIN/../..'

$CC $CFLAGS -o "$BUILD/tests/gpu/image_workload" tests/gpu/image_workload.c \
	tests/image_fixtures.c -L"$BUILD/tests/fake_cuda" -l:libcuda.so.1 \
	-Wl,-rpath,'$ORIGIN/../fake_cuda' -L"$BUILD" -l:libtally.so -Wl,-rpath,'$ORIGIN/../..'

$CC $CFLAGS -o "$BUILD/tests/gpu/dlopen_workload" tests/gpu/dlopen_workload.c -ldl

# The driver's management library beside it (device_memory_used).
$CC $CFLAGS -shared -fPIC -fvisibility=hidden -Wl,-soname,libnvidia-ml.so.1 \
	-o "$BUILD/tests/fake_cuda/libnvidia-ml.so.1" tests/fake_cuda/nvml.c

# A plugin that loads the driver for its program, and the workload again
# with nothing to find the driver by but LD_LIBRARY_PATH (no rpath to it).
$CC $CFLAGS -shared -fPIC -fvisibility=hidden -o "$BUILD/tests/gpu/libgpu_plugin.so" \
	tests/gpu/gpu_plugin.c -ldl
$CC $CFLAGS -pthread -o "$BUILD/tests/gpu/gpu_ldpath" tests/gpu/workload.c \
	-L"$BUILD/tests/fake_cuda" -l:libcuda.so.1 \
	-L"$BUILD" -l:libtally.so -Wl,-rpath,'$ORIGIN/../..'
