#!/usr/bin/env bash
# tally diff (user/cmd/diff.c): two runs of tests/diff/workload.c under
# tally snapshot --rate 1, the second holding a known amount more in group
# "grow" (and its forked child more too), each writing its own truth. The
# diff's deltas must equal the truths' exactly (live bytes are exact, and
# 256 KiB samples weigh exactly 1 at --rate 1, so the sites' are too), as
# jq and Python's json read them; the text's lines too; then what it must
# refuse (one line on stderr, nothing on stdout, exit 1 or 2) and a
# snapshot full of hostile values (no crash, no terminal escape through).
# The same of two profiles (tally profile), and of a stripped program's.
# TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
W=$PWD/$BUILD/tests/diff_workload
. tests/lib.sh

need_root diff
export LC_ALL=C

# snap NAME GROW_KIB CHILD_KIB: $tmp/NAME.json, its truth $tmp/NAME.truth
snap() {
	"$TALLY" snapshot --rate 1 -o "$tmp/$1.json" -- "$W" "$2" "$3" "$tmp/$1.truth" \
		>"$tmp/$1.out" 2>"$tmp/$1.err"
}
snap before 3072 512
rb=$?
snap after 4096 1024
ra=$?
ok=1
for n in before after; do
	jq -e '.grow and .steady and .child_grow' "$tmp/$n.truth" >/dev/null 2>&1 &&
		jq -e '.target.pid' "$tmp/$n.json" >/dev/null 2>&1 || ok=0
done
check "two runs under tally snapshot, each snapshot and truth valid JSON" \
	"$([ $rb -eq 0 ] && [ $ra -eq 0 ] && [ $ok -eq 1 ]; echo $?)" \
	"rc $rb, $ra: $(tail -n 3 "$tmp/before.err" "$tmp/after.err")"
if [ $ok -ne 1 ]; then
	finish
	exit
fi
tb() { jq -r ".$1" "$tmp/before.truth"; }
ta() { jq -r ".$1" "$tmp/after.truth"; }
grow_delta=$(($(ta grow) - $(tb grow)))
child_delta=$(($(ta child_grow) - $(tb child_grow)))
check "the truths differ by what the runs were told (1 MiB in grow, 512 KiB in the child)" \
	"$([ $grow_delta -eq 1048576 ] && [ $child_delta -eq 524288 ] &&
		[ "$(ta steady)" -eq "$(tb steady)" ]; echo $?)" "grow $grow_delta, child $child_delta"

"$TALLY" diff --json "$tmp/before.json" "$tmp/after.json" >"$tmp/diff.json" 2>"$tmp/diff.err"
rc=$?
check "diff --json: exit 0, JSON jq reads, nothing on stderr" \
	"$([ $rc -eq 0 ] && jq -e . "$tmp/diff.json" >/dev/null && [ ! -s "$tmp/diff.err" ]; echo $?)" \
	"rc $rc: $(head -c 300 "$tmp/diff.err")"

# jqt NAME FILTER: a check that FILTER is true of the diff, with the truths as $b and $a
jqt() {
	local out
	out=$(jq -e --slurpfile b "$tmp/before.truth" --slurpfile a "$tmp/after.truth" \
		--slurpfile sb "$tmp/before.json" --slurpfile sa "$tmp/after.json" \
		"($2) as \$r | if \$r then true else false end" "$tmp/diff.json" 2>&1)
	check "$1" "$([ "$out" = true ]; echo $?)" "$out; $(jq -c "$3" "$tmp/diff.json" 2>&1 | head -c 600)"
}
G='.groups[] | select(.name == "grow")'
jqt "group grow: live before and after are the truths', delta exactly theirs" \
	"$G | .in == \"both\" and .live_before == \$b[0].grow and .live_after == \$a[0].grow
		and .delta == \$a[0].grow - \$b[0].grow" "$G"
S='.groups[] | select(.name == "steady")'
jqt "group steady: live the truth's on both sides, delta 0" \
	"$S | .live_before == \$b[0].steady and .live_after == \$a[0].steady and .delta == 0" "$S"
