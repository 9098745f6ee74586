# shellcheck shell=bash
# Shared by the integration test scripts, sourced after they cd to the repo
# root: the checks' bookkeeping ("ok - NAME", "FAIL - NAME: DETAIL", "skip -
# NAME: WHY", and the final "N passed, M failed, K skipped" that
# scripts/run-tests.sh counts), a temporary directory, processes to kill at
# exit (pids+=(...); a script may define suite_cleanup for more), waiting for
# a file or for tally's attach, and the refusal when not root.
#
# Skips (docs/TESTING.md): a check that cannot run here is never silent. It
# is counted and named ("skip - NAME: WHY"). Under CI (CI=true, as root) a
# machine has everything scripts/setup.sh installs and every kernel feature
# the suites use, so `skip` is a failure there; only `skip_absent`, for what
# a machine of this kind may lack (an NVIDIA GPU), stays a skip.
tmp=$(mktemp -d)
pids=()
# STATS_OWN: jq filter on a process's entry, true when its Stats equal its
# allocator's own, field for field
STATS_OWN='((.stats | del(.accounted, .balanced, .predicted_resident, .measured_resident)) == .stats_inprocess)'
passed=0
failed=0
skipped=0

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

in_ci() { [ "${CI:-}" = true ] && [ "$(id -u)" -eq 0 ]; }

skip() { # NAME WHY [COUNT]: COUNT checks (1) could not run here; a failure under CI
	local n=${3:-1}
	if in_ci; then
		echo "FAIL - $1: skipped under CI, which must run it: $2"
		failed=$((failed + n))
	else
		echo "skip - $1: $2"
		skipped=$((skipped + n))
	fi
}

skip_absent() { # NAME WHY [COUNT]: what this machine kind may lack (a GPU): a skip even under CI
	echo "skip - $1: $2"
	skipped=$((skipped + ${3:-1}))
}

wait_file() { # FILE: until it exists and is not empty, 10 s at most
	for _ in $(seq 100); do [ -s "$1" ] && return 0; sleep 0.1; done
	return 1
}

wait_line() { # FILE REGEX [SECONDS]: until a line of FILE matches (10 s at most)
	local n=$((${3:-10} * 20))
	for _ in $(seq "$n"); do grep -qE "$2" "$1" 2>/dev/null && return 0; sleep 0.05; done
	return 1
}

wait_attached() { # STDERR-FILE of a `tally ... -v`: until its probes are in place
	wait_line "$1" '^tally: attached' 10
}

need_root() { # SUITE: without root the suite cannot test what it exists for: a failure
	if [ "$(id -u)" -ne 0 ]; then
		echo "FAIL - $1: needs root (BPF, uprobes, ptrace of other processes); run it as root"
		echo "0 passed, 1 failed, 0 skipped"
		exit 1
	fi
}

finish() {
	echo "$passed passed, $failed failed, $skipped skipped"
	[ "$failed" -eq 0 ]
}
