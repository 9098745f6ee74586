#!/usr/bin/env bash
# Allocator benchmark: runs every bench/alloc_bench workload, and the shapes of mimalloc-bench's
# programs in bench/alloc_shapes (rptest, xmalloc, alloc-test, large, malloc-large, larson),
# under glibc, tally and the usual alternatives, then prints the medians as markdown tables
# followed by tally's acceptance checks.
#
# usage: scripts/bench-alloc.sh [--quick]
#
#   --quick        one round with a tenth of the work: a smoke test, not a measurement
#   BENCH_RUNS     rounds (default 3); the table shows the median of the rounds
#   BENCH_REPS     runs per round of the churn workloads, which take under a second each
#                  (default 5): each run is paired with the other allocators' runs of the
#                  same repetition, so a ratio is the median of BENCH_RUNS x BENCH_REPS pairs
#   BENCH_BIN      a prebuilt alloc_bench to use instead of building one
#   BENCH_SHAPES_BIN  a prebuilt alloc_shapes to use instead of building one
#   BENCH_TIMEOUT  seconds before a single run counts as hung (default 120)
#   BENCH_WORKLOADS  the workloads to run, space-separated (default: all)
#   BENCH_BASELINE a folder with another build's libtally_alloc.so (say, of the commit
#                  before a change): measured as "tally-base" in the same rounds, so that
#                  before and after are paired like any two allocators
#   BUILD          the build folder whose libraries are measured (default build; `make
#                  BUILD=dir bench-alloc` passes it on)
#
# Raw output stays in $BUILD/bench-alloc/: one log per run, results.txt (every figure parsed)
# and summary.md (what this script printed).
#
# The checks report, they do not gate: the exit status is 0 even when one fails. It is
# non-zero when a run crashes, hangs, prints no result, or ran under the wrong malloc.
#
# EXAMPLES:
#   scripts/bench-alloc.sh --quick
#   BENCH_RUNS=5 scripts/bench-alloc.sh
#   BENCH_WORKLOADS="churn-1t idle-quiet" BUILD=build-h4 scripts/bench-alloc.sh
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD
start_s=$SECONDS

