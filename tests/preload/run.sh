#!/usr/bin/env bash
# Integration test for a drop-in malloc: run real programs once plain and once
# with the allocator preloaded, and require the same stdout and exit status.
#
# usage: tests/preload/run.sh [LIB]
#   LIB  the allocator to preload (default: build/libtally_alloc.so)
#
# EXAMPLES
#   tests/preload/run.sh
#   tests/preload/run.sh /usr/lib/x86_64-linux-gnu/libjemalloc.so.2
#   PRELOAD_TIMEOUT=300 tests/preload/run.sh build/libtally_alloc.so
#
# Cases:
#   preload-active  LIB is mapped and malloc & co. resolve to it (so a LIB that
#                   ld.so silently skipped cannot pass the other cases)
#   python          tests/preload/alloc_heavy.py, with PYTHONMALLOC=malloc
#   sort            GNU sort of a generated 64 MiB file, in memory
#   sort-tmpfiles   the same with -S 20M --parallel=2 (temporary files, threads)
#   containers      tests/preload/containers.cpp, built here with g++
#   family          tests/preload/family.c: the malloc family on edge and invalid
#                   arguments (memalign(3, 64) and the like), line for line as glibc
#   no-arena        python as above under a 2 GiB address-space limit, which
#                   refuses the allocator its 64 GiB arena (a second process
#                   prints how many reservations of that size it holds, 0 in
#                   both runs)
#   small-arena     the same limit: the preloaded process reserves a smaller
#                   arena instead (256 MiB to 16 GiB), which the free fast
#                   path needs (without it every free took the slow path)
#
# Prints "PASS name" or "FAIL name (reason)" plus an indented excerpt per case,
# then one line "N passed, M failed". Exit status: 0 if all passed, 1 if any
# failed, 2 if LIB does not exist or its path holds a space or colon.
# Work files go to build/tests/preload-*; a failing case keeps its outputs
# there. Run one at a time: two runs would share those files.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$root/build/tests
timeout_s=${PRELOAD_TIMEOUT:-120} # per program run: a hang fails, not blocks

lib_arg=${1:-$root/build/libtally_alloc.so}
if [ ! -f "$lib_arg" ]; then
	echo "preload: allocator '$lib_arg' does not exist; build it first or pass its path:" >&2
	echo "preload:   $0 LIB" >&2
	exit 2
fi
# The kernel names mappings by resolved path, and the cases run in other
# directories: use the absolute, symlink-free path everywhere.
lib=$(realpath "$lib_arg")
case $lib in
*[[:space:]:]*)
	# LD_PRELOAD splits its value on spaces and colons.
	echo "preload: '$lib' contains a space or colon, which LD_PRELOAD cannot carry" >&2
	exit 2
	;;
esac

mkdir -p "$work"
export LC_ALL=C
passed=0
failed=0

# The interpreter itself, not a wrapper in front of it (pyenv shims are
# shell scripts), so the preloaded process is Python.
python=$(python3 -c 'import sys; print(sys.executable)' 2>/dev/null || true)

pass()
{
	echo "PASS $1"
	passed=$((passed + 1))
}

# fail NAME REASON [EXCERPT_FILE]
fail()
{
	echo "FAIL $1 ($2)"
	if [ -n "${3:-}" ] && [ -s "$3" ]; then
		head -n 20 "$3" | sed 's/^/    /'
	fi
	failed=$((failed + 1))
}

# Say what an exit status means: timeout(1) exits 124 when it stopped the
# program and 137 when it had to SIGKILL it; 128+N is death by signal N.
describe_rc()
{
	case $1 in
	0) echo "exit 0" ;;
	124) echo "timed out after ${timeout_s}s" ;;
	137) echo "killed by SIGKILL (timed out after ${timeout_s}s and ignored SIGTERM, or OOM)" ;;
	*)
		if [ "$1" -gt 128 ]; then
			echo "killed by SIG$(kill -l $(($1 - 128)) 2>/dev/null || echo $(($1 - 128)))"
		else
			echo "exit $1"
		fi
		;;
	esac
}

# run_one plain|preload BASE [VAR=VALUE...] CMD...: run CMD with stdout to
# BASE.out and stderr to BASE.err, print its exit status. Only CMD gets
# LD_PRELOAD (env sets it after timeout has started), and the plain run is
# cleared of any LD_PRELOAD the caller had.
run_one()
{
	local mode=$1 base=$2 rc=0
	shift 2
	if [ "$mode" = preload ]; then
		timeout -k 5 "$timeout_s" env LD_PRELOAD="$lib" "$@" >"$base.out" 2>"$base.err" ||
			rc=$?
	else
		timeout -k 5 "$timeout_s" env -u LD_PRELOAD "$@" >"$base.out" 2>"$base.err" || rc=$?
	fi
	echo "$rc"
}

