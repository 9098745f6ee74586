#!/usr/bin/env bash
# Build build/libtally_cupti.so (the CUPTI injection library, cupti/) and its
# unit test build/tests/cupti/test_cupti, into BUILD (the first argument, else
# $BUILD, else build/). Without a CUDA toolkit (no cupti.h) it says so and
# succeeds. With nvcc, the test's image fixtures (PTX, cubin, fatbin of
# fixture_kernel.cu) are built too; without it those tests skip.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${1:-${BUILD:-build}}
CUDA=${CUDA:-/usr/local/cuda}
CC=${CC:-cc}

if [ ! -f "$CUDA/include/cupti.h" ]; then
	echo "cupti: no CUDA toolkit at $CUDA: skipped"
	exit 0
fi

# CUPTI's headers sit beside the toolkit's or, in older toolkits, apart.
inc=(-isystem "$CUDA/include")
[ -d "$CUDA/extras/CUPTI/include" ] && inc+=(-isystem "$CUDA/extras/CUPTI/include")
meta=
for d in "$CUDA/include" "$CUDA/extras/CUPTI/include"; do
	[ -f "$d/generated_cuda_meta.h" ] && meta=$d/generated_cuda_meta.h && break
done
if [ -z "$meta" ]; then
	echo "cupti: CUDA toolkit at $CUDA has no generated_cuda_meta.h: skipped"
	exit 0
fi
libdir=
for d in "$CUDA/lib64" "$CUDA/extras/CUPTI/lib64"; do
	[ -e "$d/libcupti.so" ] && libdir=$d && break
done
if [ -z "$libdir" ]; then
	echo "cupti: CUDA toolkit at $CUDA has no libcupti.so: skipped"
	exit 0
fi

WARN=(-Wall -Wextra -Werror -Wshadow -Wstrict-prototypes -Wmissing-prototypes -Wformat=2)
CFLAGS=(-std=gnu11 -O2 -g "${WARN[@]}" -D_GNU_SOURCE -fPIC -fvisibility=hidden "${inc[@]}")
SAN=(-fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
PURE=(cupti/image_size.c cupti/handle_map.c cupti/kernel_names.c cupti/gpu_records.c
	cupti/dispatch.c)

cc_obj() { # OUT SRC FLAGS...
	local out=$1 src=$2
	shift 2
	mkdir -p "$(dirname "$out")"
	echo "  CC $out"
	"$CC" "$@" -c "$src" -o "$out"
}

# The library: only InitializeInjection exported; libcupti, never libcuda.
objs=()
for src in "${PURE[@]}" cupti/injection.c alloc/common/probe_guard.c; do
	obj=$BUILD/cupti/$(basename "${src%.c}").o
	cc_obj "$obj" "$src" "${CFLAGS[@]}"
	objs+=("$obj")
done
lib=$BUILD/libtally_cupti.so
echo "  LD $lib"
"$CC" -shared -pthread -Wl,-z,now -Wl,-z,defs -o "$lib" "${objs[@]}" \
	-L"$libdir" -lcupti -Wl,-rpath,"$libdir" -ldl

# (the linker lists the hidden __start_/__stop_ bounds of the probe-site
# sections in .dynsym too; hidden, they are not exported)
exported=$(readelf -W --dyn-syms "$lib" | awk '$7 != "UND" && $5 != "LOCAL" && $6 == "DEFAULT" { print $8 }' |
	sort | tr '\n' ' ')
if [ "$exported" != "InitializeInjection " ]; then
	echo "cupti: $lib exports more than InitializeInjection: $exported" >&2
	exit 1
fi
if ! readelf -n "$lib" | grep -A2 stapsdt | grep -q 'Provider: tally' ||
	! readelf -n "$lib" | grep -q 'Name: batch'; then
	echo "cupti: $lib has no USDT probe tally:batch" >&2
	exit 1
fi

# The image fixtures, rebuilt when the kernel source is newer.
mkdir -p "$BUILD/tests/cupti/fixtures"
fix=$(cd "$BUILD/tests/cupti/fixtures" && pwd) # absolute: the test runs from anywhere
fixdef=()
if [ -x "$CUDA/bin/nvcc" ]; then
	ok=1
	for kind in ptx cubin fatbin; do
		out=$fix/k.$kind
		if [ ! -s "$out" ] || [ tests/cupti/fixture_kernel.cu -nt "$out" ]; then
			echo "  NVCC $out"
			"$CUDA/bin/nvcc" "-$kind" -arch=sm_90 tests/cupti/fixture_kernel.cu \
				-o "$out" || { ok=0; rm -f "$out"; }
		fi
	done
	if [ $ok -eq 1 ]; then
		fixdef=(-DTALLY_CUPTI_FIXTURES="\"$fix\"")
	else
		echo "cupti: nvcc failed: the image fixture tests will skip" >&2
	fi
else
	echo "cupti: no nvcc at $CUDA/bin: the image fixture tests will skip"
fi

# The unit test: the pure parts under the sanitizers, no CUPTI runtime.
tobjs=()
for src in "${PURE[@]}"; do
	obj=$BUILD/tests/cupti/san/$(basename "${src%.c}").o
	cc_obj "$obj" "$src" "${CFLAGS[@]}" "${SAN[@]}"
	tobjs+=("$obj")
done
obj=$BUILD/tests/cupti/san/test_cupti.o
cc_obj "$obj" tests/cupti/test_cupti.c "${CFLAGS[@]}" "${SAN[@]}" "${fixdef[@]}"
tobjs+=("$obj")
test_bin=$BUILD/tests/cupti/test_cupti
echo "  LD $test_bin"
# -rdynamic: the test's own tally_group_current binds the weak reference
"$CC" "${SAN[@]}" -pthread -rdynamic -o "$test_bin" "${tobjs[@]}" \
	$(pkg-config --libs cmocka 2>/dev/null || echo -lcmocka) -ldl
# ... and the group lookup in a process without any tally_group_current
echo "  LD $BUILD/tests/cupti/test_nosdk"
"$CC" "${CFLAGS[@]}" "${SAN[@]}" -pthread -o "$BUILD/tests/cupti/test_nosdk" \
	tests/cupti/test_nosdk.c "$BUILD/tests/cupti/san/gpu_records.o" -ldl

# A fake CUPTI under the real one's soname and version node, for the GPU
# tests with the fake driver (tests/gpu/run.sh): build/tests/fake_cupti/.
soname=$(readelf -d "$libdir/libcupti.so" | sed -nE 's/.*Library soname: \[(.*)\].*/\1/p')
if [ -n "$soname" ]; then
	mkdir -p "$BUILD/tests/fake_cupti"
	printf '%s {\n\tglobal: cuptiSubscribe_v2; cuptiEnableCallback; cuptiGetResultString;\n\tlocal: *;\n};\n' \
		"$soname" >"$BUILD/tests/fake_cupti/version.map"
	echo "  LD $BUILD/tests/fake_cupti/$soname"
	"$CC" "${CFLAGS[@]}" -shared -Wl,-soname,"$soname" \
		-Wl,--version-script="$BUILD/tests/fake_cupti/version.map" \
		-o "$BUILD/tests/fake_cupti/$soname" tests/cupti/fake_cupti.c -ldl
fi
