#!/usr/bin/env bash
# Real servers from Debian's packages under tally (root): nginx with a master
# and two workers under wrk, Redis under redis-benchmark (preloaded with
# libtally_alloc, and as it ships, on jemalloc), memcached under a checking
# client, PostgreSQL under pgbench and python3's http.server under wrk, all on
# the loopback with bounded loads. For each: the clients get the same answers
# as untraced (no socket error, every value read back whole), no process of
# the server dies, every tally command exits 0 with a document its readers
# take, and every figure is exact or flagged with its reason in the document
# and on stderr. Prints an "info" table (throughput traced/untraced, exact or
# why, tally's peak RSS), then "N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
T=$PWD/$BUILD/tally
LIB=$PWD/$BUILD/libtally_alloc.so
PPROF=$PWD/$BUILD/pprof
SECS=${SERVERS_LOAD_SECS:-3}
. tests/lib.sh
. tests/servers/servers.sh
need_root servers
chmod 755 "$tmp" # the servers' workers run as www-data, postgres
rows=()

skip_server() { # SERVER CHECKS: the server is not installed here (a failure under CI)
	skip "$1 ($2 checks)" "not installed (scripts/setup.sh installs it)" "$2"
}

# traced NAME CMD...: tally CMD with its stderr in $tmp/NAME.err, its peak RSS
# (KiB) in $tmp/NAME.rss; returns tally's status
traced() {
	local name=$1
	shift
	/usr/bin/time -f %M -o "$tmp/$name.rss" "$T" "$@" 2>"$tmp/$name.err"
}
rss() { tail -n1 "$tmp/$1.rss" 2>/dev/null; }

# snap_checks NAME WHAT: the snapshot $tmp/NAME.json after `traced NAME`
# returned RC: tally exited 0, the document parses, every figure exact or
# flagged; echoes "exact" or the reasons, for the table
snap_checks() {
	local name=$1 what=$2 rc=$3 w
	check "$what: tally exits 0 with a JSON document" \
		"$([ "$rc" -eq 0 ] && jq -e .processes "$tmp/$name.json" >/dev/null 2>&1; echo $?)" \
		"rc=$rc $(head -c 400 "$tmp/$name.err")"
	w=$(exact_or_flagged "$tmp/$name.json" "$tmp/$name.err")
	check "$what: every process exact, or flagged with its reason in the document and on stderr" \
		"$([ -z "$w" ]; echo $?)" "$w"
	check "$what: no negative byte figure" \
		"$(jq -e '[.processes[] | .stats // {} | to_entries[] | select((.value | type) == "number" and .value < 0)] | length == 0' \
			"$tmp/$name.json" >/dev/null 2>&1; echo $?)" \
		"$(jq -c '[.processes[] | {pid: .target.pid, stats}]' "$tmp/$name.json" 2>&1 | head -c 600)"
}
why() { # NAME: "exact", or the reasons the document gives
	jq -r '[.processes[] | select(.exact != true) | "\(.target.pid): \(.inexact_why)"] |
		if length == 0 then "exact" else join("; ") end' "$tmp/$1.json" 2>/dev/null | head -c 200
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "-" }'; }