jqt "groups: each group's allocated bytes and CPU before and after are its snapshot's" \
	"[.groups[] as \$g | (\$sb[0].groups[] | select(.name == \$g.name)) as \$x
		| (\$sa[0].groups[] | select(.name == \$g.name)) as \$y
		| \$g.allocated_bytes_before == \$x.allocated_bytes and \$g.cpu_ns_after == \$y.cpu_ns
		and \$g.cpu_ns_delta == \$y.cpu_ns - \$x.cpu_ns] | length == 3 and all" ".groups"
# peak_live is written by a later tally: the diff shows it when it is there, null when not
jqt "groups: peak before and after are the snapshot's peak_live, or null when it has none" \
	"[.groups[] as \$g | (\$sb[0].groups[] | select(.name == \$g.name)) as \$x
		| (\$sa[0].groups[] | select(.name == \$g.name)) as \$y
		| \$g.peak_before == (\$x.peak_live // null) and \$g.peak_after == (\$y.peak_live // null)]
		| all" ".groups | map({name, peak_before, peak_after})"
# the workload never frees in grow, so at its process's peak of live grow holds all it will
jqt "group grow's peak, and its site's, before and after are the truths', their delta the truths'" \
	"($G | .peak_before == \$b[0].grow and .peak_after == \$a[0].grow
		and .peak_delta == \$a[0].grow - \$b[0].grow) and (.sites[0] | .peak_before == \$b[0].grow
		and .peak_delta == \$a[0].grow - \$b[0].grow)" "$G | {peak_before, peak_after}, .sites[0]"
P='.processes[0]'
jqt "process 1 (the root, diff_workload): matched across pids, delta the truth's" \
	"$P | .comm == \"diff_workload\" and .rank == 0 and .pid_before == \$sb[0].target.pid
		and .pid_after == \$sa[0].target.pid and .pid_before != .pid_after
		and .delta == \$a[0].grow - \$b[0].grow" "$P | del(.instance, .groups)"
P='.processes[1]'
jqt "process 2 (the forked diff_workload, rank 1): its live the truth's, delta the truth's" \
	"$P | .comm == \"diff_workload\" and .rank == 1 and .in == \"both\"
		and .live_before == \$b[0].child_grow and .live_after == \$a[0].child_grow
		and .delta == \$a[0].child_grow - \$b[0].child_grow" "$P | del(.instance, .groups)"
jqt "the site that moved most: keep_grow called by main, in grow, delta the truth's exactly" \
	".sites[0] | .group == \"grow\" and (.frames | index(\"keep_grow\")) as \$i
		| \$i != null and .frames[\$i + 1] == \"main\" and .in == \"both\"
		and .live_before == \$b[0].grow and .delta == \$a[0].grow - \$b[0].grow" ".sites[0]"
jqt "the next: keep_grow called by child, delta the child's truth" \
	".sites[1] | .group == \"grow\" and (.frames | index(\"child\")) != null
		and .delta == \$a[0].child_grow - \$b[0].child_grow" ".sites[1]"
jqt "the site of keep_steady: delta 0, live the truth's" \
	"[.sites[] | select(.frames | index(\"keep_steady\"))] | length == 1
		and .[0].delta == 0 and .[0].live_after == \$a[0].steady" ".sites"

out=$(python3 - "$tmp/diff.json" "$tmp/before.truth" "$tmp/after.truth" 2>&1 <<'EOF'
import json, sys
def no_constant(c):
    raise ValueError("not JSON: " + c)
d = json.load(open(sys.argv[1]), parse_constant=no_constant)
b, a = (json.load(open(p)) for p in sys.argv[2:4])
g = {x["name"]: x for x in d["groups"]}
assert g["grow"]["delta"] == a["grow"] - b["grow"], g["grow"]
assert g["steady"]["delta"] == 0, g["steady"]
assert d["sites"][0]["delta"] == a["grow"] - b["grow"], d["sites"][0]
assert all(isinstance(s["frames"], list) and all(isinstance(f, str) for f in s["frames"])
           for s in d["sites"])
print("ok")
EOF
)
check "Python's json reads the diff: grow's delta and the top site's are the truth's" \
	"$([ "$out" = ok ]; echo $?)" "$out"

