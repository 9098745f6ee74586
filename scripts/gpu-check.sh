#!/usr/bin/env bash
# The GPU check, for a machine with a real NVIDIA GPU and driver (under 5
# minutes): builds a small CUDA driver-API program with nvcc, runs it under
# `tally snapshot -- ` (CUPTI: libtally_cupti.so injected), with tally
# attached by PID before its GPU work (driver uprobes on libcuda.so.1), with
# the driver copied to a directory named only in LD_LIBRARY_PATH (CUPTI off:
# the driver probes, attached as the dynamic loader maps it), and attached by
# PID after its GPU work (instance "exact": false, NVML's device_memory_used),
# and prints expected against measured for every field. Exits non-zero on any
# mismatch, or when there is no GPU to check on.
#
# The program: N kernel launches of which F are refused (gridDimX 0), M
# device allocations of known sizes, two PTX modules loaded and unloaded,
# tally_yield() Y times; everything is released before it exits, so the
# gauges must be back at 0 and the counters exact.
#
# usage: scripts/gpu-check.sh      (root; run `make` first)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
CUDA=${CUDA:-/usr/local/cuda}
NVCC=$CUDA/bin/nvcc
N=40 F=7 M=6 Y=5

die() {
	echo "gpu-check: $*" >&2
	exit 2
}
[ "$(id -u)" -eq 0 ] || die "needs root (tally attaches eBPF programs)"
[ -x "$NVCC" ] || die "no nvcc at $NVCC"
command -v nvidia-smi >/dev/null && nvidia-smi -L >/dev/null 2>&1 || die "no NVIDIA GPU here (nvidia-smi -L)"
[ -x "$BUILD/tally" ] && [ -f "$BUILD/libtally.so" ] || die "build first: make"
[ -f "$BUILD/libtally_cupti.so" ] || die "$BUILD/libtally_cupti.so is missing: no CUPTI build"

tmp=$(mktemp -d)
trap 'kill -9 $(jobs -p) 2>/dev/null; rm -rf "$tmp"' EXIT

cat >"$tmp/k.cu" <<'EOF'
extern "C" __global__ void scale(float *x, float a, int n)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i < n)
		x[i] *= a;
}
EOF
cat >"$tmp/check.c" <<'EOF'
#include <cuda.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "tally.h"

static volatile sig_atomic_t go;
static void on_usr1(int sig) { (void)sig; go = 1; }

static char *slurp(const char *path)
{
	FILE *f = fopen(path, "rb");
	if (!f) exit(3);
	fseek(f, 0, SEEK_END);
	long n = ftell(f);
	rewind(f);
	char *s = calloc(1, (size_t)n + 1);
	if (fread(s, 1, (size_t)n, f) != (size_t)n) exit(3);
	fclose(f);
	return s;
}

#define CK(x) do { CUresult r_ = (x); if (r_) { fprintf(stderr, "%s: %d\n", #x, r_); exit(4); } } while (0)

