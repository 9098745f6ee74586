#!/usr/bin/env bash
# What glibc mode costs (a target without libtally_alloc: a uprobe on every
# call of libc's malloc family, and a uretprobe but on free; README
# "Limits"): bench/glibc_calls times each function alone, untraced and under
# `tally snapshot --no-preload --`, in interleaved rounds; the medians, and
# their difference, the probes' cost per call. Then a python3 workload (json
# and sqlite3, about 1 s untraced) the same way, and its slowdown.
# TALLY=PATH measures another build of tally (one from before a change).
# Usage: scripts/bench-glibc.sh   (root, after make; BENCH_RUNS rounds, 3;
#        BENCH_CALLS calls per function, 20000; BENCH_PY_ROUNDS, 200)
set -u
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
CALLS=$PWD/$BUILD/glibc_calls
RUNS=${BENCH_RUNS:-3}
N=${BENCH_CALLS:-20000}
PY_ROUNDS=${BENCH_PY_ROUNDS:-200}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ "$(id -u)" -ne 0 ]; then
	echo "bench-glibc: needs root" >&2
	exit 1
fi
if [ ! -x "$CALLS" ] || [ ! -x "$TALLY" ]; then
	echo "bench-glibc: $CALLS or $TALLY missing: make first" >&2
	exit 1
fi
# the interpreter itself: a pyenv shim is a shell script that execs it
PY=$(python3 -c 'import sys; print(sys.executable)') || exit 1
cat >"$tmp/json_sqlite.py" <<'PY'
import json, sqlite3, sys, time
rounds = int(sys.argv[1])
t = time.perf_counter()
db = sqlite3.connect(":memory:")
db.execute("create table t (id integer primary key, doc text)")
for r in range(rounds):
    docs = [json.dumps({"id": i, "name": "item%d" % i, "tags": ["a", "b", "c"], "v": [i * 0.5] * 8})
            for i in range(r * 500, r * 500 + 500)]
    db.executemany("insert into t (doc) values (?)", ((d,) for d in docs))
    db.commit()
    for (d,) in db.execute("select doc from t where id > ?", (r * 500,)):
        json.loads(d)
print("%.3f" % (time.perf_counter() - t), file=sys.stderr)
PY

traced() { # CMD...: under tally in glibc mode; its stdout on ours, the snapshot checked
	"$TALLY" snapshot --no-preload -o "$tmp/snap.json" -- "$@" || return 1
	if ! jq -e '.target.allocator == "glibc" and .target.exit_code == 0' "$tmp/snap.json" \
		>/dev/null; then
		echo "bench-glibc: not traced in glibc mode, or the target failed" >&2
		return 1
	fi
}

median() { sort -n | awk '{ a[NR] = $1 } END { print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

for r in $(seq "$RUNS"); do
	"$CALLS" "$N" >"$tmp/u.$r" || exit 1
	traced "$CALLS" "$N" >"$tmp/t.$r" || exit 1
done
printf '%-20s %14s %14s %16s\n' "function" "untraced ns" "traced ns" "probes us/call"
for f in $(awk '{ print $1 }' "$tmp/u.1"); do
	u=$(cat "$tmp"/u.* | awk -v f="$f" '$1 == f { print $2 }' | median)
	t=$(cat "$tmp"/t.* | awk -v f="$f" '$1 == f { print $2 }' | median)
	printf '%-20s %14.1f %14.1f %16.2f\n' "$f" "$u" "$t" "$(echo "($t - $u) / 1000" | bc -l)"
done

: >"$tmp/pu"
: >"$tmp/pt"
for _ in $(seq "$RUNS"); do
	"$PY" "$tmp/json_sqlite.py" "$PY_ROUNDS" 2>>"$tmp/pu" || exit 1
	traced "$PY" "$tmp/json_sqlite.py" "$PY_ROUNDS" 2>&1 >/dev/null |
		grep -E '^[0-9.]+$' >>"$tmp/pt"
done
if [ "$(wc -l <"$tmp/pt")" -ne "$RUNS" ]; then
	echo "bench-glibc: a traced python3 run failed" >&2
	exit 1
fi
u=$(median <"$tmp/pu")
t=$(median <"$tmp/pt")
echo
printf '%-34s %10s s %10s s %8s\n' "workload" "untraced" "tally" "ratio"
printf '%-34s %10s s %10s s %7.1fx\n' "python3 json + sqlite3" "$u" "$t" \
	"$(echo "$t / $u" | bc -l)"
