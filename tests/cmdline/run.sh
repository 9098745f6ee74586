#!/usr/bin/env bash
# Processes told apart by their command line (issue "real servers", item
# 17): every PostgreSQL process's comm is "postgres" and a pyenv tree's is
# "bash". The snapshot's "cmdline", top's process line and processes view,
# record's track name and serve's tally_process_info label say it as ps
# does: arguments joined by spaces, odd bytes as \xNN, cut at 255 bytes with
# "...". A PostgreSQL backend's, where one is installed, is the title it
# writes over its argv. TALLY=... runs another build.
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=${TALLY:-$PWD/$BUILD/tally}
. tests/lib.sh

need_root cmdline
export LC_ALL=C
long=$(printf 'x%.0s' $(seq 400))
# two sleeps (one comm, two command lines), an argv[0] with a tab, a long one
TREE="sleep 1.5 & sleep 1.6 & (exec -a \$'odd\\tname' sleep 1.7) & sh -c 'sleep 1.8; : $long' & wait"

# cmd_of JSON COMM PREFIX: the cmdline of the process by COMM whose starts so
cmd_of() {
	jq -r --arg c "$2" --arg p "$3" '[.processes[].target | select(.comm == $c and
		((.cmdline // "") | startswith($p))) | .cmdline][0] // ""' "$1" 2>/dev/null
}

timeout 60 "$TALLY" snapshot -o "$tmp/s.json" -- bash -c "$TREE" >/dev/null 2>"$tmp/s.err"
rc=$?
check "snapshot: two processes of one comm, each with its own cmdline" \
	"$([ $rc -eq 0 ] && [ "$(cmd_of "$tmp/s.json" sleep 'sleep 1.5')" = "sleep 1.5" ] &&
		[ "$(cmd_of "$tmp/s.json" sleep 'sleep 1.6')" = "sleep 1.6" ]; echo $?)" \
	"rc=$rc $(jq -c '[.processes[].target | [.comm, .cmdline]]' "$tmp/s.json" 2>&1 | head -c 600)"
check "snapshot: a tab in argv[0] escaped as \\x09" \
	"$([ "$(cmd_of "$tmp/s.json" sleep 'odd')" = 'odd\x09name 1.7' ]; echo $?)" \
	"got '$(cmd_of "$tmp/s.json" sleep 'odd')'"
c=$(cmd_of "$tmp/s.json" sh 'sh -c sleep 1.8')
check "snapshot: a command line past 255 bytes cut there with ..." \
	"$([ ${#c} -le 255 ] && [ ${#c} -ge 240 ] && [ "${c: -3}" = "..." ]; echo $?)" "got ${#c} bytes: $c"
check "snapshot: the root's target says its cmdline too" \
	"$(jq -e '.target.cmdline | startswith("bash -c sleep 1.5 & sleep 1.6")' "$tmp/s.json" >/dev/null
		echo $?)" "$(jq -c .target "$tmp/s.json" 2>&1 | head -c 300)"

timeout 60 "$TALLY" top -b -n 2 -i 500 -- bash -c "$TREE" >"$tmp/t.txt" 2>"$tmp/t.err"
check "top -b: the process lines end with the command line" \
	"$(grep -q '^process [0-9]* sleep: running, cmd: sleep 1\.6$' "$tmp/t.txt"; echo $?)" \
	"$(grep '^process' "$tmp/t.txt" | head -5)"
timeout 60 "$TALLY" top -b -n 2 -i 500 --view processes -- bash -c "$TREE" >"$tmp/p.txt" 2>&1
check "top --view processes: a row's name is COMM[PID] and its command line" \
	"$(grep -Eq '^ +[0-9]+ sleep\[[0-9]+\] sleep 1\.6 ' "$tmp/p.txt"; echo $?)" "$(head -c 600 "$tmp/p.txt")"

timeout 60 "$TALLY" record -o "$tmp/r.json" -- bash -c "$TREE" >/dev/null 2>"$tmp/r.err"
check "record: a process's track is named by its command line" \
	"$(jq -e '[.traceEvents[] | select(.name == "process_name") | .args.name] | index("sleep 1.6") != null' \
		"$tmp/r.json" >/dev/null; echo $?)" \
	"$(jq -c '[.traceEvents[] | select(.name == "process_name") | .args.name]' "$tmp/r.json" 2>&1 | head -c 400)"

