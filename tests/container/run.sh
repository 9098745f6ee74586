#!/usr/bin/env bash
# A process in a container, without a container runtime: its own mount and
# PID namespaces (unshare), its allocator on a private tmpfs at a path the
# host does not have, and a cgroup named as Docker names one. tally attaches
# by its host PID: the libraries through /proc/PID/root, exact as any late
# attach; the snapshot says both PIDs, the cgroup and the container id; top's
# header and serve's tally_info say them too. The target goes on unharmed.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
. tests/lib.sh
. tests/snapshot/heap_check.sh

need_root container
ID=$(printf '%s' 0123456789abcdef{,,,})
CG=""
for root in /sys/fs/cgroup /sys/fs/cgroup/unified; do
	if [ "$(stat -fc %T "$root" 2>/dev/null)" = cgroup2fs ]; then
		CG=$root/tally-test-$$/docker-$ID.scope
		break
	fi
done
suite_cleanup() {
	[ -n "$CG" ] && rmdir "$CG" "$(dirname "$CG")" 2>/dev/null
}

if ! command -v unshare >/dev/null; then # util-linux: on every machine setup.sh prepares
	skip "a process in its own namespaces" "unshare not installed" 8
else

	# inside: a tmpfs over /mnt (the mount namespace's own), the libraries on
	# it, python3 with them preloaded (its purger held off: quiet while it
	# waits), its PID inside printed, then it waits
	cat >"$tmp/inner.sh" <<-INNER
	#!/bin/bash
	mount -t tmpfs tally-test /mnt || exit 1
	mkdir /mnt/lib && cp "$PWD/$BUILD/libtally_alloc.so" "$PWD/$BUILD/libtally.so" /mnt/lib/ || exit 1
	exec env TALLY_ALLOC_PURGE_MS=3600000 LD_PRELOAD=/mnt/lib/libtally_alloc.so python3 -c '
	import os, sys, time
	x = [str(i) * 4 for i in range(40000)]
	print(os.getpid(), flush=True)
	sys.stdin.read()   # until the test closes its end
	print("done", len(x), flush=True)'
	INNER
	chmod +x "$tmp/inner.sh"
	mkfifo "$tmp/in"
	unshare --mount --pid --fork --propagation private "$tmp/inner.sh" <"$tmp/in" >"$tmp/out" 2>"$tmp/err" &
	upid=$!
	pids+=("$upid")
	exec 3>"$tmp/in"
	wait_line "$tmp/out" '^[0-9]+$' 60
	inner=$(head -n 1 "$tmp/out")
	# its host PID: unshare's child (inner.sh, exec'd into python3), if its
	# NSpid ends with the PID it printed. Not pgrep -f: another run of this
	# suite on the machine has a python3 with the same command line.
	host=""
	for p in $(cat "/proc/$upid/task/$upid/children" 2>/dev/null); do
		grep -qE "^NSpid:.*[[:space:]]$inner\$" "/proc/$p/status" 2>/dev/null && host=$p
	done
	check "the target runs in namespaces of its own (host pid ${host:-?}, pid $inner inside)" \
		"$([ -n "$host" ] && [ "$host" != "$inner" ] && ! [ -e "/mnt/lib/libtally_alloc.so" ]; echo $?)" \
		"$(cat "$tmp/err")"
	[ -n "$CG" ] && mkdir -p "$CG" && echo "$host" >"$CG/cgroup.procs"

	timeout 60 "$TALLY" snapshot -p "$host" -d 2 -o "$tmp/s.json" 2>"$tmp/s.err"
	rc=$?
	check "snapshot -p HOSTPID of a process in its own mount namespace: rc 0" "$rc" "$(cat "$tmp/s.err")"
	check "... exact, as a late attach is, and its figures are its allocator's own" \
		"$(jq -e '.exact and .target.attach == "running" and .target.state_read_consistent
			and .stats.live == .stats_inprocess.live and .stats.mapped == .stats_inprocess.mapped
			and .stats.balanced' "$tmp/s.json" >/dev/null; echo $?)" \
		"$(jq -c '{exact, inexact_why, target}' "$tmp/s.json" 2>&1)"
	# the terms against what the walk does not produce (heap_check.sh)
	jq .stats "$tmp/s.json" >"$tmp/s.stats" 2>&1
	heap_check "${host:-0}" "$tmp/s.stats"
	check "... its terms true to the kernel's view: mapped the allocator's mappings in smaps, the identity, Rss" \
		"$([ "$hc" = ok ]; echo $?)" "$hc"
	check "... both PIDs: the host's and the one inside its namespace ($inner)" \
		"$(jq -e --argjson h "$host" --argjson i "$inner" '.target.pid == $h and .target.ns_pid == $i' \
			"$tmp/s.json" >/dev/null; echo $?)" "$(jq -c .target "$tmp/s.json")"
	if [ -n "$CG" ]; then
		check "... its cgroup v2 path and the container id the path carries" \
			"$(jq -e --arg id "$ID" '(.target.cgroup | endswith("/docker-" + $id + ".scope"))
				and .target.container == $id' "$tmp/s.json" >/dev/null; echo $?)" \
			"$(jq -c .target "$tmp/s.json")"
	else # the kernel has cgroup v2 (every kernel this project supports): mount it
		skip "... its cgroup v2 path and the container id" "no cgroup2 mount at /sys/fs/cgroup or /sys/fs/cgroup/unified"
	fi

	timeout 60 "$TALLY" top -b -n 1 -i 200 -p "$host" >"$tmp/top.txt" 2>"$tmp/top.err"
	check "top -b -p HOSTPID: the header says its PID inside and its container" \
		"$(grep -q "pid $host, pid $inner in its namespace, ${CG:+container ${ID:0:12}, }attached" "$tmp/top.txt"; echo $?)" \
		"$(head -n 2 "$tmp/top.txt") $(cat "$tmp/top.err")"

	exec 3>&- # the target reads its end of input and goes on
	for _ in $(seq 100); do grep -q 'done' "$tmp/out" && break; sleep 0.1; done
	wait "$upid"
	rc=$?
	check "the target ends unharmed (status $rc, it printed its result)" \
		"$([ "$rc" -eq 0 ] && grep -q "done 40000" "$tmp/out"; echo $?)" "$(cat "$tmp/out" "$tmp/err")"
