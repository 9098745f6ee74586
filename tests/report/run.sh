#!/usr/bin/env bash
# Integration tests of `tally report` (root): the page of a workload with
# two SDK groups whose peak is mid-run, a child process and a group named
# with hostile HTML. The data the page carries are compared with the
# workload's own counts (tests/report/workload.c); then Debian's chromium
# renders it headless with every host unresolvable, and the checks read
# what a person would see in the DOM it dumps: the groups in the charts'
# legends, the charts, the flame graph's frames (the workload's function
# names), the process tree, no console message, and no markup from the
# hostile name. Each check prints "ok" or "FAIL"; the last line is
# "N passed, M failed, K skipped".
set -u
cd "$(dirname "$0")/../.." || exit 1
BUILD=${BUILD:-build}
TALLY=$PWD/$BUILD/tally
WL=$PWD/$BUILD/tests/report_workload
. tests/lib.sh

need_root report

# a group's name that would end the data's <script> element, and open an
# element, were it written raw
EVIL='</script><img src=x>&amp;<b>'

# the usage errors: one line, exit 2, nothing written
"$TALLY" report -- /bin/true >"$tmp/noo.out" 2>"$tmp/noo.err"
rc=$?
check "report without -o: exit 2, one line" \
	"$([ $rc -eq 2 ] && [ "$(wc -l <"$tmp/noo.err")" -eq 1 ]; echo $?)" \
	"rc $rc, stderr: $(head -c 300 "$tmp/noo.err")"
"$TALLY" report -o "$tmp/none/r.html" -- /bin/true >"$tmp/nodir.out" 2>"$tmp/nodir.err"
rc=$?
check "report -o in a missing directory: exit 2, one line, no file" \
	"$([ $rc -eq 2 ] && [ "$(wc -l <"$tmp/nodir.err")" -eq 1 ] && [ ! -e "$tmp/none" ]; echo $?)" \
	"rc $rc, stderr: $(head -c 300 "$tmp/nodir.err")"

# SIGINT while the target runs on: a whole page, and no temporary left
# (not under timeout(1): it would pass the SIGINT to the target's group too)
mkdir -p "$tmp/int"
"$TALLY" report -v -o "$tmp/int/r.html" -- sleep 60 2>"$tmp/int.err" &
tpid=$!
pids+=("$tpid")
wait_attached "$tmp/int.err"
kill -INT "$tpid"
wait "$tpid"
rc=$?
python3 - "$tmp/int/r.html" >"$tmp/int.txt" 2>&1 <<'PY'
import json, re, sys
h = open(sys.argv[1], encoding='utf-8').read()
d = json.loads(re.search(r'id="tally-data">(.*?)</script>', h, re.S).group(1))
assert d['snapshot']['target']['comm'] == 'sleep', d['snapshot']['target']['comm']
assert len(d['series']['t']) >= 1 and h.rstrip().endswith('</html>')
print('whole')
PY
check "report, SIGINT: exit 0, a whole page, no temporary left" \
	"$([ $rc -eq 0 ] && [ "$(cat "$tmp/int.txt")" = whole ] && [ "$(ls -A "$tmp/int")" = r.html ]; echo $?)" \
	"rc $rc: $(tr '\n' ';' <"$tmp/int.txt") files: $(ls -A "$tmp/int" | tr '\n' ' ')"

page=$tmp/r.html
truth=$tmp/truth.json
"$TALLY" report --rate 4096 -o "$page" -- "$WL" "$truth" "$EVIL" >"$tmp/run.out" 2>"$tmp/run.err"
rc=$?
check "report of the workload: exit 0, a page" "$([ $rc -eq 0 ] && [ -s "$page" ]; echo $?)" \
	"rc $rc, stderr: $(head -c 500 "$tmp/run.err")"
echo "# the page: $(stat -c %s "$page" 2>/dev/null) bytes"

# The page's data against the workload's truth: each group's live bytes at
# the end (the snapshot it embeds) and at the peak (the snapshot's
# peak_live, and the largest point of the series: both groups hold their
# peak for 1.5 s, 15 ticks, so a point falls on it), the peak before the
# last point; the peak's folded stacks hold the workload's functions.
python3 - "$page" "$truth" "$EVIL" >"$tmp/data.txt" 2>&1 <<'PY'
import json, re, sys
page, truth, evil = sys.argv[1:]
h = open(page, encoding='utf-8').read()
want = json.load(open(truth))
m = re.findall(r'<script type="application/json" id="tally-data">(.*?)</script>', h, re.S)
assert len(m) == 1, 'one data element, whole: %d' % len(m)
d = json.loads(m[0])
snap = {g['name']: g['live_bytes'] for g in d['snapshot']['groups']}
ser = {g['name']: g['live'] for g in d['series']['groups']}
bad = []
for g in ('ingest', 'render'):
    if snap.get(g) != want['end'][g]:
        bad.append('%s at the end: %s, want %s' % (g, snap.get(g), want['end'][g]))
    pts = [v for v in ser.get(g, []) if v is not None]
    top = max(pts) if pts else None
    if top != want['peak'][g]:
        bad.append('%s peak: %s, want %s' % (g, top, want['peak'][g]))
    elif pts.index(top) == len(pts) - 1 or pts[-1] != want['end'][g]:
        bad.append('%s: the peak is the last point, or the last is not the end' % g)
    pl = [x.get('peak_live') for x in d['snapshot']['groups'] if x['name'] == g]
    if pl != [want['peak'][g]]:
        bad.append('%s peak_live: %s, want %s' % (g, pl, want['peak'][g]))