int main(int argc, char **argv)
{
	int n = atoi(argv[2]), f = atoi(argv[3]), m = atoi(argv[4]), y = atoi(argv[5]);
	char *ptx = slurp(argv[6]);
	CUdevice dev;
	CUcontext ctx;
	CUmodule mod, keep;
	CUfunction fn;
	CUdeviceptr d[64];
	unsigned long long live = 0;
	unsigned failed = 0, ok = 0;

	int after = !strcmp(argv[1], "after");
	if (!strcmp(argv[1], "late")) {
		signal(SIGUSR1, on_usr1);
		fopen(argv[7], "w");
		while (!go)
			pause();
	}
	CK(cuInit(0));
	CK(cuDeviceGet(&dev, 0));
	CK(cuDevicePrimaryCtxRetain(&ctx, dev));
	CK(cuCtxSetCurrent(ctx));
	CK(cuModuleLoadData(&mod, ptx));
	CK(cuModuleLoadData(&keep, ptx));
	CK(cuModuleGetFunction(&fn, mod, "scale"));
	CK(cuMemAlloc(&d[0], 4096 * sizeof(float)));
	float a = 2.0f;
	int len = 4096;
	void *args[] = { &d[0], &a, &len };
	for (int i = 0; i < n; i++) {
		unsigned gx = i < f ? 0 : 16; /* gridDimX 0: refused */
		if (cuLaunchKernel(fn, gx, 1, 1, 256, 1, 1, 0, NULL, args, NULL))
			failed++;
		else
			ok++;
	}
	CK(cuCtxSynchronize());
	for (int i = 1; i <= m; i++) {
		CK(cuMemAlloc(&d[i], (size_t)i * 1048576 + 512));
		live += (unsigned long long)i * 1048576 + 512;
	}
	for (int i = 1; i <= m; i += 2) {
		CK(cuMemFree(d[i]));
		live -= (unsigned long long)i * 1048576 + 512;
	}
	CK(cuMemFree(d[0]));
	CK(cuModuleUnload(mod));
	for (int i = 0; i < y; i++)
		tally_yield();
	/* the figures while blocks and a module are live, then all released:
	 * the snapshot at exit must show the gauges back at 0 */
	fprintf(stderr, "live: %llu device bytes, %zu image bytes\n", live, strlen(ptx));
	if (after) { /* a tracer attaches now, after the GPU work */
		printf("{\"live\": %llu}\n", live);
		fflush(stdout);
		signal(SIGUSR1, on_usr1);
		fopen(argv[7], "w");
		while (!go)
			pause();
	}
	for (int i = 2; i <= m; i += 2)
		CK(cuMemFree(d[i]));
	CK(cuModuleUnload(keep));
	printf("{\"kernels_launched\": %u, \"failed_launches\": %u, \"back_pressure_rejections\": %u, "
	       "\"device_bytes_allocated\": 0, \"bytes_pinned\": 0, \"yield_count\": %d}\n",
	       ok, failed, failed, y);
	fflush(stdout);
	return 0;
}
EOF
echo "gpu-check: building the program with $NVCC"
"$NVCC" -ptx -arch=native "$tmp/k.cu" -o "$tmp/k.ptx" 2>"$tmp/nvcc.log" ||
	"$NVCC" -ptx "$tmp/k.cu" -o "$tmp/k.ptx" 2>>"$tmp/nvcc.log" || die "nvcc -ptx failed: $(tail -3 "$tmp/nvcc.log")"
"$NVCC" -o "$tmp/check" "$tmp/check.c" -Ialloc -L"$BUILD" -l:libtally.so -lcuda \
	-Xlinker -rpath -Xlinker "$PWD/$BUILD" 2>>"$tmp/nvcc.log" || die "nvcc failed: $(tail -3 "$tmp/nvcc.log")"

fields=(kernels_launched failed_launches back_pressure_rejections device_bytes_allocated bytes_pinned yield_count)
bad=0
compare() { # MODE WANT-CUDA EXPECTED-JSON SNAPSHOT
	local mode=$1 cuda=$2 want=$3 snap=$4 got
	got=$(jq -r '.target.cuda' "$snap" 2>/dev/null)
	printf '| %-7s | %-26s | %14s | %14s | %s |\n' "$mode" "source" "$cuda" "$got" \
		"$([ "$got" = "$cuda" ] && echo ok || echo MISMATCH)"
	[ "$got" = "$cuda" ] || bad=$((bad + 1))
	for f in "${fields[@]}"; do
		local e m
		e=$(jq -r ".$f" <<<"$want")
		m=$(jq -r ".instance.$f" "$snap" 2>/dev/null)
		printf '| %-7s | %-26s | %14s | %14s | %s |\n' "$mode" "$f" "$e" "$m" \
			"$([ "$e" = "$m" ] && echo ok || echo MISMATCH)"
		[ "$e" = "$m" ] || bad=$((bad + 1))
	done
}

echo "| mode    | field                      |       expected |       measured | |"
echo "| ---     | ---                        |           ---: |           ---: | --- |"
# 1. started by tally: CUPTI
timeout 120 "$BUILD/tally" snapshot -- "$tmp/check" run $N $F $M $Y "$tmp/k.ptx" \
	>"$tmp/cupti.out" 2>"$tmp/cupti.err"