# the reversed diff: the same figures, negated
"$TALLY" diff --json "$tmp/after.json" "$tmp/before.json" >"$tmp/rev.json" 2>&1
check "after against before: grow's delta is minus the truth's" \
	"$(jq -e --argjson d "$grow_delta" '.groups[] | select(.name == "grow") | .delta == -$d' \
		"$tmp/rev.json" >/dev/null; echo $?)" "$(head -c 300 "$tmp/rev.json")"
"$TALLY" diff --json "$tmp/before.json" "$tmp/before.json" >"$tmp/same.json" 2>&1
check "a snapshot against itself: every delta of groups, processes and sites is 0" \
	"$(jq -e '[.groups[], .processes[], .sites[] | .delta == 0] | length > 5 and all' \
		"$tmp/same.json" >/dev/null; echo $?)" "$(head -c 300 "$tmp/same.json")"

# The text, its figures in people's units, computed here from the truths
human() { # BYTES [sign]: as tally diff writes bytes
	awk -v b="$1" -v s="${2:-}" 'BEGIN { m = b < 0 ? -b : b; g = b < 0 ? "-" : (s && b > 0 ? "+" : "")
		if (m < 1024) { printf "%s%d B", g, m; exit }
		split("KiB MiB GiB TiB", u, " "); i = 0; while (m >= 1024 && i < 4) { m /= 1024; i++ }
		printf "%s%.2f %s", g, m, u[i] }'
}
re() { printf '%s' "$1" | sed 's/[.+]/\\&/g'; }
"$TALLY" diff --top 2 "$tmp/before.json" "$tmp/after.json" >"$tmp/diff.txt" 2>&1
rc=$?
line=" +$(re "$(human "$(tb grow)")") +$(re "$(human "$(ta grow)")") +$(re "$(human $grow_delta +)") "
check "text: grow's line says $(human "$(tb grow)") -> $(human "$(ta grow)"), $(human $grow_delta +)" \
	"$([ $rc -eq 0 ] && grep -qE "^  grow +$line" "$tmp/diff.txt"; echo $?)" "$(cat "$tmp/diff.txt")"
check "text: steady's line says its truth on both sides and 0 B" \
	"$(grep -qE "^  steady +$(re "$(human "$(tb steady)")") +$(re "$(human "$(ta steady)")") +0 B " \
		"$tmp/diff.txt"; echo $?)" "$(grep steady "$tmp/diff.txt")"
pb=$(jq .target.pid "$tmp/before.json")
pa=$(jq .target.pid "$tmp/after.json")
check "text: the processes by comm and rank, with their pids, the child's delta $(human $child_delta +)" \
	"$(grep -qE "^  diff_workload +.* pid $pb -> $pa\$" "$tmp/diff.txt" &&
		grep -qE "^  diff_workload #2 .* +$(re "$(human $child_delta +)") " "$tmp/diff.txt"
		echo $?)" "$(grep diff_workload "$tmp/diff.txt")"
check "text: --top 2 shows two sites, the first keep_grow's with the truth's delta" \
	"$(grep -qE '^sites by \|live delta\|: 2 of [0-9]+' "$tmp/diff.txt" &&
		[ "$(grep -cE '^ +[-+]?[0-9.]+ [KMG]?i?B .*  (grow|steady|root) ' "$tmp/diff.txt")" -eq 2 ] &&
		grep -qE "^ +$(re "$(human $grow_delta +)") .* grow +keep < keep_grow < main" "$tmp/diff.txt"
		echo $?)" "$(sed -n '/^sites/,$p' "$tmp/diff.txt")"

# Refusals: one line on stderr naming the problem, nothing on stdout
refused() { # NAME STATUS REGEX ARGS...
	local name=$1 want=$2 regex=$3
	shift 3
	"$TALLY" diff "$@" >"$tmp/r.out" 2>"$tmp/r.err"
	local rc=$?
	check "refused, exit $want: $name" \
		"$([ $rc -eq "$want" ] && [ ! -s "$tmp/r.out" ] && [ "$(wc -l <"$tmp/r.err")" -eq 1 ] &&
			grep -qE "$regex" "$tmp/r.err"; echo $?)" "rc $rc: $(head -c 400 "$tmp/r.err")"
}
printf 'hello\n' >"$tmp/text.txt"
head -c 1000 "$tmp/before.json" >"$tmp/cut.json"
printf '{"traceEvents": []}\n' >"$tmp/trace.json"
: >"$tmp/empty.json"
mkdir -p "$tmp/dir"
refused "a missing file" 1 "^tally diff: cannot read $tmp/nope.json: No such file" \
	"$tmp/before.json" "$tmp/nope.json"