fi

# a library deleted on disk since the process mapped it (a package upgraded
# under it): reached through /proc/PID/map_files, the attach is as exact
mkdir -p "$tmp/gone"
cp "$PWD/$BUILD/libtally_alloc.so" "$tmp/gone/"
TALLY_ALLOC_PURGE_MS=3600000 LD_PRELOAD=$tmp/gone/libtally_alloc.so "$PWD/$BUILD/tests/tracer_workload" wait "$tmp/gone.expect" &
gpid=$!
pids+=("$gpid")
wait_file "$tmp/gone.expect"
rm -f "$tmp/gone/libtally_alloc.so"
timeout 60 "$TALLY" snapshot -p "$gpid" -d 1 -o "$tmp/gone.json" 2>"$tmp/gone.err"
check "a deleted libtally_alloc.so: found, attached, exact, each group the workload's own count" \
	"$(grep -q 'libtally_alloc.so (deleted)' "/proc/$gpid/maps" &&
		jq -e --slurpfile e "$tmp/gone.expect" '.exact and .target.allocator == "tally" and
			([.groups[] | select(.name != "root") | {(.name): .live_bytes}] | add) == $e[0].groups' \
			"$tmp/gone.json" >/dev/null; echo $?)" \
	"$(jq -c --slurpfile e "$tmp/gone.expect" '{exact, inexact_why, a: .target.allocator,
		groups: [.groups[] | {(.name): .live_bytes}], own: $e[0].groups}' "$tmp/gone.json" 2>&1) $(head -c 200 "$tmp/gone.err")"
# the workload sits in pause(), its purger held off: nothing moved since tally read it
jq .stats "$tmp/gone.json" >"$tmp/gone.stats" 2>&1
heap_check "$gpid" "$tmp/gone.stats"
check "... its terms true to the kernel's view: mapped the allocator's mappings in smaps, the identity, Rss" \
	"$([ "$hc" = ok ]; echo $?)" "$hc"
kill "$gpid" 2>/dev/null
wait "$gpid" 2>/dev/null
finish