# excerpt_diff A B: print the start of the difference between two outputs.
# Large outputs (sort's) are not diffed, only located by cmp.
excerpt_diff()
{
	local a=$1 b=$2
	if [ "$(stat -c %s "$a")" -le 1048576 ] && [ "$(stat -c %s "$b")" -le 1048576 ]; then
		diff -u --label plain --label preload "$a" "$b" | head -n 12 || true
	else
		cmp "$a" "$b" 2>&1 || true
		echo "sizes: plain $(stat -c %s "$a"), preload $(stat -c %s "$b") bytes"
	fi
}

# run_pair NAME [VAR=VALUE...] CMD...: the case proper. Runs CMD plain, then
# preloaded, and passes when the plain run succeeds and the preloaded run
# matches it.
run_pair()
{
	local name=$1
	shift
	local p=$work/preload-$name.plain q=$work/preload-$name.preload
	local rc_p rc_q
	rm -f "$p".* "$q".*
	rc_p=$(run_one plain "$p" "$@")
	if [ "$rc_p" -ne 0 ]; then
		# The test program itself is broken (or the machine is): not the
		# allocator's fault, but not a pass either.
		fail "$name" "plain run failed: $(describe_rc "$rc_p"); outputs in $p.*" "$p.err"
		return
	fi
	rc_q=$(run_one preload "$q" "$@")

	if grep -q 'cannot be preloaded' "$q.err"; then
		fail "$name" "ld.so did not preload LIB" "$q.err"
	elif [ "$rc_q" -ne 0 ]; then
		{
			echo "stderr (last lines):"
			tail -n 8 "$q.err"
			if ! cmp -s "$p.out" "$q.out"; then
				echo "stdout:"
				excerpt_diff "$p.out" "$q.out"
			fi
		} >"$q.excerpt"
		fail "$name" "preloaded run failed: $(describe_rc "$rc_q"), plain exit 0; outputs in $q.*" \
			"$q.excerpt"
	elif ! cmp -s "$p.out" "$q.out"; then
		excerpt_diff "$p.out" "$q.out" >"$q.excerpt"
		fail "$name" "stdout differs from the plain run; outputs in $q.*" "$q.excerpt"
	else
		pass "$name"
		rm -f "$p.out" "$p.err" "$q.out" "$q.err" "$q.excerpt"
	fi
}

# preload-active: without this, a LIB that ld.so refuses (wrong ELF class,
# missing dependency) only earns a warning on stderr and every other case
# passes against glibc's malloc. The probe lists where the malloc API
# resolves in the global scope, which is what every program linking to libc
# calls. The set is the one the glibc manual asks a replacement malloc to
# provide (pvalloc aside, which is obsolete and which jemalloc lacks).
case_preload_active()
{
	local name=preload-active
	local base=$work/preload-$name
	local probe='
import ctypes, sys
lib = sys.argv[1]
spans = []
for line in open("/proc/self/maps"):
    f = line.split(None, 5)
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    spans.append((lo, hi, f[5].strip() if len(f) > 5 else ""))
print("mapped" if any(path == lib for _, _, path in spans) else "not mapped")
libc = ctypes.CDLL(None)
for sym in ("malloc", "free", "calloc", "realloc", "posix_memalign",
            "aligned_alloc", "memalign", "valloc", "malloc_usable_size"):
    addr = ctypes.cast(getattr(libc, sym), ctypes.c_void_p).value
    owner = [path for lo, hi, path in spans if lo <= addr < hi]
    print(sym, "LIB" if owner == [lib] else (owner[0] if owner else "?"))
'
	if [ -z "$python" ]; then
		fail "$name" "python3 not found"
		return
	fi
	local rc_p rc_q
	rm -f "$base".plain.* "$base".preload.*
	rc_p=$(run_one plain "$base.plain" "$python" -c "$probe" "$lib")
	rc_q=$(run_one preload "$base.preload" "$python" -c "$probe" "$lib")
	local foreign
	foreign=$(awk 'NR > 1 && $2 != "LIB" { printf "%s%s", sep, $1; sep = " " }' \
		"$base.preload.out")
	if [ "$rc_p" -ne 0 ] || [ "$rc_q" -ne 0 ]; then
		fail "$name" "probe failed: plain $(describe_rc "$rc_p"), preloaded $(describe_rc "$rc_q")" \
			"$base.preload.err"
	elif [ "$(head -n 1 "$base.plain.out")" != "not mapped" ]; then
		fail "$name" "LIB is mapped even without LD_PRELOAD; is it in /etc/ld.so.preload?" \
			"$base.plain.out"
	elif [ "$(head -n 1 "$base.preload.out")" != "mapped" ]; then
		fail "$name" "LD_PRELOAD=$lib did not map it into the process" "$base.preload.err"
	elif [ -n "$foreign" ]; then
		fail "$name" "LIB is mapped but these resolve elsewhere: $foreign" "$base.preload.out"
	else
		pass "$name"
		rm -f "$base".plain.* "$base".preload.*
	fi
}