refused "a directory" 1 "^tally diff: cannot read $tmp/dir: Is a directory" "$tmp/dir" "$tmp/after.json"
refused "an empty file" 1 "empty" "$tmp/empty.json" "$tmp/after.json"
refused "text that is not JSON" 1 "text.txt is not a snapshot: not valid JSON at byte 0" \
	"$tmp/before.json" "$tmp/text.txt"
refused "a snapshot cut short" 1 "cut.json is not a snapshot: not valid JSON at byte [0-9]+" \
	"$tmp/cut.json" "$tmp/after.json"
refused "JSON that is no snapshot" 1 "trace.json is JSON but not a tally snapshot" \
	"$tmp/before.json" "$tmp/trace.json"
refused "one file" 2 "want two files" "$tmp/before.json"
refused "three files" 2 "too many files" "$tmp/before.json" "$tmp/after.json" "$tmp/after.json"
refused "--top -1" 2 "bad --top" --top -1 "$tmp/before.json" "$tmp/after.json"

# GPU figures: the GPU tests' workload on the fake driver (tests/gpu),
# which writes what each instance shows at its end, against the diff
# workload's run, which has none: each group's and the process's figures
# are the workload's, and so their deltas (train and infer after only).
export TALLY_GPU=on TALLY_NVML=$PWD/$BUILD/tests/fake_cuda/libnvidia-ml.so.1
timeout 120 "$TALLY" snapshot -o "$tmp/gpu.json" -- "$PWD/$BUILD/tests/gpu/gpu_workload" run \
	"$tmp/gpu.truth" </dev/null >/dev/null 2>"$tmp/gpu.err"
rc=$?
"$TALLY" diff --json "$tmp/before.json" "$tmp/gpu.json" >"$tmp/gdiff.json" 2>&1
out=$(jq -e --slurpfile t "$tmp/gpu.truth.end" '
	def same($d; $want): [$want | keys[] as $k | $d.instance[$k].after == $want[$k]
		and $d.instance[$k].delta == $want[$k]] | all;
	([.groups[] | select(.name == "train" or .name == "infer") | .in == "after"
		and same(.; $t[0].groups[.name])] | length == 2 and all)
	and (.groups[] | select(.name == "root") | same(.; $t[0].groups.root))
	and (.processes[] | select(.comm == "gpu_workload") | same(.; $t[0].instance))' \
	"$tmp/gdiff.json" 2>&1)
check "GPU figures: each group's and the process's after and delta are the GPU workload's own" \
	"$([ $rc -eq 0 ] && [ "$out" = true ]; echo $?)" \
	"rc $rc $(head -c 200 "$tmp/gpu.err"): $out; $(jq -c '.groups[] | {name, instance}' "$tmp/gdiff.json" | head -c 600)"
"$TALLY" diff "$tmp/before.json" "$tmp/gpu.json" >"$tmp/gdiff.txt" 2>&1
k=$(jq '.groups.train.kernels_launched' "$tmp/gpu.truth.end")
check "GPU figures, text: group train's kernels_launched, - before, $k after, +$k" \
	"$(sed -n '/^  group train$/,/^  [a-z]/p' "$tmp/gdiff.txt" |
		grep -qE "^    kernels_launched +- +$k +\+$k\$"; echo $?)" "$(sed -n '/^GPU/,$p' "$tmp/gdiff.txt" | head -30)"
unset TALLY_GPU TALLY_NVML

