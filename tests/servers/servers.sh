# shellcheck shell=bash
# Real servers from Debian's packages, each started on the loopback in a
# directory of its own under $tmp, for tests/servers/run.sh and chaos.sh
# (sourced after tests/lib.sh): nginx (a master and two workers), Redis,
# memcached, PostgreSQL and python3's http.server; with PRELOAD=1 on
# libtally_alloc.so, without on the allocator they ship with. Each start
# function waits until the server answers and sets SRV_PID (the root
# process); every process it starts is killed at the script's exit. The
# loads are bounded in time and count and say how they went in their files.

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n1)}

# have_server NAME: the server's programs are installed (scripts/setup.sh
# installs them; a machine without them skips that server, and says so)
have_server() {
	case $1 in
	nginx) command -v nginx && command -v wrk ;;
	redis) command -v redis-server && command -v redis-benchmark && command -v redis-cli ;;
	memcached) command -v memcached ;;
	postgres) [ -x "$PG_BIN/postgres" ] && command -v pgbench && id postgres ;;
	python) command -v python3 && command -v wrk ;;
	esac >/dev/null 2>&1
}

preload_env() { # PRELOAD: the env arguments that put libtally_alloc.so in
	if [ "${1:-0}" = 1 ]; then echo "LD_PRELOAD=$LIB"; else echo "TALLY_UNUSED=1"; fi
}

