#!/usr/bin/env bash
# Compare the snapshot documents of two builds of tally on the same
# workloads, for a change that must not change what tally prints:
#   scripts/compare-snapshots.sh OLD_BUILD_DIR [NEW_BUILD_DIR (default build)]
# e.g. git worktree add /tmp/old HEAD~1 && make -C /tmp/old all, then
#   scripts/compare-snapshots.sh /tmp/old/build
# Each build is installed in turn at the same path, so that the target's
# environment (LD_PRELOAD's path) is the same bytes. Fields that differ from
# run to run in one build are blanked: pid, cpu_ns, measured_resident, and
# events.received and .records (batch boundaries follow the timing of thread
# exits). Key order is kept: the documents must be the same bytes. Prints one
# line per workload and "N passed, N failed".
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
	| (if has("cpu_ns") then .cpu_ns = 0 else . end)
	| (if has("received") then .received = 0 | .records = 0 else . end)
	| (if (.measured_resident // null) != null then .measured_resident = 0 else . end)
	else . end)'
printf 'b\na\nc\n' >"$tmp/in.txt"
export PYTHONHASHSEED=0
SQL="create table t(a); with recursive c(x) as (select 1 union all select x+1 from c"
SQL+=" limit 50000) insert into t select x from c; select count(*) from t;"
# workload i: the arguments of tally snapshot
NWL=8
workload() {
	case $1 in
	0) args=(-- python3 -c 'x=[str(i)*10 for i in range(100000)]') ;;
	1) args=(-- sqlite3 :memory: "$SQL") ;;
	2) args=(--group 'py=python*' -- python3 -c 'import json; json.dumps(list(range(10000)))') ;;
	3) args=(--no-preload -- python3 -c 'x=[str(i) for i in range(2000)]') ;;
	4) args=(-- sort "$tmp/in.txt") ;;
	5) args=(-- bash -c 'x=$(seq 100); kill -9 $$') ;;
	6) args=(-- "$WL" burst 2000) ;;
	7) args=(-- /bin/true) ;;
	esac
}
passed=0 failed=0
for ((i = 0; i < NWL; i++)); do
	workload "$i"
	for side in old new; do
		dir=$OLD
		[ $side = new ] && dir=$NEW
		rm -rf "$tmp/bin" && mkdir "$tmp/bin"
		cp "$dir/tally" "$dir/libtally_alloc.so" "$dir/libtally.so" "$tmp/bin/"
		(cd "$tmp" && timeout 120 "$tmp/bin/tally" snapshot "${args[@]}" 2>/dev/null </dev/null) |
			jq -c "$BLANK" >"$tmp/$side.$i.json"
	done
	if [ -s "$tmp/new.$i.json" ] && cmp -s "$tmp/old.$i.json" "$tmp/new.$i.json"; then
		echo "ok - snapshot ${args[*]:0:4}: the same $(wc -c <"$tmp/new.$i.json") bytes"
		passed=$((passed + 1))
	else
		echo "not ok - snapshot ${args[*]:0:4}"
		diff <(jq . "$tmp/old.$i.json") <(jq . "$tmp/new.$i.json") | head -20 | sed 's/^/    /'
		failed=$((failed + 1))
	fi
done
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
