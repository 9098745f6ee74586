#!/usr/bin/env bash
# The layout's rules (docs/ARCHITECTURE.md), checked on the tracked sources:
#   1. user/model/ is pure: it includes nothing of user/core, user/cmd or
#      user/views, nor libbpf, a skeleton, curses or libmicrohttpd;
#   2. user/views/ renders the model's figures: nothing of user/core or
#      user/cmd, nor libbpf or a skeleton;
#   3. no source file of the product (alloc, bpf, cupti, user, demo) over
#      600 lines (docs/STYLE.md: one concern per file);
#   4. no function of the product over 60 lines, but for the decode tables
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

check "user/model includes no core, cmd, views, libbpf, skeleton, curses or microhttpd" \
	"$(includes user/model '\.\./core/|\.\./cmd/|\.\./views/|bpf/libbpf|bpf/bpf\.h|[a-z_]+\.skel\.h|curses|microhttpd')"
check "user/views includes no core, cmd, libbpf or skeleton" \
	"$(includes user/views '\.\./core/|\.\./cmd/|bpf/libbpf|bpf/bpf\.h|[a-z_]+\.skel\.h')"

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
