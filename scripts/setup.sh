#!/usr/bin/env bash
# Install the Debian packages tally needs, only those that are missing.
# Idempotent and quiet when everything is already there: `make test` and
# `make demo` call it first.
set -euo pipefail

# Build and test dependencies. The comparison allocators and tracers are
# only needed by the benchmarks, but they are small and installing them here
# keeps `make bench` a one-step command too. sqlite3 and strace are for
# tests/programs (real programs under tally, every process followed by strace).
# libclang-rt-14-dev is clang's libFuzzer (tests/fuzz), only recommended by clang.
# The servers tests/servers runs under tally, with their load generators:
# nginx-light and wrk, redis-server (redis-benchmark, redis-cli), memcached,
# postgresql (pgbench), python3 for memcached's client. prometheus (and its
# promtool) scrapes `tally serve --all` in tests/serve_all.
# bpftrace and gdb: tests/otel reads OpenTelemetry's memory probes and thread
# context with readers tally did not write. spin: tests/cut_model checks the
# cut's hand-over (alloc/cut.c) in every interleaving.
pkgs=(
	clang clang-format llvm libclang-rt-14-dev libbpf-dev bpftool libelf-dev zlib1g-dev libcmocka-dev
	systemtap-sdt-dev pkg-config make gcc g++ jq python3 coreutils
	libjemalloc2 libmimalloc2.0 libgoogle-perftools4 tmux libncurses-dev libmicrohttpd-dev curl
	sqlite3 strace time libdw-dev golang-go golang-github-google-pprof-dev
	nginx-light wrk redis-server memcached postgresql locales chromium prometheus bpftrace gdb
	spin
)
# chromium: tests/report renders `tally report`'s page headless. npm: the
# page bundles uPlot, installed below by `npm ci` from package-lock.json;
# Debian's package only where no npm is there, since it conflicts with
# NodeSource's nodejs, which carries its own npm.
command -v npm >/dev/null 2>&1 || pkgs+=(npm)
# The tracers tally is compared with (`make bench-trace`), only when asked:
# `scripts/setup.sh --bench`. bcc compiles its programs against kernel
# headers; Debian's serve for a kernel that ships none.
if [ "${1:-}" = "--bench" ]; then
	pkgs+=(bpfcc-tools heaptrack linux-headers-amd64)
fi

missing=()
for p in "${pkgs[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
		missing+=("$p")
	fi
done

# A locale whose decimal separator is a comma (tests/test_json.c: numbers
# must not follow LC_NUMERIC), made from the locales package's sources.
want_locale=0
locale -a 2>/dev/null | grep -qix 'de_DE.utf8' || want_locale=1

# uPlot, pinned by package-lock.json, into node_modules/ (ignored), once:
# the Makefile builds it into tally, and nothing is fetched at build or run
# time. Run as whoever runs setup (the checkout's owner), not through sudo.
npm_ci() {
	[ -f node_modules/uplot/dist/uPlot.iife.min.js ] && return 0
	echo "setup: npm ci (uPlot for tally report's page)" >&2
	if ! npm ci --no-audit --no-fund >>/tmp/tally-setup.log 2>&1; then
		echo "setup: npm ci failed; see /tmp/tally-setup.log" >&2
		exit 1
	fi
}
cd "$(dirname "$0")/.."

if [ ${#missing[@]} -eq 0 ] && [ $want_locale -eq 0 ]; then
	npm_ci
	exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		SUDO=sudo
	else
		echo "setup: missing packages (${missing[*]}) and not root; install them or rerun as root" >&2
		exit 1
	fi
else
	SUDO=
fi

export DEBIAN_FRONTEND=noninteractive
[ ${#missing[@]} -gt 0 ] && echo "setup: installing ${missing[*]}" >&2
if [ ${#missing[@]} -gt 0 ] && ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/tally-setup.log 2>&1; then
	# The package lists may be stale or absent on a fresh machine.
	$SUDO apt-get update -q >>/tmp/tally-setup.log 2>&1 || true
	if ! $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/tally-setup.log 2>&1; then
		echo "setup: apt-get install failed; see /tmp/tally-setup.log" >&2
		tail -n 20 /tmp/tally-setup.log >&2
		exit 1
	fi
fi
if [ $want_locale -eq 1 ] && ! $SUDO localedef -i de_DE -f UTF-8 de_DE.UTF-8 >>/tmp/tally-setup.log 2>&1; then
	echo "setup: localedef de_DE.UTF-8 failed; see /tmp/tally-setup.log" >&2
	exit 1
fi
npm_ci