wait_tcp() { # PORT: until something accepts on 127.0.0.1:PORT, 10 s at most
	for _ in $(seq 100); do
		(exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null && return 0
		sleep 0.1
	done
	return 1
}

children_of() { # PID: its children's pids, one a line
	cat /proc/"$1"/task/*/children 2>/dev/null | tr ' ' '\n' | sed '/^$/d'
}

# nginx_start DIR PORT PRELOAD: a master and two workers serving a 4 KiB file
nginx_start() {
	local d=$1 port=$2
	mkdir -p "$d/logs" "$d/tmp" "$d/html"
	head -c 4096 /dev/urandom | base64 >"$d/html/index.html"
	cat >"$d/nginx.conf" <<-EOF
		daemon off;
		master_process on;
		worker_processes 2;
		pid $d/nginx.pid;
		error_log $d/logs/error.log notice;
		events { worker_connections 512; }
		http {
		  access_log off;
		  client_body_temp_path $d/tmp/body; proxy_temp_path $d/tmp/proxy;
		  fastcgi_temp_path $d/tmp/fcgi; uwsgi_temp_path $d/tmp/uwsgi; scgi_temp_path $d/tmp/scgi;
		  server { listen 127.0.0.1:$port; root $d/html; location / { } }
		}
	EOF
	env "$(preload_env "$3")" nginx -c "$d/nginx.conf" -p "$d" 2>"$d/stderr" &
	SRV_PID=$!
	pids+=("$SRV_PID")
	wait_tcp "$port" || return 1
	for _ in $(seq 50); do [ "$(children_of "$SRV_PID" | wc -l)" -ge 2 ] && return 0; sleep 0.1; done
	return 1
}

# nginx_died DIR: lines of the master's log that say a worker died
nginx_died() { grep -E 'exited on signal|core dumped' "$1/logs/error.log" 2>/dev/null; }

# wrk_load OUT PORT SECS [CONNS]: a bounded load; OUT gets wrk's report
wrk_load() {
	timeout $(($3 + 20)) wrk -t2 -c"${4:-10}" -d"$3"s --timeout 2s "http://127.0.0.1:$2/" >"$1" 2>&1
}
wrk_rate() { sed -n 's/^Requests\/sec: *\([0-9.]*\).*/\1/p' "$1"; }
# wrk_clean OUT: no socket errors, no non-2xx answers, some requests served
wrk_clean() {
	! grep -qE 'Socket errors|Non-2xx' "$1" && [ -n "$(wrk_rate "$1")" ]
}

# redis_start DIR PORT PRELOAD
redis_start() {
	mkdir -p "$1"
	env "$(preload_env "$3")" redis-server --port "$2" --bind 127.0.0.1 --save '' \
		--appendonly no --dir "$1" --logfile "$1/redis.log" &
	SRV_PID=$!
	pids+=("$SRV_PID")
	for _ in $(seq 100); do
		[ "$(timeout 2 redis-cli -p "$2" ping 2>/dev/null)" = PONG ] && return 0
		kill -0 "$SRV_PID" 2>/dev/null || return 1
		sleep 0.1
	done
	return 1
}
# redis_load OUT PORT REQUESTS: redis-benchmark's SET/GET/LPUSH/INCR, then a
# value written and read back whole (sds' usable tail carries data)
redis_load() {
	timeout 60 redis-benchmark -p "$2" -q -n "$3" -c 10 -t set,get,lpush,incr -d 100 >"$1" 2>&1 || return 1
	local v
	v=$(head -c 3000 /dev/urandom | base64 -w0)
	timeout 5 redis-cli -p "$2" set tally:check "$v" >/dev/null &&
		[ "$(timeout 5 redis-cli -p "$2" get tally:check)" = "$v" ] &&
		timeout 5 redis-cli -p "$2" append tally:check "tail" >/dev/null &&
		[ "$(timeout 5 redis-cli -p "$2" get tally:check)" = "${v}tail" ]
}

# memcached_start PORT PRELOAD [CMD-PREFIX...]: four worker threads
memcached_start() {
	local port=$1 pre=$2
	shift 2
	"$@" env "$(preload_env "$pre")" memcached -l 127.0.0.1 -p "$port" -U 0 -t 4 -u root -m 64 &
	SRV_PID=$!
	pids+=("$SRV_PID")
	wait_tcp "$port"
}
# memcached_load PORT N: N sets and gets of values of 100..4000 bytes over
# four connections, each get checked; prints "ok N" or what went wrong
memcached_load() {
	timeout 60 python3 - "$1" "$2" <<-'EOF'
		import socket, sys, threading
		port, n = int(sys.argv[1]), int(sys.argv[2])
		bad = []
		def worker(k):
		    s = socket.create_connection(("127.0.0.1", port), timeout=5)
		    f = s.makefile("rb")
		    for i in range(n // 4):
		        key = b"k%d_%d" % (k, i % 500)
		        val = bytes([65 + (i % 26)]) * (100 + (i * 37) % 3900)
		        s.sendall(b"set %s 0 0 %d\r\n%s\r\n" % (key, len(val), val))
		        if f.readline() != b"STORED\r\n": bad.append("set"); return
		        s.sendall(b"get %s\r\n" % key)
		        head = f.readline()
		        got = f.read(len(val) + 2)[:-2]
		        if f.readline() != b"END\r\n" or got != val: bad.append("get " + head.decode()); return
		    s.close()
		t = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
		[x.start() for x in t]; [x.join() for x in t]
		print("bad " + ",".join(bad) if bad else "ok %d" % n)
	EOF
}

# pg_start DIR PORT PRELOAD: a cluster of its own (trust on the loopback)
pg_start() {
	local d=$1 port=$2
	mkdir -p "$d/sock"
	chown -R postgres "$d"
	chmod 755 "$d" "$tmp"
	runuser -u postgres -- "$PG_BIN/initdb" -D "$d/data" -A trust -U postgres >"$d/initdb.log" 2>&1 ||
		return 1
	runuser -u postgres -- env "$(preload_env "$3")" "$PG_BIN/postgres" -D "$d/data" -p "$port" \
		-k "$d/sock" -c listen_addresses=127.0.0.1 -c shared_buffers=16MB \
		-c max_connections=20 >"$d/postgres.log" 2>&1 &
	SRV_PID=$!
	pids+=("$SRV_PID")
	wait_tcp "$port" || return 1
	# runuser's child is the postmaster
	local c
	for _ in $(seq 50); do
		c=$(children_of "$SRV_PID" | head -n1)
		[ -n "$c" ] && [ "$(cat /proc/"$c"/comm 2>/dev/null)" = postgres ] && SRV_PID=$c && break
		[ "$(cat /proc/"$SRV_PID"/comm 2>/dev/null)" = postgres ] && break
		sleep 0.1
	done
	timeout 60 pgbench -h 127.0.0.1 -p "$port" -U postgres -i -s 1 postgres >"$d/pgbench-init.log" 2>&1
}
# pg_load OUT PORT SECS: pgbench's TPC-B-like load, four clients
pg_load() {
	timeout $(($3 + 30)) pgbench -h 127.0.0.1 -p "$2" -U postgres -c 4 -j 2 -T "$3" postgres >"$1" 2>&1 &&
		grep -q '^number of failed transactions: 0' "$1"
}
pg_died() { grep -E 'terminated by signal|was terminated' "$1/postgres.log" 2>/dev/null; }

# python_start DIR PORT: python3 -m http.server (on glibc's malloc)
python_start() {
	mkdir -p "$1/www"
	head -c 2048 /dev/urandom | base64 >"$1/www/index.html"
	python3 -m http.server "$2" --bind 127.0.0.1 --directory "$1/www" >"$1/log" 2>&1 &
	SRV_PID=$!
	pids+=("$SRV_PID")
	wait_tcp "$2"
}

alive() { # PID...: every one still running (not a zombie)
	local p
	for p in "$@"; do
		[ -d /proc/"$p" ] && ! grep -q '^State:.*Z' /proc/"$p"/status 2>/dev/null || return 1
	done
}

# exact_or_flagged DOC STDERR: every process of the document is exact, or
# says why it is not and has a line on tally's stderr naming its pid; the
# document's tree.exact is false exactly when one of them is not. Prints
# what is wrong, nothing when all is well.
exact_or_flagged() {
	jq -r '.processes as $p
		| ($p | map(select(.exact != true))) as $bad
		| (if (.tree.exact != ($bad | length == 0)) then "tree.exact is \(.tree.exact) with \($bad | length) inexact" else empty end),
		  ($bad[] | if (.inexact_why | type) != "array" and (.inexact_why | type) != "string" then "pid \(.target.pid): not exact and no reason" else "FLAG \(.target.pid)" end)' \
		"$1" 2>&1 | while read -r w pid; do
		if [ "$w" = FLAG ]; then
			grep -q "$pid" "$2" || echo "pid $pid: not exact, nothing on stderr"
		else
			echo "$w $pid"
		fi
	done
}

# At the script's exit (tests/lib.sh kills $pids): their descendants first,
# nginx's workers and PostgreSQL's backends, which would live on, orphaned,
# holding the port.
descendants() { # PID: every descendant's pid, deepest last
	local c
	for c in $(children_of "$1"); do
		echo "$c"
		descendants "$c"
	done
}
suite_cleanup() {
	local p all=()
	for p in "${pids[@]}"; do all+=($(descendants "$p")); done
	[ ${#all[@]} -gt 0 ] && kill -9 "${all[@]}" 2>/dev/null
}
# (before tests/lib.sh's own cleanup, which kills the roots first)
trap 'suite_cleanup; lib_cleanup' EXIT