quick=
runs=${BENCH_RUNS:-3}
reps=${BENCH_REPS:-5}
run_timeout=${BENCH_TIMEOUT:-120}
case "${1:-}" in
--quick) quick=-q; runs=1; reps=1 ;;
'') ;;
*) echo "usage: $0 [--quick]" >&2; exit 2 ;;
esac
if ! [[ $runs =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-alloc: BENCH_RUNS must be a positive integer, not '$runs'" >&2
	exit 2
fi
if ! [[ $reps =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-alloc: BENCH_REPS must be a positive integer, not '$reps'" >&2
	exit 2
fi

build=${BUILD:-build}
outdir=$root/$build/bench-alloc
mkdir -p "$outdir"
# Stale logs from an earlier run would be indistinguishable from this one's.
rm -f "$outdir"/*.log "$outdir"/results.txt "$outdir"/summary.md

if [ -n "${BENCH_BIN:-}" ]; then
	bin=$BENCH_BIN
else
	bin=$root/$build/alloc_bench
	cc -O2 -g -pthread -Wall -Wextra -Werror bench/alloc_bench.c -o "$bin"
fi
if [ -n "${BENCH_SHAPES_BIN:-}" ]; then
	shapes_bin=$BENCH_SHAPES_BIN
else
	shapes_bin=$root/$build/alloc_shapes
	cc -O2 -g -pthread -Wall -Wextra -Werror bench/alloc_shapes.c -o "$shapes_bin"
fi

# Comparison allocators come from the distribution; look where the multiarch layout puts them.
multiarch=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
libdirs=("/usr/lib/$multiarch" /usr/lib64 /usr/lib)
find_lib()
{
	local name dir

	for name in "$@"; do
		for dir in "${libdirs[@]}"; do
			if [ -e "$dir/$name" ]; then
				echo "$dir/$name"
				return 0
			fi
		done
	done
	echo "$1"	# not found: keep a path for the "skipped" note
}

# Column order of the table. glibc is the baseline and always present.
allocs=(glibc tally tally-noprobes jemalloc mimalloc tcmalloc)
declare -A lib=(
	[glibc]=""
	[tally]=$root/$build/libtally_alloc.so
	[tally-noprobes]=$root/$build/libtally_alloc_noprobes.so
	[jemalloc]=$(find_lib libjemalloc.so.2)
	[mimalloc]=$(find_lib libmimalloc.so.2 libmimalloc.so.2.0 libmimalloc.so)
	[tcmalloc]=$(find_lib libtcmalloc.so.4 libtcmalloc_minimal.so.4)
)
if [ -n "${BENCH_BASELINE:-}" ]; then
	allocs+=(tally-base)
	lib[tally-base]=$(cd "$BENCH_BASELINE" && pwd)/libtally_alloc.so
fi

present=()
skipped=()
for a in "${allocs[@]}"; do
	if [ -z "${lib[$a]}" ] || [ -e "${lib[$a]}" ]; then
		present+=("$a")
	else
		skipped+=("$a (${lib[$a]#"$root"/} not found)")
	fi
done

# The mimalloc-bench shapes: their own binary, table and checks.
shapes=(rptest xmalloc alloc-test large malloc-large larson)
bench_rows=(churn-1t churn-2t churn-init-1t churn512-1t prodcons mixed shrink halffree idle-active idle-quiet)
workloads=("${bench_rows[@]}" "${shapes[@]}")
declare -A wargs=(
	[churn-1t]="churn 1" [churn-2t]="churn 2" [churn-init-1t]="churn-init 1"
	[churn512-1t]="churn512 1"
	[prodcons]=prodcons [mixed]=mixed
	[shrink]=shrink [halffree]=halffree
	[idle-active]=idle-active [idle-quiet]=idle-quiet
	[rptest]=rptest [xmalloc]=xmalloc [alloc-test]=alloc-test [large]=large
	[malloc-large]=malloc-large [larson]=larson
)
declare -A wbin=()
for w in "${shapes[@]}"; do
	wbin[$w]=$shapes_bin
done
all_workloads=("${workloads[@]}")
if [ -n "${BENCH_WORKLOADS:-}" ]; then
	for w in $BENCH_WORKLOADS; do
		if [ -z "${wargs[$w]:-}" ]; then
			echo "bench-alloc: unknown workload '$w' in BENCH_WORKLOADS" >&2
			exit 2
		fi
	done
	read -r -a workloads <<<"$BENCH_WORKLOADS"
fi

results=$outdir/results.txt
: >"$results"
failures=0
pin_cpu=$(($(nproc) - 1))
declare -A failed	# runs that failed, per "workload,allocator"

# The object that must provide malloc in a run: a preload that fails to load only warns, and
# the run would silently measure glibc under another allocator's name.
expected_malloc()
{
	if [ -z "${lib[$1]}" ]; then
		echo libc.so.6
	else
		basename "${lib[$1]}"
	fi
}

# Runs one workload under one allocator; appends "workload allocator key value" lines to
# results.txt and returns non-zero if the run did not produce a trustworthy result.
run_one()
{
	local w=$1 a=$2 round=$3 log rc line from kv
	local -a cmd

	log=$outdir/$w.$a.$round.log # round: N, or N.K for the Kth repetition in round N
	if [ -z "${lib[$a]}" ]; then
		cmd=(env -u LD_PRELOAD)
	else
		cmd=(env "LD_PRELOAD=${lib[$a]}")
	fi
	# Single-threaded workloads run pinned to one CPU, the same for every allocator: the
	# vCPUs of these VMs differ by up to a third in speed, which would otherwise decide
	# more than the allocator does.
	case $w in
	churn-1t | churn-init-1t | churn512-1t | mixed | shrink | halffree | alloc-test | large | malloc-large)
		cmd+=(taskset -c "$pin_cpu") ;;
	esac
	# shellcheck disable=SC2206 # split on purpose: a flag, a workload and its argument
	cmd+=(timeout "$run_timeout" "${wbin[$w]:-$bin}" $quick ${wargs[$w]})

	rc=0
	"${cmd[@]}" >"$log" 2>&1 || rc=$?
	if [ $rc -ne 0 ]; then
		[ $rc -eq 124 ] && echo "(timed out after ${run_timeout}s)" >>"$log"
		echo "bench-alloc: $w under $a failed (exit $rc), see ${log#"$root"/}:" >&2
		tail -n 5 "$log" | sed 's/^/    /' >&2
		return 1
	fi
	line=$(grep "^result $w " "$log" | tail -n 1) || true
	if [ -z "$line" ]; then
		echo "bench-alloc: $w under $a printed no result line, see ${log#"$root"/}" >&2
		return 1
	fi
	from=$(sed -n 's/.* malloc_from=\([^ ]*\).*/\1/p' <<<"$line")
	if [ "$from" != "$(expected_malloc "$a")" ]; then
		echo "bench-alloc: $w under $a ran with malloc from '$from', not" \
		     "$(expected_malloc "$a"); see ${log#"$root"/}" >&2
		return 1
	fi
	for kv in $line; do
		case $kv in
		ops_per_s=* | rss_over_live=* | floor=* | within_floor=* | settle_s=* | peak_rss_mib=*)
			echo "$w $a ${kv%%=*} ${kv#*=} $round" >>"$results"
			;;
		esac
	done
}

echo "bench-alloc: ${#present[@]} allocators, ${#workloads[@]} workloads, $runs round(s)" \
     "${quick:+(quick)}" >&2
for s in "${skipped[@]}"; do
	echo "bench-alloc: skipping $s" >&2
done

for ((round = 1; round <= runs; round++)); do
	# Every allocator runs each workload in the same round, so a noisy minute on the VM hits
	# them alike; the order rotates between rounds so that none always goes first.
	order=()
	for ((i = 0; i < ${#present[@]}; i++)); do
		order+=("${present[(i + round - 1) % ${#present[@]}]}")
	done
	for w in "${workloads[@]}"; do
		echo "bench-alloc: round $round/$runs: $w" >&2
		# The churn runs are short and their spread on this VM is several percent, so
		# they repeat within the round; every repetition is a pairing of its own.
		n=1 tag=$round
		case $w in churn-* | churn512-*) n=$reps ;; esac
		for ((k = 1; k <= n; k++)); do
			[ "$n" -gt 1 ] && tag=$round.$k
			for a in "${order[@]}"; do
				if ! run_one "$w" "$a" "$tag"; then
					failures=$((failures + 1))
					failed[$w,$a]=$((${failed[$w,$a]:-0} + 1))
				fi
			done
		done
	done
done

# Every round's value of one figure (workload, allocator, key), in ascending order.
values()
{
	awk -v w="$1" -v a="$2" -v k="$3" '$1 == w && $2 == a && $3 == k { print $4 }' \
		"$results" | sort -g
}

# Median over the runs (the rounds, and the churn's repetitions); empty when no run produced
# the figure.
median()
{
	values "$@" | awk '{ v[NR] = $1 }
		END { if (NR) printf "%.6g\n", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

# ratio W A B KEY: the median over the rounds (and repetitions) of A's figure over B's in
# the same one (both ran within seconds of each other, so the VM's drift between rounds
# cancels); empty when none has both.
ratio()
{
	awk -v w="$1" -v a="$2" -v b="$3" -v k="$4" '
		$1 == w && $3 == k && $2 == a { x[$5] = $4 }
		$1 == w && $3 == k && $2 == b { y[$5] = $4 }
		END { for (r in x) if ((r in y) && y[r] > 0) print x[r] / y[r] }' "$results" |
		sort -g | awk '{ v[NR] = $1 }
		END { if (NR) printf "%.6g\n", (v[int((NR + 1) / 2)] + v[int(NR / 2) + 1]) / 2 }'
}

# Best (highest) of the rounds; empty when no run produced the figure.
best()
{
	values "$@" | tail -n 1
}

# Float arithmetic and formatting: calc EXPR [FORMAT]
calc()
{
	awk "BEGIN { printf \"${2:-%.2f}\\n\", $1 }"
}

declare -A med
for w in "${all_workloads[@]}"; do
	for a in "${present[@]}"; do
		for k in ops_per_s rss_over_live floor within_floor settle_s peak_rss_mib; do
			med[$w,$a,$k]=$(median "$w" "$a" "$k")
		done
	done
done

# One table row: label, then a cell per present allocator from the function named in $2.
# A failed run leaves no figure, so a median over the rest would hide it: say so in the cell.
row()
{
	local label=$1 cell=$2 w=$3 a out v n

	[[ " ${workloads[*]} " == *" $w "* ]] || return 0 # not run (BENCH_WORKLOADS)
	out="| $label |"
	for a in "${present[@]}"; do
		v=$($cell "$w" "$a")
		n=${failed[$w,$a]:-0}
		if [ "$n" -gt 0 ]; then
			[ "$v" = "-" ] && v="FAILED" || v+=" ($n failed)"
		fi
		out+=" $v |"
	done
	echo "$out"
}

speed_ratio()
{
	local v=${med[$1,$2,ops_per_s]} base=${med[$1,glibc,ops_per_s]}

	if [ -z "$v" ] || [ -z "$base" ]; then echo "-"; else calc "$v / $base"; fi
}

speed_abs()
{
	local v=${med[$1,$2,ops_per_s]}

	if [ -z "$v" ]; then echo "-"; else calc "$v / 1e6" "%.1f"; fi
}

figure()
{
	local v=${med[$1,$2,$3]}

	if [ -z "$v" ]; then echo "-"; else calc "$v"; fi
}

rss_cell() { figure "$1" "$2" rss_over_live; }
floor_cell() { figure "$1" "$2" floor; }
within_cell() { figure "$1" "$2" within_floor; }
settle_cell() { figure "$1" "$2" settle_s; }
# Three significant digits: large runs at a few hundredths of a million a second on some.
shape_speed_cell()
{
	local v=${med[$1,$2,ops_per_s]}

	if [ -z "$v" ]; then echo "-"; else calc "$v / 1e6" "%.3g"; fi
}
shape_rss_cell()
{
	local v=${med[$1,$2,peak_rss_mib]}

	if [ -z "$v" ]; then echo "-"; else calc "$v" "%.1f"; fi
}

# paired_cell W B KEY: tally's figure over B's, paired by round (see ratio), or "-".
paired_cell()
{
	local r

	r=$(ratio "$1" tally "$2" "$3")
	if [ -z "$r" ]; then echo "-"; else calc "$r"; fi
}

# shape_row LABEL CELL W KEY: row() and then tally's ratios to mimalloc and to glibc.
shape_row()
{
	local out

	out=$(row "$1" "$2" "$3")
	[ -n "$out" ] || return 0
	echo "$out $(paired_cell "$3" mimalloc "$4") | $(paired_cell "$3" glibc "$4") |"
}
header()
{
	local a out="| $1 |" rule="| --- |"

	for a in "${present[@]}"; do
		out+=" $a |"
		rule+=" ---: |"
	done
	echo "$out"
	echo "$rule"
}

# any_run W...: true when BENCH_WORKLOADS kept one of them.
any_run()
{
	local w

	for w in "$@"; do
		[[ " ${workloads[*]} " == *" $w "* ]] && return 0
	done
	return 1
}

# The mimalloc-bench shapes' table: every allocator's figure, then tally's paired ratios.
shape_table()
{
	local w

	any_run "${shapes[@]}" || return 0
	echo
	header "mimalloc-bench shapes (speed: M ops/s, higher is faster; peak RSS: MiB, lower is better)" |
		sed '1s/$/ tally \/ mimalloc | tally \/ glibc |/; 2s/$/ ---: | ---: |/'
	for w in "${shapes[@]}"; do
		shape_row "$w (M ops/s)" shape_speed_cell "$w" ops_per_s
		shape_row "$w: peak RSS (MiB)" shape_rss_cell "$w" peak_rss_mib
	done
}

# ok_if COND: PASS or FAIL from an awk condition.
ok_if()
{
	awk "BEGIN { exit !($1) }" && echo PASS || echo FAIL
}

# The acceptance checks; each prints SKIP when a figure it needs is missing.
checks()
{
	local t1=${med[churn-1t,tally,ops_per_s]:-} m1=${med[churn-1t,mimalloc,ops_per_s]:-}
	local t2=${med[churn-2t,tally,ops_per_s]:-} m2=${med[churn-2t,mimalloc,ops_per_s]:-}
	local tp=${med[prodcons,tally,ops_per_s]:-} gp=${med[prodcons,glibc,ops_per_s]:-}
	local tw=${med[shrink,tally,within_floor]:-} tr=${med[shrink,tally,rss_over_live]:-}
	local tf=${med[shrink,tally,floor]:-}
	local th=${med[halffree,tally,rss_over_live]:-} gh=${med[halffree,glibc,rss_over_live]:-}
	local n1=${med[churn-1t,tally-noprobes,ops_per_s]:-}
	local r r2 raw pct best_pct b_n b_t

	echo "Acceptance checks (ratios: the median of the per-round ratios; memory: medians;" \
	     "$runs round(s), churn $reps run(s) per round):"
	if [ -n "$quick" ]; then
		echo "(quick run: a smoke test. Its idle phase after the free is 0.5 s, shorter"
		echo "than a purge delay, so the memory checks below mean little.)"
	fi
	if [ -n "$t1" ] && [ -n "$m1" ]; then
		# the checks compare the unrounded figures; only the printed ones are rounded
		raw=$(ratio churn-1t tally mimalloc ops_per_s)
		r=$(calc "$raw" "%.3f")
		r2=$([ -n "$t2" ] && [ -n "$m2" ] && calc "$(ratio churn-2t tally mimalloc ops_per_s)" ||
			echo "-")
		echo "- $(ok_if "$raw >= 1") tally churn-1t = $r x mimalloc (need >= 1.00)" \
		     "[2t: $r2 x mimalloc]"
		if [ -n "${med[churn-1t,tcmalloc,ops_per_s]:-}" ]; then
			raw=$(ratio churn-1t tally tcmalloc ops_per_s)
			echo "- $(ok_if "$raw >= 1") tally churn-1t = $(calc "$raw" "%.3f") x tcmalloc" \
			     "(need >= 1.00)"
		fi
		local ti=${med[churn-init-1t,tally,ops_per_s]:-} mi=${med[churn-init-1t,mimalloc,ops_per_s]:-}
		# Not the acceptance figure: the same churn with every object written whole.
		[ -n "$ti" ] && [ -n "$mi" ] &&
			echo "  (for reference, churn-init-1t, objects written whole:" \
			     "$(calc "$(ratio churn-init-1t tally mimalloc ops_per_s)") x mimalloc)"
		if [ -n "${med[churn-1t,tally-base,ops_per_s]:-}" ]; then
			local b2
			b2=$(ratio churn-2t tally tally-base ops_per_s)
			echo "  (baseline build: churn-1t" \
			     "$(calc "$(ratio churn-1t tally-base mimalloc ops_per_s)" "%.3f") x mimalloc;" \
			     "this build / baseline:" \
			     "$(calc "$(ratio churn-1t tally tally-base ops_per_s)" "%.3f")," \
			     "2t: $([ -n "$b2" ] && calc "$b2" "%.3f" || echo -))"
		fi
	else
		echo "- SKIP tally churn-1t >= 1.0 x mimalloc (no tally or mimalloc figure)"
	fi
	if [ -n "${med[churn512-1t,tally,ops_per_s]:-}" ] &&
		[ -n "${med[churn512-1t,mimalloc,ops_per_s]:-}" ]; then
		raw=$(ratio churn512-1t tally mimalloc ops_per_s)
		echo "- $(ok_if "$raw >= 1") tally churn512-1t (uniform 16..512 B) =" \
		     "$(calc "$raw" "%.3f") x mimalloc (need >= 1.00)"
	fi
	if [ -n "$tp" ] && [ -n "$gp" ]; then
		raw=$(ratio prodcons tally glibc ops_per_s)
		r=$(calc "$raw")
		echo "- $(ok_if "$raw >= 2") tally prodcons = $r x glibc (need >= 2.00)"
	else
		echo "- SKIP tally prodcons >= 2 x glibc (no tally or glibc figure)"
	fi
	if [ -n "$tw" ]; then
		echo "- $(ok_if "$tw <= 1.2") tally shrink rss/live = $(calc "$tr") with floor" \
		     "$(calc "$tf"): $(calc "$tw" "%.3f") x floor (need <= 1.200)"
	else
		echo "- SKIP tally shrink within 20% of the 4 KiB-page floor (no tally figure)"
	fi
	if [ -n "$th" ] && [ -n "$gh" ]; then
		echo "- $(ok_if "$th <= $gh") tally halffree rss/live = $(calc "$th" "%.3f")," \
		     "glibc $(calc "$gh" "%.3f") (need tally <= glibc)"
	else
		echo "- SKIP tally halffree rss/live <= glibc (no tally or glibc figure)"
	fi
	if [ -n "$n1" ] && [ -n "$t1" ]; then
		raw=$(calc "($(ratio churn-1t tally-noprobes tally ops_per_s) - 1) * 100" "%.6f")
		pct=$(calc "$raw" "%.1f")
		# 3% is inside this VM's run-to-run noise; the best runs are the least disturbed
		# ones, so they are shown beside the medians as a second opinion.
		b_n=$(best churn-1t tally-noprobes ops_per_s)
		b_t=$(best churn-1t tally ops_per_s)
		best_pct=$(calc "($b_n / $b_t - 1) * 100" "%.1f")
		echo "- $(ok_if "$raw < 3") probe cost: tally-noprobes / tally churn-1t - 1" \
		     "= ${pct}% (need < 3%) [best runs: ${best_pct}%]"
	else
		echo "- SKIP probe cost < 3% (needs tally and tally-noprobes)"
	fi
	local w tw2 tr2 ts2
	for w in idle-active idle-quiet; do
		tw2=${med[$w,tally,within_floor]:-} tr2=${med[$w,tally,rss_over_live]:-}
		ts2=${med[$w,tally,settle_s]:-}
		if [ -n "$tw2" ] && [ -n "$ts2" ]; then
			echo "- $(ok_if "$tw2 <= 1.2 && $ts2 >= 0 && $ts2 <= 2") tally $w rss/live =" \
			     "$(calc "$tr2"): $(calc "$tw2" "%.3f") x the 4 KiB-page floor," \
			     "within 20 % after $(calc "$ts2") s (need <= 1.200 within 2 s," \
			     "untouched by tally_alloc_collect)"
		else
			echo "- SKIP tally $w within 20% of the floor within 2 s (no tally figure)"
		fi
	done
}

# The shapes' checks: speed against mimalloc on each (and glibc on the large ones), peak RSS
# against mimalloc on the small-object ones. Speeds compare paired ratios, memory the medians.
shape_checks()
{
	local w raw tm gm

	for w in "${shapes[@]}"; do
		any_run "$w" || continue
		raw=$(ratio "$w" tally mimalloc ops_per_s)
		if [ -n "$raw" ]; then
			echo "- $(ok_if "$raw >= 1") tally $w = $(calc "$raw" "%.3f") x mimalloc" \
			     "(need >= 1.00)"
		else
			echo "- SKIP tally $w >= 1.0 x mimalloc (no tally or mimalloc figure)"
		fi
		if [ "$w" = large ] || [ "$w" = malloc-large ]; then
			raw=$(ratio "$w" tally glibc ops_per_s)
			if [ -n "$raw" ]; then
				echo "- $(ok_if "$raw >= 1") tally $w = $(calc "$raw" "%.3f") x glibc" \
				     "(need >= 1.00)"
			else
				echo "- SKIP tally $w >= glibc (no tally or glibc figure)"
			fi
		fi
		tm=${med[$w,tally,peak_rss_mib]:-} gm=${med[$w,mimalloc,peak_rss_mib]:-}
		# the peak RSS goal is on the small-object shapes; the large ones' is reported
		if [ -n "$tm" ] && [ -n "$gm" ] && { [ "$w" = large ] || [ "$w" = malloc-large ]; }; then
			echo "- tally $w peak RSS = $(calc "$tm" "%.1f") MiB, mimalloc" \
			     "$(calc "$gm" "%.1f") MiB (reported, not gated)"
		elif [ -n "$tm" ] && [ -n "$gm" ]; then
			echo "- $(ok_if "$tm <= $gm") tally $w peak RSS = $(calc "$tm" "%.1f") MiB," \
			     "mimalloc $(calc "$gm" "%.1f") MiB (need tally <= mimalloc)"
		else
			echo "- SKIP tally $w peak RSS <= mimalloc (no tally or mimalloc figure)"
		fi
	done
}

# The tables of alloc_bench's workloads.
bench_tables()
{
	echo
	header "workload (speed: x glibc, higher is faster; memory: RSS/live, lower is better)"
	for w in churn-1t churn-2t churn-init-1t churn512-1t prodcons mixed; do
		row "$w" speed_ratio "$w"
	done
	row "shrink: rss/live" rss_cell shrink
	row "shrink: within_floor (rss/floor)" within_cell shrink
	row "halffree: rss/live" rss_cell halffree
	for w in idle-active idle-quiet; do
		row "$w: rss/live" rss_cell "$w"
		row "$w: rss/floor" within_cell "$w"
	done
	echo
	header "absolute figures"
	for w in churn-1t churn-2t churn-init-1t churn512-1t prodcons mixed; do
		row "$w (M ops/s)" speed_abs "$w"
	done
	row "shrink: 4 KiB-page floor / live" floor_cell shrink
	row "halffree: 4 KiB-page floor / live" floor_cell halffree
	for w in idle-active idle-quiet; do
		row "$w: 4 KiB-page floor / live" floor_cell "$w"
		row "$w: s until within 20 % of the floor (-1: never)" settle_cell "$w"
	done
}

report()
{
	local churn=

	any_run churn-1t churn-2t churn-init-1t churn512-1t && churn=", churn $reps run(s) per round"
	echo "## Allocator benchmark ($runs round(s)$churn${quick:+, quick}; median per cell)"
	if any_run "${bench_rows[@]}"; then
		bench_tables
	fi
	shape_table
	echo
	for s in "${skipped[@]}"; do
		echo "Skipped: $s"
	done
	[ ${#skipped[@]} -eq 0 ] || echo
	if any_run "${bench_rows[@]}"; then
		checks
	else
		echo "Acceptance checks ($runs round(s); speeds: the median of the per-round ratios):"
	fi
	shape_checks
	echo
	echo "Runs failed: $failures. Total time: $((SECONDS - start_s)) s." \
	     "Logs: ${outdir#"$root"/}/"
}

report | tee "$outdir/summary.md"

[ "$failures" -eq 0 ]
