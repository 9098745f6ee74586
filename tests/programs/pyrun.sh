#!/usr/bin/env bash
# Execed by shim.sh: some setup work, as wrapper scripts do (enough that
# bash's allocator hands tally full batches before the exec, so that the
# Python image must be counted from zero), then work.py with Python's
# allocations through malloc.
py=$1
shift
declare -A seen
for v in $(seq 1 3000); do seen[v$v]=$((v * 3)); done
[ "${#seen[@]}" -eq 3000 ] || exit 1
export PYTHONMALLOC=malloc
exec "$py" "$(dirname "$0")/work.py" "$@"