case_python()
{
	if [ -z "$python" ]; then
		fail python "python3 not found"
		return
	fi
	# PYTHONMALLOC=malloc sends every object to malloc (pymalloc would
	# serve the small ones from its own mmap'ed arenas); the fixed hash
	# seed is belt and braces, the script does not depend on it.
	run_pair python PYTHONMALLOC=malloc PYTHONHASHSEED=0 "$python" "$here/alloc_heavy.py"
}

# A 64 MiB file of random lines (mean 64 bytes), made once by a fixed-seed
# generator and kept in build/tests/ for later runs.
sort_input=$work/preload-sort-input-64M.txt
sort_input_size=$((64 << 20))

make_sort_input()
{
	if [ -f "$sort_input" ] && [ "$(stat -c %s "$sort_input")" -eq "$sort_input_size" ]; then
		return 0
	fi
	[ -n "$python" ] || return 1
	# A private temporary name, in case two runs generate at once.
	"$python" - "$sort_input.tmp$$" <<-'EOF' || return 1
		import random, sys
		r = random.Random(20240601)
		alpha = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 ,"
		# 4 of the 256 byte values become newlines: lines of 64 bytes on
		# average, geometrically spread, some empty, some several hundred.
		table = bytes(10 if i < 4 else alpha[i % len(alpha)] for i in range(256))
		with open(sys.argv[1], "wb") as f:
		    for _ in range(64):
		        f.write(r.randbytes(1 << 20).translate(table))
	EOF
	mv "$sort_input.tmp$$" "$sort_input"
}

case_sort()
{
	if ! make_sort_input; then
		fail sort "could not generate $sort_input"
		fail sort-tmpfiles "could not generate $sort_input"
		return
	fi
	run_pair sort sort "$sort_input"
	# 20 MiB of buffer for 64 MiB of input: sort spills sorted runs to
	# temporary files and merges them, with two sorting threads.
	mkdir -p "$work/preload-sort-tmp"
	run_pair sort-tmpfiles sort --parallel=2 -S 20M -T "$work/preload-sort-tmp" "$sort_input"
	rm -rf "$work/preload-sort-tmp"
}

case_containers()
{
	local src=$here/containers.cpp bin=$work/preload-containers
	# Rebuilt only when the source is newer: the build takes longer than
	# a run of the program.
	if [ ! -x "$bin" ] || [ "$src" -nt "$bin" ]; then
		if ! g++ -O2 -std=c++17 -pthread -Wall -Wextra -o "$bin.tmp$$" "$src" \
			>"$work/preload-containers.build.log" 2>&1; then
			fail containers "g++ failed to build containers.cpp" "$work/preload-containers.build.log"
			rm -f "$bin.tmp$$"
			return
		fi
		mv "$bin.tmp$$" "$bin"
		rm -f "$work/preload-containers.build.log"
	fi
	run_pair containers "$bin"
}

# The malloc family on edge and invalid arguments, line by line as glibc.
case_family()
{
	local bin=$work/preload-family
	if ! cc -O1 -fno-builtin -Wall -Wextra -Wno-alloc-size-larger-than -o "$bin" \
		"$here/family.c" >"$work/preload-family.build.log" 2>&1; then
		fail family "cc failed to build family.c" "$work/preload-family.build.log"
		return
	fi
	rm -f "$work/preload-family.build.log"
	run_pair family "$bin"
}

case_no_arena()
{
	if [ -z "$python" ]; then
		fail no-arena "python3 not found"
		return
	fi
	local maps_probe='
n = 0
for line in open("/proc/self/maps"):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    n += f[1] == "---p" and hi - lo >= 32 << 30
print("arena-sized reservations:", n)
'
	# shellcheck disable=SC2016 # expanded by the inner shell
	run_pair no-arena PYTHONMALLOC=malloc PYTHONHASHSEED=0 prlimit --as=$((2 << 30)) \
		sh -c '"$0" "$1" && "$0" -c "$2"' "$python" "$here/alloc_heavy.py" "$maps_probe"
}

# small-arena: not a pair (a plain run holds no such reservation).
case_small_arena()
{
	local out=$work/preload-small-arena.out rc=0
	local probe='
n = 0
for line in open("/proc/self/maps"):
    f = line.split()
    lo, hi = (int(x, 16) for x in f[0].split("-"))
    n += f[1] == "---p" and (256 << 20) <= hi - lo <= (16 << 30)
print(n)
'
	if [ -z "$python" ]; then
		fail small-arena "python3 not found"
		return
	fi
	timeout -k 5 "$timeout_s" prlimit --as=$((2 << 30)) env LD_PRELOAD="$lib" \
		"$python" -c "$probe" >"$out" 2>&1 || rc=$?
	if [ "$rc" -ne 0 ]; then
		fail small-arena "preloaded run failed: $(describe_rc "$rc")" "$out"
	elif [ "$(cat "$out")" != 1 ]; then
		fail small-arena "expected one reservation of 256 MiB..16 GiB under a 2 GiB limit, found: $(head -c 80 "$out")"
	else
		pass small-arena
		rm -f "$out"
	fi
}

case_preload_active
case_python
case_sort
case_containers
case_family
case_no_arena
case_small_arena

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
