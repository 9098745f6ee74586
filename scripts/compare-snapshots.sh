#!/usr/bin/env bash
# Compare the snapshot documents of two builds of tally on the same
# workloads, for a change that must not change what tally prints:
#   scripts/compare-snapshots.sh OLD_BUILD_DIR [NEW_BUILD_DIR (default build)]
# e.g. git worktree add /tmp/old HEAD~1 && make -C /tmp/old all, then
#   scripts/compare-snapshots.sh /tmp/old/build
# Each build is installed in turn at the same path, so that the target's
# environment (LD_PRELOAD's path) is the same bytes. Fields that differ from
# run to run in one build are blanked: pid, ns_pid, ppid, lifetime_s,
# cpu_ns, measured_resident, events.received and .records (batch boundaries
# follow the timing of thread exits), and the heap profile's sites (the
# samples are drawn at random, and their addresses move with ASLR). Each
# build runs RUNS times (default 2, interleaved): a value that differs
# between two runs of one build follows the run's timing and is named, not
# compared; every other value must be the same in both builds (and present
# in both). Prints one line per workload, with how many values it compared
# and which varied, and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
OLD=${1:?usage: $0 OLD_BUILD_DIR [NEW_BUILD_DIR]}
NEW=${2:-build}
OLD=$(cd "$OLD" && pwd) NEW=$(cd "$NEW" && pwd)
WL=$NEW/tests/tracer_workload
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
BLANK='walk(if type == "object" then
	(if has("pid") then .pid = 0 else . end)
	| (if has("ns_pid") then .ns_pid = 0 else . end)
	| (if has("ppid") then .ppid = 0 else . end)
	| (if has("lifetime_s") then .lifetime_s = 0 else . end)
	| (if has("sites") then .sites = [] else . end)
	| (if has("cpu_ns") then .cpu_ns = 0 else . end)
	| (if has("received") then .received = 0 | .records = 0 else . end)
	| (if (.measured_resident // null) != null then .measured_resident = 0 else . end)
	else . end)'
printf 'b\na\nc\n' >"$tmp/in.txt"
export PYTHONHASHSEED=0
SQL="create table t(a); with recursive c(x) as (select 1 union all select x+1 from c"
SQL+=" limit 50000) insert into t select x from c; select count(*) from t;"
# workload i: the arguments of tally snapshot
# the interpreter itself, not a version manager's shim: a shim's shell and
# helpers are a tree of short processes whose figures follow the timing
PY=$(command -v /usr/bin/python3 || command -v python3)
NWL=8
workload() {
	case $1 in
	0) args=(-- "$PY" -c 'x=[str(i)*10 for i in range(100000)]') ;;
	1) args=(-- sqlite3 :memory: "$SQL") ;;
	2) args=(--group 'py=python*' -- "$PY" -c 'import json; json.dumps(list(range(10000)))') ;;
	3) args=(--no-preload -- "$PY" -c 'x=[str(i) for i in range(2000)]') ;;
	4) args=(-- sort "$tmp/in.txt") ;;
	5) args=(-- bash -c 'x=$(seq 100); kill -9 $$') ;;
	6) args=(-- "$WL" burst 2000) ;;
	7) args=(-- /bin/true) ;;
	esac
}
RUNS=${RUNS:-2} # runs of each build, interleaved
passed=0 failed=0
for ((i = 0; i < NWL; i++)); do
	workload "$i"
	for ((r = 0; r < RUNS; r++)); do
		for side in old new; do
			dir=$OLD
			[ $side = new ] && dir=$NEW
			rm -rf "$tmp/bin" && mkdir "$tmp/bin"
			cp "$dir/tally" "$dir/libtally_alloc.so" "$dir/libtally.so" "$tmp/bin/"
			(cd "$tmp" && timeout 120 "$tmp/bin/tally" snapshot "${args[@]}" 2>/dev/null </dev/null) |
				jq -c "$BLANK" >"$tmp/$side.$i.$r.json"
		done
	done
	# a leaf that differs between two runs of one build follows the run's
	# timing (which process was read before it exited, which transport a
	# batch took): it is named, not compared; every other leaf must be the
	# same in both builds
	if out=$(python3 - "$tmp" "$i" "$RUNS" <<'PY'
import json, sys
tmp, i, runs = sys.argv[1], sys.argv[2], int(sys.argv[3])
def flat(doc, at=""):
    if isinstance(doc, dict):
        for k, v in doc.items():
            yield from flat(v, f"{at}.{k}")
    elif isinstance(doc, list):
        for n, v in enumerate(doc):
            yield from flat(v, f"{at}[{n}]")
    else:
        yield at, doc
side = {}
for s in ("old", "new"):
    side[s] = []
    for r in range(runs):
        text = open(f"{tmp}/{s}.{i}.{r}.json").read()
        if not text.strip():
            print(f"{s} run {r}: no document"); sys.exit(1)
        side[s].append(dict(flat(json.loads(text))))
noisy = set()
for s in side.values():
    for d in s[1:]:
        keys = set(d) | set(s[0])
        noisy |= {k for k in keys if d.get(k, "<absent>") != s[0].get(k, "<absent>")}
keys = set(side["old"][0]) | set(side["new"][0])
diff = sorted(k for k in keys - noisy
              if side["old"][0].get(k, "<absent>") != side["new"][0].get(k, "<absent>"))
for k in diff[:20]:
    print(f"{k}: {side['old'][0].get(k, '<absent>')!r} -> {side['new'][0].get(k, '<absent>')!r}")
print(f"{len(keys) - len(noisy)} leaves compared, {len(noisy)} vary run to run"
      + (f" ({', '.join(sorted(noisy)[:6])}{', ...' if len(noisy) > 6 else ''})" if noisy else ""))
sys.exit(1 if diff else 0)
PY
	); then
		echo "ok - snapshot ${args[*]:0:4}: $out"
		passed=$((passed + 1))
	else
		echo "not ok - snapshot ${args[*]:0:4}"
		printf '%s\n' "$out" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