want=$(grep '^{"kernels' "$tmp/cupti.out")
sed '/^{"kernels/d' "$tmp/cupti.out" >"$tmp/cupti.json"
compare cupti cupti "$want" "$tmp/cupti.json"

# 2. attached by PID before the GPU work: driver uprobes
"$tmp/check" late $N $F $M $Y "$tmp/k.ptx" "$tmp/ready" >"$tmp/late.out" &
pid=$!
for _ in $(seq 100); do [ -e "$tmp/ready" ] && break; sleep 0.1; done
timeout 120 "$BUILD/tally" snapshot -v -p "$pid" >"$tmp/driver.json" 2>"$tmp/driver.err" &
tpid=$!
for _ in $(seq 200); do grep -q '^tally: attached' "$tmp/driver.err" && break; sleep 0.05; done
kill -USR1 "$pid"
wait "$tpid"
want=$(grep '^{"kernels' "$tmp/late.out")
compare driver driver "$want" "$tmp/driver.json"

# 3. the driver from a directory named only in LD_LIBRARY_PATH (as a
# Kubernetes device plugin mounts it), CUPTI off: the driver probes
drv=$(ldd "$tmp/check" | awk '/libcuda.so/ { print $3 }')
mkdir -p "$tmp/drv"
if [ -n "$drv" ] && cp "$(readlink -f "$drv")" "$tmp/drv/libcuda.so.1"; then
	CUDA_INJECTION64_PATH= LD_LIBRARY_PATH=$tmp/drv timeout 120 "$BUILD/tally" snapshot -v -- \
		"$tmp/check" run $N $F $M $Y "$tmp/k.ptx" >"$tmp/ldp.out" 2>"$tmp/ldp.err"
	want=$(grep '^{"kernels' "$tmp/ldp.out")
	sed '/^{"kernels/d' "$tmp/ldp.out" >"$tmp/ldp.json"
	compare ldpath driver "$want" "$tmp/ldp.json"
	echo "gpu-check: tally said: $(grep -m1 'loaded the CUDA driver' "$tmp/ldp.err")"
else
	echo "gpu-check: cannot copy the driver ($drv): LD_LIBRARY_PATH check skipped"
	bad=$((bad + 1))
fi

# 4. attached by PID after the GPU work: not exact, said why; NVML's figure
"$tmp/check" after $N $F $M $Y "$tmp/k.ptx" "$tmp/ready2" >"$tmp/after.out" &
pid=$!
for _ in $(seq 300); do [ -e "$tmp/ready2" ] && break; sleep 0.1; done
timeout 120 "$BUILD/tally" snapshot -p "$pid" -d 1 >"$tmp/after.json" 2>"$tmp/after.err"
kill -USR1 "$pid"
wait "$pid"
live=$(jq -r '.live' <(grep '^{"live' "$tmp/after.out"))
exact=$(jq -r '.instance.exact' "$tmp/after.json" 2>/dev/null)
dmu=$(jq -r '.instance.device_memory_used // "absent"' "$tmp/after.json" 2>/dev/null)
printf '| %-7s | %-26s | %14s | %14s | %s |\n' after "instance.exact" false "$exact" \
	"$([ "$exact" = false ] && echo ok || echo MISMATCH)"
[ "$exact" = false ] || bad=$((bad + 1))
printf '| %-7s | %-26s | %14s | %14s | %s |\n' after "device_memory_used (NVML)" ">= $live" "$dmu" \
	"$([ "$dmu" != absent ] && [ "$dmu" -ge "$live" ] && echo ok || echo MISMATCH)"
[ "$dmu" != absent ] && [ "$dmu" -ge "$live" ] || bad=$((bad + 1))
echo "gpu-check: late attach said: $(grep -m1 'before tally attached' "$tmp/after.err")"

if [ "$bad" -ne 0 ]; then
	echo "gpu-check: $bad mismatches (tally's stderr: $(head -c 300 "$tmp/cupti.err" "$tmp/driver.err"))"
	exit 1
fi
echo "gpu-check: all fields match"
