#!/usr/bin/env bash
# A process's end hands every heap's records over, so that its figures are
# exact, not flagged: exit() while other threads hold records in their
# batches (memcached's workers, idle at SIGTERM: only 174 records had reached
# tally, its figures 15x under the allocator's own), and _exit / _Exit,
# which skip the destructors (dash ends every sh -c so, python's os._exit
# too: each ended "without the allocator's exit hand-over").
#
# usage: BUILD=build tests/exit/run.sh   (root: BPF, uprobes)
#
# Checks:
#   memcached-*      tally snapshot -- memcached -t 4, 4000 sets over four
#                    connections, SIGTERM: exact, and equal to the allocator's
#   dash             sh -c (dash's _exit): exact, equal to the allocator's
#   python-os-exit   python3 ending in os._exit: exact, equal
#   c-Exit           _Exit through ctypes: exact, equal
#   tree             a shell's tree of shells, followed: every process exact
#   status-*         untraced, the library preloaded: _exit's status kept
# Prints "N passed, M failed". Ports: 18301.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$(realpath "$BUILD")/tally}
. tests/lib.sh

need_root exit

same_as_own() { # FILE: exact, balanced, and the allocator's own figures
	jq -e ".exact and .stats.balanced and $STATS_OWN" "$1" >/dev/null 2>&1
}
show() { jq -c '{exact, inexact_why, live: .stats.live, own: .stats_inprocess.live}' "$1" 2>&1; }

# memcached: worker threads that hold a batch each when the main one exits
mc_load() { # PORT: four connections, 1000 sets each, values of 50..3050 bytes
	python3 - "$1" <<'EOF'
import socket, sys, threading
port = int(sys.argv[1])
done = []
def worker(k):
    s = socket.create_connection(("127.0.0.1", port))
    f = s.makefile("rb")
    for i in range(1000):
        v = b"x" * (50 + (i * 37 + k * 11) % 3000)
        s.sendall(b"set k%d_%d 0 0 %d\r\n%s\r\n" % (k, i, len(v), v))
        if f.readline() != b"STORED\r\n":
            return
    done.append(k)
ts = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
[t.start() for t in ts]; [t.join() for t in ts]
sys.exit(len(done) != 4)
EOF
}
if command -v memcached >/dev/null; then
	"$TALLY" snapshot -o "$tmp/mc.json" -- memcached -p 18301 -U 0 -t 4 -l 127.0.0.1 -u root \
		>"$tmp/mc.out" 2>&1 &
	tp=$!
	pids+=("$tp")
	mp=
	for _ in $(seq 100); do
		mp=$(pgrep -P "$tp" -x memcached) && break
		sleep 0.1
	done
	for _ in $(seq 100); do
		python3 -c 'import socket; socket.create_connection(("127.0.0.1", 18301))' 2>/dev/null && break
		sleep 0.1
	done
	mc_load 18301
	check memcached-load $? "the sets failed"
	[ -n "$mp" ] && kill -TERM "$mp"
	timeout 30 tail --pid="$tp" -f /dev/null
	same_as_own "$tmp/mc.json"
	check memcached-exact $? "$(show "$tmp/mc.json") $(tail -c 300 "$tmp/mc.out")"
else
	skip "memcached-load, memcached-exact" "memcached is not installed: scripts/setup.sh installs it" 2
fi

"$TALLY" snapshot -o "$tmp/sh.json" -- sh -c 'x=$(seq 1 300); y=${#x}; echo $y >/dev/null' \
	>"$tmp/sh.out" 2>&1
same_as_own "$tmp/sh.json"
check dash $? "$(show "$tmp/sh.json")"

"$TALLY" snapshot -o "$tmp/py.json" -- python3 -c \
	'import os; a = [bytearray(1000) for i in range(3000)]; os._exit(0)' >"$tmp/py.out" 2>&1
same_as_own "$tmp/py.json"
check python-os-exit $? "$(show "$tmp/py.json")"

"$TALLY" snapshot -o "$tmp/ex.json" -- python3 -c \
	'import ctypes; a = [bytearray(100) for i in range(300)]; ctypes.CDLL(None)._Exit(0)' \
	>"$tmp/ex.out" 2>&1
same_as_own "$tmp/ex.json"
check c-Exit $? "$(show "$tmp/ex.json")"

"$TALLY" snapshot -o "$tmp/tree.json" -- sh -c \
	'for i in 1 2 3; do sh -c "x=\$(seq 1 50)"; done' >"$tmp/tree.out" 2>&1
n=$(jq '[.processes[] | select(.exact | not)] | length' "$tmp/tree.json" 2>/dev/null)
all=$(jq '.processes | length' "$tmp/tree.json" 2>/dev/null)
check tree "$([ "${n:-1}" = 0 ] && [ "${all:-0}" -ge 4 ]; echo $?)" \
	"$n of $all processes not exact: $(jq -c '[.processes[].inexact_why]' "$tmp/tree.json" 2>&1)"

# untraced: _exit is the system call, its status kept
lib=$(realpath "$BUILD/libtally_alloc.so")
LD_PRELOAD=$lib sh -c 'exit 7'
check status-dash "$([ $? -eq 7 ]; echo $?)" "sh -c 'exit 7' did not exit 7"
LD_PRELOAD=$lib python3 -c 'import os; os._exit(5)'
check status-os-exit "$([ $? -eq 5 ]; echo $?)" "os._exit(5) did not exit 5"
finish