# ---------------------------------------------------------------- nginx
if have_server nginx; then
	d=$tmp/nginx
	nginx_start "$d" 18010 1
	check "nginx (preloaded): master and two workers serve" $? "$(cat "$d/stderr")"
	m=$SRV_PID
	workers=$(children_of "$m" | tr '\n' ' ')
	wrk_load "$tmp/n0.wrk" 18010 "$SECS"
	wrk_load "$tmp/n1.wrk" 18010 "$SECS" &
	lp=$!
	traced nsnap snapshot -p "$m" -f -d "$((SECS - 1))" -o "$tmp/nsnap.json"
	snap_checks nsnap "nginx: snapshot -p MASTER -f under wrk" $?
	wait "$lp"
	check "nginx: wrk's answers under tally as untraced (no socket error, all 2xx)" \
		"$(wrk_clean "$tmp/n0.wrk" && wrk_clean "$tmp/n1.wrk"; echo $?)" "$(tail -n 5 "$tmp/n1.wrk")"
	n=$(jq '[.processes[] | select(.target.comm == "nginx")] | length' "$tmp/nsnap.json" 2>/dev/null)
	check "nginx: the snapshot lists the master and both workers" "$([ "${n:-0}" -eq 3 ]; echo $?)" "$n processes"
	rows+=("nginx (preloaded)|$(ratio "$(wrk_rate "$tmp/n1.wrk")" "$(wrk_rate "$tmp/n0.wrk")")|$(why nsnap)|$(rss nsnap)")

	timeout 30 "$T" top -b -p "$m" -f -n 2 -i 500 >"$tmp/ntop.txt" 2>"$tmp/ntop.err"
	check "nginx: top -b -p MASTER -f: two frames, exit 0" \
		"$([ $? -eq 0 ] && [ "$(grep -c '^--- frame' "$tmp/ntop.txt")" -eq 2 ]; echo $?)" \
		"$(head -c 400 "$tmp/ntop.err")"

	wrk_load "$tmp/n2.wrk" 18010 "$SECS" &
	lp=$!
	traced nrec record -p "$m" -f -d 2 -o "$tmp/nrec.json"
	rc=$?
	wait "$lp"
	w=$(for p in $workers; do
		jq -e --argjson p "$p" '[.traceEvents[] | select(.ph == "C" and .pid == $p)] | length > 0' \
			"$tmp/nrec.json" >/dev/null 2>&1 || echo "worker $p: no counters"
	done)
	check "nginx: record -p MASTER -f: a trace with each worker's counters" \
		"$([ $rc -eq 0 ] && [ -z "$w" ]; echo $?)" "rc=$rc $w $(head -c 300 "$tmp/nrec.err")"

	"$T" serve -p "$m" -f --listen 127.0.0.1:18011 2>"$tmp/nserve.err" &
	sp=$!
	pids+=("$sp")
	# until /metrics has each process's figures (a first answer may come
	# before serve has read them), 20 s at most; then the master's and each
	# worker's live bytes must be there, by PID
	nomiss() {
		local p
		for p in $m $workers; do
			grep -q "^tally_process_live_bytes{pid=\"$p\"" "$tmp/nserve.txt" || echo "pid $p: no live bytes"
		done
	}
	for _ in $(seq 100); do
		curl -sf -o "$tmp/nserve.txt" http://127.0.0.1:18011/metrics && [ -z "$(nomiss)" ] && break
		sleep 0.2
	done
	miss=$(nomiss)
	check "nginx: serve -p MASTER -f: /metrics with the master's and each worker's live bytes" \
		"$([ -z "$miss" ]; echo $?)" \
		"$miss $(grep '^tally_process_live_bytes' "$tmp/nserve.txt" | head -c 300) $(head -c 300 "$tmp/nserve.err")"
	kill -INT "$sp"
	wait "$sp"
	check "nginx: serve exits 0 on SIGINT" $? "$(head -c 300 "$tmp/nserve.err")"

	w1=${workers%% *}
	wrk_load "$tmp/n3.wrk" 18010 "$SECS" &
	lp=$!
	traced nprof profile -p "$w1" -d 2 -o "$tmp/nprof.pb.gz"
	rc=$?
	wait "$lp"
	"$PPROF" -symbolize=none -top -sample_index=alloc_space "$tmp/nprof.pb.gz" >"$tmp/nprof.txt" 2>&1
	check "nginx: profile -p WORKER: pprof reads it and names nginx's functions (ngx_*)" \
		"$([ $rc -eq 0 ] && grep -q ' ngx_' "$tmp/nprof.txt"; echo $?)" \
		"rc=$rc $(head -c 600 "$tmp/nprof.txt") $(head -c 300 "$tmp/nprof.err")"

	kill -QUIT "$m"
	wait "$m"
	rc=$?
	check "nginx: every process alive through it all, the master ends with status 0" \
		"$([ $rc -eq 0 ] && [ -z "$(nginx_died "$d")" ]; echo $?)" "rc=$rc $(nginx_died "$d")"

	# as it ships, on glibc's malloc: a worker injected under load
	d=$tmp/nginx-glibc
	nginx_start "$d" 18012 0
	m=$SRV_PID
	w1=$(children_of "$m" | head -n1)
	wrk_load "$tmp/g0.wrk" 18012 "$SECS"
	wrk_load "$tmp/g1.wrk" 18012 "$SECS" &
	lp=$!
	# the worker (nobody) opens tally's library itself: from a copy it can
	# read when the checkout is not open to it (a clone under a 0700
	# directory); tests/inject checks the refusal that says so
	tw=$T
	if ! runuser -u nobody -- test -r "$(dirname "$T")/libtally_interpose.so" 2>/dev/null; then
		mkdir -p "$tmp/bin" && cp "$T" "$(dirname "$T")"/libtally*.so "$tmp/bin/" && tw=$tmp/bin/tally
	fi
	T=$tw traced ginj snapshot -p "$w1" --inject -d "$((SECS - 1))" -o "$tmp/ginj.json"
	snap_checks ginj "nginx on glibc: snapshot -p WORKER --inject under wrk" $?
	wait "$lp"
	check "nginx on glibc: wrk's answers with the worker injected" \
		"$(wrk_clean "$tmp/g1.wrk"; echo $?)" "$(tail -n 5 "$tmp/g1.wrk")"
	rows+=("nginx --inject worker|$(ratio "$(wrk_rate "$tmp/g1.wrk")" "$(wrk_rate "$tmp/g0.wrk")")|$(why ginj)|$(rss ginj)")
	kill -QUIT "$m"
	wait "$m"
	rc=$?
	check "nginx on glibc: no process died, the master ends with status 0" \
		"$([ $rc -eq 0 ] && [ -z "$(nginx_died "$d")" ]; echo $?)" "rc=$rc $(nginx_died "$d")"