pk = d['snapshot'].get('peak') or {}
if not pk.get('at_s') or pk['at_s'] >= d['series']['t'][-1]:
    bad.append('the peak at %s s, the last point at %s s' % (pk.get('at_s'), d['series']['t'][-1]))
if not all(';%s;' % f in d['folded'].get('peak', '') for f in ('ingest_records', 'render_frames')):
    bad.append('folded at the peak: %r' % d['folded'].get('peak', '')[:300])
if snap.get(evil) != want['odd']:
    bad.append('the hostile group: %s, want %s' % (snap.get(evil), want['odd']))
pids = sorted(p['target']['pid'] for p in d['snapshot']['processes'])
if want['child'] not in pids or len(pids) != 2:
    bad.append('processes %s, want the root and %s' % (pids, want['child']))
print('\n'.join(bad) or 'match')
PY
check "the page's data are the workload's (groups at the end, at the peak, the peak's stacks, the tree)" \
	"$([ "$(cat "$tmp/data.txt")" = match ]; echo $?)" "$(head -c 800 "$tmp/data.txt")"

# Nothing fetched: no element or style that loads from a URL, no fetch or
# XMLHttpRequest in a script, and a policy that forbids it all.
fetches=$(grep -oiE '(src|href)=["'"'"']?(https?:)?//|url\((["'"'"'])?(https?:)?//|@import|\bfetch\(|XMLHttpRequest|navigator\.sendBeacon' "$page" | sort | uniq -c)
check "the page fetches nothing" \
	"$([ -z "$fetches" ] && grep -q "Content-Security-Policy\" content=\"default-src 'none'" "$page"; echo $?)" \
	"$fetches"

if ! command -v chromium >/dev/null; then
	skip "chromium renders the page" "chromium is not installed (scripts/setup.sh installs it)" 13
	finish
	exit
fi
# headless, every host name unresolvable: a page that needed the network
# would miss it here; the virtual time lets its scripts run to the end
timeout 120 chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
	--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$tmp/chromium" \
	--virtual-time-budget=5000 --dump-dom "file://$page" >"$tmp/dom.html" 2>"$tmp/chromium.err"
rc=$?
check "chromium renders the page" "$([ $rc -eq 0 ] && [ -s "$tmp/dom.html" ]; echo $?)" \
	"rc $rc: $(tail -c 500 "$tmp/chromium.err")"
# the page writes nothing to the console but its own errors; chromium says
# every console message, and every uncaught exception, as INFO:CONSOLE
console=$(grep -E ':CONSOLE' "$tmp/chromium.err")
check "no console message" "$([ -z "$console" ]; echo $?)" "$(head -c 800 <<<"$console")"

python3 - "$tmp/dom.html" "$truth" "$EVIL" >"$tmp/dom.txt" 2>&1 <<'PY'
import json, re, sys
from html.parser import HTMLParser
dom, truth, evil = sys.argv[1:]
want = json.load(open(truth))

class Seen(HTMLParser):
    """The elements' classes and ids, and the text inside elements of some."""
    def __init__(self):
        super().__init__()
        self.stack, self.texts, self.classes, self.ids = [], {}, [], set()
        self.imgs = 0
    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == 'img':
            self.imgs += 1
        cls = (a.get('class') or '').split()
        self.classes += cls
        if 'id' in a:
            self.ids.add(a['id'])
        if tag not in ('br', 'img', 'input', 'meta', 'link', 'canvas', 'col', 'hr'):
            self.stack.append(cls + (['#' + a['id']] if 'id' in a else []) +
                              (['pid=' + a['data-pid']] if 'data-pid' in a else []))
    def handle_endtag(self, tag):
        if tag not in ('br', 'img', 'input', 'meta', 'link', 'canvas', 'col', 'hr') and self.stack:
            self.stack.pop()
    def handle_data(self, data):
        for cls in {c for s in self.stack for c in s}:
            self.texts.setdefault(cls, []).append(data)