# Two profiles (tally profile's gzip'd pprof) of the same runs: sampled at
# --rate 1 in 256 KiB blocks, so exact too. A profile's groups are its
# samples' sums over the whole tree (the child's bytes in grow too).
# prof NAME BINARY GROW_KIB CHILD_KIB: $tmp/NAME.pb.gz, its truth $tmp/NAME.truth
prof() {
	"$TALLY" profile --rate 1 -o "$tmp/$1.pb.gz" -- "$2" "$3" "$4" "$tmp/$1.truth" \
		>"$tmp/$1.out" 2>"$tmp/$1.err"
}
prof pbefore "$W" 3072 512
prof pafter "$W" 4096 1024
"$TALLY" diff --json "$tmp/pbefore.pb.gz" "$tmp/pafter.pb.gz" >"$tmp/pdiff.json" 2>"$tmp/pdiff.err"
rc=$?
check "two profiles: exit 0, both sides said to be profiles, flagged as estimates" \
	"$([ $rc -eq 0 ] && jq -e '.before.kind == "profile" and .after.kind == "profile"
		and .before.exact == false and .processes == []' "$tmp/pdiff.json" >/dev/null; echo $?)" \
	"rc $rc: $(head -c 300 "$tmp/pdiff.err" "$tmp/pdiff.json")"
check "two profiles: group grow's delta is the truths' over the tree (parent and child)" \
	"$(jq -e --slurpfile b "$tmp/pbefore.truth" --slurpfile a "$tmp/pafter.truth" \
		'.groups[] | select(.name == "grow") | .live_before == $b[0].grow + $b[0].child_grow
		and .delta == ($a[0].grow + $a[0].child_grow) - ($b[0].grow + $b[0].child_grow)' \
		"$tmp/pdiff.json" >/dev/null; echo $?)" "$(jq -c '.groups' "$tmp/pdiff.json" | head -c 400)"
check "two profiles: the top site is keep_grow from main, its delta the truth's" \
	"$(jq -e --slurpfile b "$tmp/pbefore.truth" --slurpfile a "$tmp/pafter.truth" \
		'.sites[0] | .group == "grow" and (.frames | index("keep_grow")) as $i | $i != null
		and .frames[$i + 1] == "main" and .delta == $a[0].grow - $b[0].grow' \
		"$tmp/pdiff.json" >/dev/null; echo $?)" "$(jq -c '.sites[0]' "$tmp/pdiff.json")"
# Without symbols a frame is its module and the offset in it: the same in both runs
prof sbefore "$W"_stripped 3072 512
prof safter "$W"_stripped 4096 1024
"$TALLY" diff --json "$tmp/sbefore.pb.gz" "$tmp/safter.pb.gz" >"$tmp/sdiff.json" 2>&1
check "two profiles of a stripped program: frames as [module+0xOFFSET], matched, delta the truth's" \
	"$(jq -e --slurpfile b "$tmp/sbefore.truth" --slurpfile a "$tmp/safter.truth" \
		'.sites[0] | .in == "both" and (.frames[0] | test("^\\[/.*/diff_workload_stripped\\+0x[0-9a-f]+\\]$"))
		and .delta == $a[0].grow - $b[0].grow' "$tmp/sdiff.json" >/dev/null; echo $?)" \
	"$(jq -c '.sites[0]' "$tmp/sdiff.json" 2>&1 | head -c 400)"
refused "a snapshot against a profile" 1 "cannot compare a snapshot with a profile" \
	"$tmp/before.json" "$tmp/pafter.pb.gz"
printf 'hello' | gzip >"$tmp/junk.gz"
head -c 200 "$tmp/pbefore.pb.gz" >"$tmp/cut.pb.gz"
refused "gzip'd bytes that are no profile" 1 "junk.gz is not a profile tally diff can read" \
	"$tmp/junk.gz" "$tmp/pafter.pb.gz"
refused "a profile cut short" 1 "cut.pb.gz is not a profile tally diff can read" \
	"$tmp/pbefore.pb.gz" "$tmp/cut.pb.gz"
# 300 MiB of zeros in 300 KiB: inflated no further than 256 MiB
head -c 300M /dev/zero | gzip -1 >"$tmp/bomb.gz"
refused "a gzip bomb" 1 "bomb.gz: the profile is too large" "$tmp/bomb.gz" "$tmp/pafter.pb.gz"

