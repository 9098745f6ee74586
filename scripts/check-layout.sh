#!/usr/bin/env bash
# The layout's rules (docs/ARCHITECTURE.md), checked on the tracked sources.
# Layers of user/, lowest first: util/, model/, views/ (pure); os/ and
# probes/ (the OS and the kernel); session/; cmd/. A layer includes only
# layers below it, and:
#   1. bpf/contract/ (what every side compiles against) includes nothing of
#      ours outside itself;
#   2. code that runs in the traced process (alloc/, cupti/) includes nothing
#      of user/;
#   3. user/util/ includes nothing of user/; user/model/ only util/, and no
#      libbpf, skeleton, curses or libmicrohttpd; user/views/ only model/ and
#      util/, and no libbpf or skeleton;
#   4. user/os/ includes no probes, session, views or cmd; user/probes/
#      no session, views or cmd; user/session/ no views or cmd;
#   5. no source file of the product (alloc, bpf, cupti, user, demo) over
#      600 lines (docs/STYLE.md: one concern per file);
#   6. no function of the product over 60 lines, but for the decode tables
#      listed below.
# Tests and benchmarks are collections of cases and workloads: not checked.
# Prints one line per rule and "N passed, N failed".
set -u
cd "$(dirname "$0")/.." || exit 1
MAX_FILE=600
MAX_FUNC=60
# A function that is one switch over a record format, one case per type:
# split, it would only be harder to check against the format.
EXCEPT_FUNC="user/model/replay.c:tally_replay_record"
passed=0
failed=0

check() { # name, offending lines (empty: passed)
	if [ -z "$2" ]; then
		echo "ok - $1"
		passed=$((passed + 1))
	else
		echo "not ok - $1"
		printf '%s\n' "$2" | sed 's/^/    /'
		failed=$((failed + 1))
	fi
}

includes() { # dir, forbidden pattern
	git ls-files "$1" | grep -E '\.[ch]$' | xargs grep -nE "^#include [<\"]($2)" 2>/dev/null
}

NOLIB='bpf/libbpf|bpf/bpf\.h|[a-z_]+\.skel\.h'
check "bpf/contract includes nothing of ours outside itself" "$(includes bpf/contract '\.\./')"
check "alloc and cupti (in the traced process) include nothing of user/" \
	"$(includes alloc '([.][.]/)+user/'; includes cupti '([.][.]/)+user/')"
check "user/util includes nothing of user/" "$(includes user/util '\.\./[a-z]+/')"
check "user/model includes only util, and no libbpf, skeleton, curses or microhttpd" \
	"$(includes user/model "\.\./(cmd|session|probes|target|views)/|$NOLIB|curses|microhttpd")"
check "user/views includes only model and util, and no libbpf or skeleton" \
	"$(includes user/views "\.\./(cmd|session|probes|os)/|$NOLIB")"
check "user/os includes no probes, session, views or cmd" \
	"$(includes user/os '\.\./(cmd|session|probes|views)/')"
check "user/probes includes no session, views or cmd" "$(includes user/probes '\.\./(cmd|session|views)/')"
check "user/session includes no views or cmd" "$(includes user/session '\.\./(cmd|views)/')"

PRODUCT=(alloc bpf cupti user demo)
long_files=$(git ls-files "${PRODUCT[@]}" | grep -E '\.[ch]$' | xargs wc -l | awk -v max=$MAX_FILE '$2 != "total" && $1 > max { print $2 ": " $1 " lines" }')
check "no source file over $MAX_FILE lines" "$long_files"

# a function: its signature ends at column 0 before a "{" at column 0, and
# its body ends at the next "}" at column 0
long_funcs=$(git ls-files "${PRODUCT[@]}" | grep -E '\.c$' | xargs awk -v max=$MAX_FUNC -v except="$EXCEPT_FUNC" '
	FNR == 1 { start = 0; sig = "" }
	/^\{/ { start = FNR; name = sig; next }
	/^\}/ {
		if (start) {
			n = FNR - start + 1
			fn = name; sub(/\(.*/, "", fn); sub(/.*[ *]/, "", fn)
			if (n > max && index(" " except " ", " " FILENAME ":" fn " ") == 0)
				printf "%s:%d: %s: %d lines\n", FILENAME, start, fn, n
			start = 0
		}
		next
	}
	!start && /^[a-zA-Z_].*\(/ { sig = $0 }')
check "no function over $MAX_FUNC lines (but $EXCEPT_FUNC)" "$long_funcs"

echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