p = Seen()
page = open(dom, encoding='utf-8').read()
p.feed(page)
t = lambda c: ''.join(p.texts.get(c, []))
checks = {
    'four charts drawn (uPlot)': p.classes.count('uplot') >= 4 and 'u-over' in p.classes,
    'the groups in the charts\' legends': all(g in p.texts.get('u-label', [])
                                              for g in ('ingest', 'render', evil)),
    'the groups table': all(g in t('groups') for g in ('ingest', 'render')),
    'the peak marked, the document\'s': 'Peak:' in t('peak-note') and
                                        'report_workload (pid' in t('peak-note') and
                                        'the largest point drawn' not in t('peak-note'),
    'the peak\'s flame graph': re.search(r'id="flame-peak"[^>]*>.*?class="frame[^"]*"[^>]*>'
                                         'ingest_records<', page, re.S) is not None,
    'the flame graph\'s frames': all(f in p.texts.get('frame', [])
                                     for f in ('main', 'ingest_records', 'render_frames')),
    'the process tree': ('pid=%d' % want['child']) in p.texts and
                        'report_workload' in t('pid=%d' % want['child']),
    'no markup from the hostile name': p.imgs == 0,
    'no error drawn': 'error' not in p.classes,
}
bad = [k for k, v in checks.items() if not v]
print('\n'.join(bad) or 'seen')
PY
dom=$(cat "$tmp/dom.txt")
for what in "four charts drawn (uPlot)" "the groups in the charts' legends" "the groups table" \
	"the peak marked, the document's" "the peak's flame graph" "the flame graph's frames" \
	"the process tree" \
	"no markup from the hostile name" "no error drawn"; do
	# "$dom" lists what is missing, one a line, or says "seen"
	[ -n "$dom" ] && ! grep -qxF "$what" <<<"$dom" && ! grep -q Traceback <<<"$dom"
	check "the page shows $what" $? "${dom//$'\n'/; }"
done

# Leaks and temporaries of a known count, and oom_kill, given to the page
# by hand: a second page of the same data with them, drawn in the leaks
# and temporaries tables.
python3 - "$page" "$tmp/r2.html" <<'PY'
import json, re, sys
src, dst = sys.argv[1:]
h = open(src, encoding='utf-8').read()
m = re.search(r'(<script type="application/json" id="tally-data">)(.*?)(</script>)', h, re.S)
d = json.loads(m.group(2))
s = d['snapshot']
for p in s['processes']:
    p['leaked'] = p['temporary'] = []
s['processes'][0]['leaked'] = s['sites'][:2]
s['processes'][0]['temporary'] = s['sites'][:1]
s['target']['oom_kill'] = False
# a person's clicks, as a script after the page's: the "Allocated" tab, a
# click on ingest_records (zoomed: full width, its sibling render_frames
# gone), a search for "fill" (marked frames, their share said)
clicks = '''<script>
(function () {
	const out = [];
	document.querySelector('button[data-view="alloc"]').click();
	const box = document.getElementById('flame-alloc');
	out.push('tab:' + (box.style.display === '' ? 'shown' : 'hidden'));
	const named = (t) => [...box.querySelectorAll('.frame')].filter((e) => e.textContent === t);
	named('ingest_records')[0].click();
	const z = named('ingest_records')[0];
	out.push('zoom:' + (z && z.style.width === '100%' && !named('render_frames').length ? 'ok' : 'no'));
	const q = document.getElementById('flame-search');
	q.value = 'fill';
	q.dispatchEvent(new Event('input'));
	const said = document.querySelector('.matched').textContent;
	out.push('search:' + (box.querySelectorAll('.frame.match').length && said.startsWith('matched: ') ? 'ok' : 'no'));
	const pre = document.createElement('pre');
	pre.id = 'clicks';
	pre.textContent = out.join(' ');
	document.body.appendChild(pre);
})();
</script>'''
h = h.replace('</body>', clicks + '\n</body>')
data = json.dumps(d).replace('<', '\\u003c')
open(dst, 'w', encoding='utf-8').write(h[:m.start(2)] + data + h[m.end(2):])
PY
timeout 120 chromium --headless --no-sandbox --disable-gpu --enable-logging=stderr --v=0 \
	--host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$tmp/chromium" \
	--virtual-time-budget=5000 --dump-dom "file://$tmp/r2.html" >"$tmp/dom2.html" 2>"$tmp/chromium2.err"
console=$(grep -E ':CONSOLE' "$tmp/chromium2.err")
check "the page with leaks and temporaries: no console message" \
	"$([ -s "$tmp/dom2.html" ] && [ -z "$console" ]; echo $?)" "$(head -c 800 <<<"$console")"
python3 - "$tmp/dom2.html" >"$tmp/dom2.txt" 2>&1 <<'PY'
import re, sys
d = open(sys.argv[1], encoding='utf-8').read()
def part(id_):
    m = re.search(r'<section id="%s">(.*?)</section>' % id_, d, re.S)
    return m.group(1) if m else ''
bad = []
if len(re.findall('<tr>', part('leaks'))) != 3 or len(re.findall('<tr>', part('temporaries'))) != 2:
    bad.append('leaks and temporaries: not 2 and 1 rows')
if not re.search(r'peak \d', part('tree')):
    bad.append('the tree lacks the peak')
if '<pre id="clicks">tab:shown zoom:ok search:ok</pre>' not in d:
    bad.append('clicks: ' + (re.findall(r'<pre id="clicks">(.*?)</pre>', d) or ['none'])[0])
print('\n'.join(bad) or 'drawn')
PY
check "the page draws leaked and temporary, the tree's peaks; its flame graph zooms and searches" \
	"$([ "$(cat "$tmp/dom2.txt")" = drawn ]; echo $?)" "$(tr '\n' ';' <"$tmp/dom2.txt")"

finish
