#!/usr/bin/env bash
# docs/report.png, the README's picture of `tally report`: a real report of
# docs/report_example.py (Debian's python3, two groups, a child), rendered by headless
# chromium with every host unresolvable. Root, like tally. Run from anywhere.
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
build/tally report -o "$tmp/report.html" -- /usr/bin/python3 docs/report_example.py
chromium --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$tmp/chromium" \
	--window-size=1280,3200 --virtual-time-budget=5000 \
	--screenshot="$PWD/docs/report.png" "file://$tmp/report.html" 2>/dev/null
echo "docs/report.png: $(stat -c %s docs/report.png) bytes, of a $(stat -c %s "$tmp/report.html")-byte page"
