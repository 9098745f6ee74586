# shellcheck shell=bash
# Shared by the integration test scripts, sourced after they cd to the repo
# root: the checks' bookkeeping ("ok - NAME" / "FAIL - NAME: DETAIL", and the
# final "N passed, M failed[, K skipped]" that scripts/run-tests.sh counts), a temporary
# directory, processes to kill at exit (pids+=(...); a script may define
# suite_cleanup for more), waiting for a file or for tally's attach, and the
# skip when not root.
tmp=$(mktemp -d)
pids=()
passed=0
failed=0

lib_cleanup() {
	for p in "${pids[@]}"; do kill -9 "$p" 2>/dev/null; done
	if declare -F suite_cleanup >/dev/null; then suite_cleanup; fi
	rm -rf "$tmp"
}
trap lib_cleanup EXIT

check() { # NAME STATUS DETAIL
	if [ "$2" -eq 0 ]; then
		echo "ok - $1"
		passed=$((passed + 1))
	else
		echo "FAIL - $1: $3"
		failed=$((failed + 1))
	fi
}

wait_file() { # FILE: until it exists and is not empty, 10 s at most
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

wait_attached() { # STDERR-FILE of a `tally ... -v`: until its probes are in place
	for _ in $(seq 200); do grep -q '^tally: attached' "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

need_root() { # SUITE: without root, say so and count the suite's checks as skipped
	if [ "$(id -u)" -ne 0 ]; then
		# the checks this script makes, by their call sites (a loop's count once)
		local n
		n=$(grep -cE '^[[:space:]]*check ' "$0")
		echo "$1 tests need root (BPF, uprobes): skipped"
		echo "0 passed, 0 failed, $((n > 0 ? n : 1)) skipped"
		exit 0
	fi
}

finish() {
	echo "$passed passed, $failed failed"
	[ "$failed" -eq 0 ]
}
