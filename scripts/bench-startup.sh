#!/usr/bin/env bash
# What tally costs a short command (issue 17): `tally snapshot -- CMD`
# against CMD alone, in interleaved rounds, for /bin/true, a C program that
# does nothing but read the clock at main() (a /bin/true that says when it
# started), and python3 -c with one statement that reads it. Medians of
# the whole run's wall time and of the time from the launch (before tally's
# exec) to the target's first instruction (its main, or python's first
# statement), then tally's own phases (TALLY_TIMING=1: BTF, each BPF
# object's load, the attaches, the target's exec, the drain, the links let
# go) for the /bin/true runs.
# Usage: scripts/bench-startup.sh   (root, after make; BENCH_RUNS rounds, 11;
# BENCH_TALLY, the tally binary: $BUILD/tally;
# BENCH_PYTHON, the interpreter: /usr/bin/python3, not a pyenv shim, which
# is a shell script)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TALLY=${BENCH_TALLY:-$PWD/$BUILD/tally} # BENCH_TALLY: another build, to compare
RUNS=${BENCH_RUNS:-11}
PYTHON=${BENCH_PYTHON:-/usr/bin/python3}
[ -x "$PYTHON" ] || PYTHON=$(command -v python3)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$(id -u)" -ne 0 ]; then
	echo "bench-startup: needs root" >&2
	exit 1
fi
[ -x "$TALLY" ] || { echo "bench-startup: no $TALLY (make first)" >&2; exit 1; }
# launch OUT CMD...: CLOCK_MONOTONIC before CMD's fork and after its wait, in ns
cat >"$tmp/launch.c" <<'C'
#include <stdio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static long long now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}
int main(int argc, char **argv)
{
	long long a = now(), b;
	int st = 0;
	pid_t p;
	if (argc < 3)
		return 2;
	p = fork();
	if (p == 0) {
		execvp(argv[2], argv + 2);
		_exit(127);
	}
	if (p < 0 || waitpid(p, &st, 0) != p)
		return 1;
	b = now();
	FILE *f = fopen(argv[1], "w");
	if (!f)
		return 1;
	fprintf(f, "%lld %lld\n", a, b);
	fclose(f);
	return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}
C
# the target: CLOCK_MONOTONIC at main() into $BENCH_FIRST
cat >"$tmp/first.c" <<'C'
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
int main(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	const char *out = getenv("BENCH_FIRST");
	FILE *f = out ? fopen(out, "w") : NULL;
	if (f) {
		fprintf(f, "%lld\n", t.tv_sec * 1000000000LL + t.tv_nsec);
		fclose(f);
	}
	return 0;
}
C
cc -O2 -o "$tmp/launch" "$tmp/launch.c" && cc -O2 -o "$tmp/first" "$tmp/first.c" || exit 1
PY='import os, time; open(os.environ["BENCH_FIRST"], "w").write("%d\n" % time.clock_gettime_ns(time.CLOCK_MONOTONIC))'

median() { sort -n | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }

# run KEY CMD...: one run; its wall and first-instruction times (ms) appended
# to $tmp/KEY.wall and $tmp/KEY.first
run() {
	local key=$1 t0 t1 tf
	shift
	rm -f "$tmp/l" "$tmp/f"
	BENCH_FIRST=$tmp/f "$tmp/launch" "$tmp/l" "$@" >/dev/null 2>>"$tmp/$key.err" || {
		echo "bench-startup: $* failed: $(tail -n 3 "$tmp/$key.err")" >&2
		exit 1
	}
	read -r t0 t1 <"$tmp/l"
	echo "$(((t1 - t0) / 1000))" | awk '{ printf "%.1f\n", $1 / 1000 }' >>"$tmp/$key.wall"
	if [ -s "$tmp/f" ]; then
		read -r tf <"$tmp/f"
		echo "$(((tf - t0) / 1000))" | awk '{ printf "%.1f\n", $1 / 1000 }' >>"$tmp/$key.first"
	fi
}

# row NAME KEY CMD...: RUNS rounds, CMD alone then under tally, and a line of medians
row() {
	local name=$1 key=$2
	shift 2
	for _ in $(seq "$RUNS"); do
		run "$key.u" "$@"
		TALLY_TIMING=1 run "$key.t" "$TALLY" snapshot -- "$@"
	done
	printf '%-30s %9s %9s %11s %11s\n' "$name" \
		"$(median <"$tmp/$key.u.wall")" "$(median <"$tmp/$key.t.wall")" \
		"$(median 2>/dev/null <"$tmp/$key.u.first" || echo -)" \
		"$(median 2>/dev/null <"$tmp/$key.t.first" || echo -)"
}

echo "tally snapshot -- CMD against CMD alone: medians of $RUNS interleaved rounds, in ms"
echo "(first: from the launch to the target's main, or python's first statement)"
printf '%-30s %9s %9s %11s %11s\n' "CMD" "wall" "traced" "first" "traced"
row "/bin/true" true /bin/true
row "C program, clock at main" first "$tmp/first"
row "python3 -c (one statement)" py "$PYTHON" -c "$PY"

# tally's phases, from its TALLY_TIMING lines: "NAME  X ms  (FROM .. TO)"
echo
echo "tally's phases, tally snapshot -- /bin/true (median ms; median end, ms from tally's start):"
sed -nE 's/^tally: timing: (.*[^ ]) +([0-9.]+) ms( +\(([0-9.]+) \.\. ([0-9.]+)\))?$/\1\t\2\t\5/p' \
	"$tmp/true.t.err" >"$tmp/phases"
[ -s "$tmp/phases" ] || echo "  (none: this tally has no TALLY_TIMING, a build from before issue 17)"
cut -f1 "$tmp/phases" | awk '!seen[$0]++' | while IFS= read -r name; do
	ms=$(awk -F'\t' -v n="$name" '$1 == n { print $2 }' "$tmp/phases" | median)
	end=$(awk -F'\t' -v n="$name" '$1 == n && $3 != "" { print $3 }' "$tmp/phases" | median)
	printf '  %-42s %8s %8s\n' "$name" "$ms" "$end"
done
