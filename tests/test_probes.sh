#!/usr/bin/env bash
# The guest libraries' probe sites and exports, checked on the built files:
# - libtally_alloc.so has the USDT probe tally:batch with a semaphore, on a
#   5-byte nop (a 1-byte nop costs a single-step trap per hit, docs/DESIGN.md §5);
# - it has OpenTelemetry's otel_memory:alloc and otel_memory:free, on 5-byte
#   nops, whose semaphore is tally:batch's (docs/DESIGN.md §7.1);
# - libtally.so has the SDK probes, each with a semaphore and a 5-byte nop;
# - the no-probes build has no probe at all;
# - only the public symbols are exported (and libtally.so's
#   otel_thread_ctx_v1, a TLS symbol, as OTEP 4947 asks).
set -u
BUILD=${1:-build}
passed=0
failed=0
ok() { echo "PASS $1"; passed=$((passed + 1)); }
ko() { echo "FAIL $1"; failed=$((failed + 1)); }

# probe_sites LIB: "provider:name location semaphore" per probe
probe_sites() {
	readelf -n "$1" | awk '/Provider:/ {p=$2} /Name:/ {n=$2} /Location:/ {gsub(",", ""); print p ":" n, $2, $6}'
}

# nop_at LIB ADDR: the bytes of the instruction at ADDR
nop_at() {
	local a=$((16#${2#0x}))
	objdump -d --start-address=$a --stop-address=$((a + 5)) "$1" |
		awk -F'\t' '/^ *[0-9a-f]+:/ {print $2}' | head -n1 | tr -d ' '
}

check_lib() {
	local lib=$1
	shift
	local sites
	sites=$(probe_sites "$lib")
	for probe in "$@"; do
		local line
		case $probe in *:*) ;; *) probe=tally:$probe ;; esac
		line=$(grep "^$probe " <<<"$sites")
		if [ -z "$line" ]; then
			ko "$(basename "$lib"): probe $probe missing"
			continue
		fi
		read -r _ loc sem <<<"$line"
		if [ "$((16#${sem#0x}))" -eq 0 ]; then
			ko "$(basename "$lib"): $probe has no semaphore"
		elif [ "$(nop_at "$lib" "$loc")" != "0f1f440000" ]; then
			ko "$(basename "$lib"): $probe site is not a 5-byte nop ($(nop_at "$lib" "$loc"))"
		else
			ok "$(basename "$lib"): $probe on a 5-byte nop with a semaphore"
		fi
	done
}

check_lib "$BUILD/libtally_alloc.so" batch otel_memory:alloc otel_memory:free
# the otel probes' semaphore is tally:batch's: what the fast paths test
sems=$(probe_sites "$BUILD/libtally_alloc.so" | awk '$1 ~ /^(tally:batch|otel_memory:alloc|otel_memory:free)$/ { print $3 }' | sort -u)
if [ "$(wc -l <<<"$sems")" -eq 1 ] && [ "$((16#${sems#0x}))" -ne 0 ]; then
	ok "libtally_alloc.so: otel_memory:alloc and :free share tally:batch's semaphore ($sems)"
else
	ko "libtally_alloc.so: tally:batch and the otel probes' semaphores: $(tr '\n' ' ' <<<"$sems")"
fi
check_lib "$BUILD/libtally.so" group_register group_enter group_exit yield reject

if [ -z "$(probe_sites "$BUILD/libtally_alloc_noprobes.so")" ]; then
	ok "libtally_alloc_noprobes.so has no probe site"
else
	ko "libtally_alloc_noprobes.so has probe sites"
fi

want_alloc="_Exit _exit aligned_alloc calloc free free_aligned_sized free_sized malloc malloc_usable_size
mallinfo mallinfo2 malloc_info malloc_stats malloc_trim mallopt memalign posix_memalign pvalloc realloc reallocarray tally_alloc__set_group tally_alloc_collect
tally_alloc_group_stats tally_alloc_stats tally_sample_epoch tally_sample_rate
tally_stats_accounted tally_stats_balanced tally_stats_merge tally_stats_predicted_resident valloc"
# The symbols a library exports: defined, global or weak, default visibility
# (the linker keeps the hidden __start_/__stop_ bounds of the probe-site
# sections in .dynsym too; hidden, they are not exported).
exports() {
	readelf -W --dyn-syms "$1" | awk '$7 != "UND" && $5 != "LOCAL" && $6 == "DEFAULT" && $8 != "" { print $8 }' |
		sed 's/@.*//' | sort -u | tr '\n' ' '
}
got=$(exports "$BUILD/libtally_alloc.so")
if [ "$got" = "$(tr ' \n' '\n\n' <<<"$want_alloc" | grep . | sort | tr '\n' ' ')" ]; then
	ok "libtally_alloc.so exports exactly the malloc family and tally_alloc_*/tally_stats_*/tally_sample_*"
else
	ko "libtally_alloc.so exports: $got"
fi
want_sdk="otel_thread_ctx_v1 tally_group_current tally_group_enter tally_group_exit tally_group_register tally_registry tally_reject tally_yield"
got=$(exports "$BUILD/libtally.so")
if [ "$got" = "$(tr ' ' '\n' <<<"$want_sdk" | sort | tr '\n' ' ')" ]; then
	ok "libtally.so exports exactly the SDK"
else
	ko "libtally.so exports: $got"
fi

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