else
	skip_server nginx 17
fi

# ---------------------------------------------------------------- Redis
if have_server redis; then
	redis_start "$tmp/redis" 18020 1
	check "redis (preloaded): starts and answers" $? "$(tail -n 3 "$tmp/redis/redis.log")"
	r=$SRV_PID
	start=$(date +%s%N)
	redis_load "$tmp/r0.bench" 18020 20000
	rc=$?
	t0=$(($(date +%s%N) - start))
	check "redis (preloaded): redis-benchmark runs, a 4 KB value read back whole after APPEND" $rc \
		"$(tail -n 3 "$tmp/r0.bench")"
	(
		s=$(date +%s%N)
		redis_load "$tmp/r1.bench" 18020 20000 && echo $(($(date +%s%N) - s)) >"$tmp/r1.secs"
	) &
	lp=$!
	traced rsnap snapshot -p "$r" -d 2 -o "$tmp/rsnap.json"
	snap_checks rsnap "redis (preloaded): snapshot -p under redis-benchmark" $?
	wait "$lp"
	check "redis (preloaded): the same answers under tally" $? "$(tail -n 3 "$tmp/r1.bench")"
	rows+=("redis (preloaded)|$(ratio "$t0" "$(cat "$tmp/r1.secs" 2>/dev/null)")|$(why rsnap)|$(rss rsnap)")
	timeout 5 redis-cli -p 18020 shutdown nosave >/dev/null 2>&1
	wait "$r"
	check "redis (preloaded): ends with status 0" $? "$(tail -n 3 "$tmp/redis/redis.log")"

	redis_start "$tmp/redis-je" 18021 0
	r=$SRV_PID
	redis_load "$tmp/r2.bench" 18021 5000 &
	lp=$!
	traced rje snapshot -p "$r" -d 1 -o "$tmp/rje.json"
	rc=$?
	wait "$lp"
	check "redis on jemalloc: tally exits 0 and the answers are the same" \
		"$([ $rc -eq 0 ]; echo $?)" "rc=$rc $(head -c 300 "$tmp/rje.err")"
	check "redis on jemalloc: the snapshot names jemalloc and says its heap is not traced" \
		"$(jq -e '.target.allocator == "jemalloc" and .exact == false' "$tmp/rje.json" >/dev/null 2>&1 &&
			grep -qi jemalloc "$tmp/rje.err" && ! grep -q -- '--inject' "$tmp/rje.err"; echo $?)" \
		"$(jq -c '{target: .target.allocator, exact, inexact_why}' "$tmp/rje.json" 2>&1) $(head -c 300 "$tmp/rje.err")"
	timeout 30 "$T" top -b -n 1 -p "$r" >"$tmp/rjetop.txt" 2>&1
	check "redis on jemalloc: top's header names jemalloc, untraced, and the reason" \
		"$(grep -q '^allocator: jemalloc (not traced' "$tmp/rjetop.txt" &&
			grep -q 'NOT exact: .*\[allocator_not_traced\]' "$tmp/rjetop.txt"; echo $?)" \
		"$(head -c 600 "$tmp/rjetop.txt")"
	rows+=("redis on jemalloc|-|$(why rje)|$(rss rje)")
	timeout 5 redis-cli -p 18021 shutdown nosave >/dev/null 2>&1
	wait "$r"
	check "redis on jemalloc: ends with status 0" $? ""
else
	skip_server redis 10
fi

# ---------------------------------------------------------------- memcached
if have_server memcached; then
	# started by tally and ended by SIGTERM while its worker threads still
	# hold records: the end must hand every heap's records over
	traced msnap snapshot -o "$tmp/msnap.json" -- memcached -l 127.0.0.1 -p 18030 -U 0 -t 4 -u root -m 64 &
	tp=$!
	pids+=("$tp")
	wait_tcp 18030
	mc=
	for p in $(pgrep -x memcached); do grep -q 18030 /proc/"$p"/cmdline 2>/dev/null && mc=$p; done
	out=$(memcached_load 18030 4000)
	check "memcached under tally: every value read back whole" "$([ "$out" = "ok 4000" ]; echo $?)" "$out"
	kill -TERM "$mc"
	wait "$tp"
	snap_checks msnap "memcached: snapshot -- memcached, load, SIGTERM" $?
	check "memcached: the end hands every heap's records over: exact, equal to the allocator's own" \
		"$(jq -e '.processes[0] | .exact == true and .stats.live == .stats_inprocess.live and .stats.mapped == .stats_inprocess.mapped' \
			"$tmp/msnap.json" >/dev/null 2>&1; echo $?)" \
		"$(jq -c '.processes[0] | {exact, inexact_why, live: .stats.live, own: .stats_inprocess.live, mapped: .stats.mapped, own_mapped: .stats_inprocess.mapped}' "$tmp/msnap.json" 2>&1)"
	rows+=("memcached (started by tally)|-|$(why msnap)|$(rss msnap)")