port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$TALLY" serve --listen "127.0.0.1:$port" -- bash -c "$TREE" >/dev/null 2>"$tmp/v.err" &
sv=$!
pids+=("$sv")
for _ in $(seq 50); do
	curl -s "127.0.0.1:$port/metrics" >"$tmp/m.txt" 2>/dev/null
	grep -q 'cmdline="sleep 1.6"' "$tmp/m.txt" && break
	sleep 0.1
done
check "serve: tally_process_info carries a cmdline label, the other series not" \
	"$(grep -q '^tally_process_info{pid="[0-9]*",comm="sleep",cmdline="sleep 1.6",' "$tmp/m.txt" &&
		! grep -v '^tally_\(process_\)\?info{' "$tmp/m.txt" | grep -q cmdline=; echo $?)" \
	"$(grep info "$tmp/m.txt" | head -5)"
kill -INT "$sv"
wait "$sv" 2>/dev/null

# PostgreSQL: a backend's command line is the title it writes
PG=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | tail -1)
if [ -x "$PG/initdb" ] && id postgres >/dev/null 2>&1 && command -v psql >/dev/null; then
	pg=$(mktemp -d /tmp/tally-pg.XXXXXX)
	chown postgres "$pg"
	suite_cleanup() { # a fast shutdown, waited for (10 s at most) before its files go
		[ -n "${pm:-}" ] && kill -INT "$pm" 2>/dev/null &&
			for _ in $(seq 100); do [ -d /proc/"$pm" ] || break; sleep 0.1; done
		rm -rf "$pg"
	}
	su postgres -c "$PG/initdb -N -D $pg/data -A trust -U bench" >"$tmp/initdb.log" 2>&1
	pport=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
	su postgres -c "$PG/postgres -D $pg/data -p $pport -k $pg -c listen_addresses=127.0.0.1" \
		>"$tmp/pg.log" 2>&1 &
	for _ in $(seq 100); do pm=$(head -1 "$pg/data/postmaster.pid" 2>/dev/null) && [ -n "$pm" ] &&
		psql -h 127.0.0.1 -p "$pport" -U bench -d postgres -c 'select 1' >/dev/null 2>&1 && break; sleep 0.1; done
	# a backend busy until the end (the shutdown ends it), and tally only
	# once its title says SELECT: the title, not the clock, says it is there
	psql -h 127.0.0.1 -p "$pport" -U bench -d postgres -c 'select pg_sleep(600)' >/dev/null 2>&1 &
	pids+=("$!")
	busy=
	for _ in $(seq 200); do
		for c in $(cat /proc/"$pm"/task/*/children 2>/dev/null); do
			tr '\0' ' ' </proc/"$c"/cmdline 2>/dev/null | grep -q '^postgres: bench postgres .* SELECT' && busy=$c
		done
		[ -n "$busy" ] && break
		sleep 0.05
	done
	timeout 30 "$TALLY" snapshot -p "$pm" -f -d 1 -o "$tmp/pg.json" 2>"$tmp/pgs.err"
	check "PostgreSQL: a backend says its role, database, client and state, as ps does" \
		"$(jq -e '[.processes[].target | select(.comm == "postgres") | .cmdline] |
			any(test("^postgres: bench postgres 127[.]0[.]0[.]1[(][0-9]+[)] SELECT$")) and
			any(. == "postgres: checkpointer")' "$tmp/pg.json" >/dev/null; echo $?)" \
		"backend in SELECT before tally: ${busy:-none in 10 s}; $(jq -c '[.processes[].target | [.comm, .cmdline]]' "$tmp/pg.json" 2>&1 | head -c 600) $(head -c 200 "$tmp/pgs.err")"
else
	skip "PostgreSQL: a backend says its role, database, client and state" "PostgreSQL (initdb, psql, the postgres user) is not installed: scripts/setup.sh installs it"
fi
finish