# Hostile values in a snapshot: a name with terminal escapes, figures of
# the wrong type, out of range, past int64, a process with no target,
# sites with junk frames; the diff neither crashes nor lets an escape through
# (written by Python: jq 1.6 rounds integers past 2^53)
python3 - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
b = json.load(open(t + "/before.json"))
a = json.load(open(t + "/after.json"))
b["groups"][0]["name"] = "\x1b]0;owned\x07\n\u202e"
b["groups"][1]["live_bytes"] = "12"
b["groups"][2]["cpu_ns"] = 1e300
b["groups"][2]["live_bytes"] = 18446744073709551615
b["processes"][0]["target"] = None
b["processes"] += [{"stats": [1], "groups": {"a": 1}}, 7]
junk = [1, {"function": 2, "module": "\x1b[2J"}, None]
b["sites"] = [{"frames": junk, "group": 5, "inuse_bytes": 9223372036854775807},
              {"frames": "x"}, 3]
b["groups"] += [{"name": "deep", "instance": [[[[[[[[[[[[{}]]]]]]]]]]]]}]
a["sites"] = [{"frames": junk, "group": 5, "inuse_bytes": -9223372036854775808}]
json.dump(b, open(t + "/hostile.json", "w"))
json.dump(a, open(t + "/hostile_a.json", "w"))
EOF
"$TALLY" diff "$tmp/hostile.json" "$tmp/hostile_a.json" >"$tmp/h.txt" 2>&1
rc=$?
check "hostile values, text: exit 0, no escape byte or bidi override on the terminal" \
	"$([ $rc -eq 0 ] && ! grep -q $'\x1b' "$tmp/h.txt" && ! grep -q $'\xe2\x80\xae' "$tmp/h.txt" &&
		grep -q 'x1b' "$tmp/h.txt"; echo $?)" "rc $rc: $(head -c 600 "$tmp/h.txt" | cat -v)"
"$TALLY" diff --json "$tmp/hostile.json" "$tmp/hostile_a.json" >"$tmp/h.json" 2>&1
rc=$?
check "hostile values, JSON: the name escaped back exactly, bad figures null, an overflowing delta null" \
	"$([ $rc -eq 0 ] && jq -e '(.groups[0].name == "\u001b]0;owned\u0007\n\u202e")
		and (.groups[1].live_before == null) and (.groups[2].live_before == null)
		and (.groups[2].cpu_ns_before == null)
		and ([.sites[] | select(.live_before == 9223372036854775807)][0].delta == null)' \
		"$tmp/h.json" >/dev/null; echo $?)" "rc $rc: $(head -c 600 "$tmp/h.json")"

# Many rows: 100000 groups of one name (the k-th before with the k-th
# after, live k and k + 1) and 50000 sites. Matching sorts; the first
# version compared every row with every other and ran past 2 minutes on
# this 8 MB input: the timeout guards against a hang, it measures nothing.
python3 - "$tmp" <<'EOF'
import json, sys
t = sys.argv[1]
for name, plus in (("many_b", 0), ("many_a", 1)):
    d = json.load(open(t + "/before.json"))
    d["groups"] = [{"name": "dup", "live_bytes": k + plus} for k in range(100000)]
    d["sites"] = [{"frames": [{"function": "f%d" % k}], "group": "g", "inuse_bytes": k * plus}
                  for k in range(50000)]
    json.dump(d, open(t + "/" + name + ".json", "w"))
EOF
timeout 60 "$TALLY" diff --json --top 0 "$tmp/many_b.json" "$tmp/many_a.json" >"$tmp/many.json" 2>&1
rc=$?
check "100000 groups of one name, 50000 sites: the k-th matched with the k-th, every delta right" \
	"$([ $rc -eq 0 ] && jq -e '([.groups[] | select(.in == "both" and .delta == 1
		and .live_after == .live_before + 1)] | length == 100000)
		and ([.sites[] | select(.delta == .live_after)] | length == 50000)
		and .sites[0].frames == ["f49999"]' "$tmp/many.json" >/dev/null; echo $?)" \
	"rc $rc: $(head -c 300 "$tmp/many.json")"
finish