else
	skip_server memcached 5
fi

# ---------------------------------------------------------------- PostgreSQL
if have_server postgres; then
	d=$tmp/pg
	pg_start "$d" 18040 1
	check "postgres (preloaded): a cluster starts, pgbench -i fills it" $? \
		"$(tail -n 5 "$d/postgres.log" "$d/pgbench-init.log" 2>&1)"
	pm=$SRV_PID
	pg_load "$tmp/p0.bench" 18040 "$SECS"
	pg_load "$tmp/p1.bench" 18040 "$SECS" &
	lp=$!
	traced psnap snapshot -p "$pm" -f -d "$((SECS - 1))" -o "$tmp/psnap.json"
	snap_checks psnap "postgres: snapshot -p POSTMASTER -f under pgbench" $?
	wait "$lp"
	check "postgres: pgbench under tally: no failed transaction" $? "$(tail -n 5 "$tmp/p1.bench")"
	n=$(jq '.processes | length' "$tmp/psnap.json" 2>/dev/null)
	check "postgres: the tree's backends are listed (more than the postmaster's 5 helpers)" \
		"$([ "${n:-0}" -gt 5 ]; echo $?)" "$n processes"
	tps() { sed -n 's/^tps = \([0-9.]*\).*/\1/p' "$1" | head -n1; }
	rows+=("postgres (preloaded)|$(ratio "$(tps "$tmp/p1.bench")" "$(tps "$tmp/p0.bench")")|$(why psnap)|$(rss psnap)")

	pg_load "$tmp/p2.bench" 18040 "$SECS" &
	lp=$!
	traced prec record -p "$pm" -f -d 2 -o "$tmp/prec.json"
	rc=$?
	wait "$lp"
	n=$(jq '[.traceEvents[] | select(.ph == "C") | .pid] | unique | length' "$tmp/prec.json" 2>/dev/null)
	check "postgres: record -p POSTMASTER -f: counters for the backends too, not only the root" \
		"$([ $rc -eq 0 ] && [ "${n:-0}" -gt 1 ]; echo $?)" "rc=$rc, counters for $n processes"
	runuser -u postgres -- "$PG_BIN/pg_ctl" -D "$d/data" stop -m fast >"$tmp/pgstop.log" 2>&1
	rc=$?
	for _ in $(seq 100); do alive "$pm" || break; sleep 0.1; done
	check "postgres: no backend died; stopped cleanly" \
		"$([ $rc -eq 0 ] && [ -z "$(pg_died "$d")" ] && ! alive "$pm"; echo $?)" \
		"pg_ctl rc=$rc $(cat "$tmp/pgstop.log") $(pg_died "$d") $(tail -n 3 "$d/postgres.log")"
else
	skip_server postgres 8
fi

# ---------------------------------------------------------------- python3
if have_server python; then
	python_start "$tmp/py" 18050
	py=$SRV_PID
	wrk_load "$tmp/y0.wrk" 18050 "$SECS" 4
	wrk_load "$tmp/y1.wrk" 18050 "$SECS" 4 &
	lp=$!
	traced yinj snapshot -p "$py" --inject -d "$((SECS - 1))" -o "$tmp/yinj.json"
	snap_checks yinj "python3 http.server: snapshot --inject under wrk" $?
	wait "$lp"
	check "python3 http.server: wrk's answers with tally injected" \
		"$(wrk_clean "$tmp/y1.wrk"; echo $?)" "$(tail -n 5 "$tmp/y1.wrk")"
	rows+=("python3 http.server --inject|$(ratio "$(wrk_rate "$tmp/y1.wrk")" "$(wrk_rate "$tmp/y0.wrk")")|$(why yinj)|$(rss yinj)")
	# (a background job of a script starts with SIGINT ignored: SIGTERM)
	alive "$py"
	a=$?
	kill -TERM "$py"
	wait "$py"
	rc=$?
	check "python3 http.server: alive through it all, ends by SIGTERM as untraced" \
		"$([ $a -eq 0 ] && [ $rc -eq 143 ]; echo $?)" "alive=$a rc=$rc"
else
	skip_server python 6
fi

echo
echo "info: server | throughput traced/untraced | figures | tally peak RSS (KiB)"
for r in "${rows[@]}"; do echo "info: $r"; done
finish
