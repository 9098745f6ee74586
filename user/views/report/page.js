// SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
// tally report's page: everything is drawn here, in the browser, from the
// one JSON element the page carries (user/views/report/report.c): the
// snapshot document (docs/DESIGN.md §6), the time series (series.c) and the
// folded heap profile. Every string in it came from the traced process
// (names of processes, groups, functions): it reaches the page only as
// textContent or an attribute's value, never as markup.
(function () {
	'use strict';

	const D = JSON.parse(document.getElementById('tally-data').textContent);
	const snap = D.snapshot;
	const ser = D.series;
	const main = document.getElementById('report');
	const TERMS = ['live', 'rounding', 'cache', 'span_free', 'returned', 'virgin', 'hysteresis',
		'segment_overhead'];
	const PALETTE = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f', '#edc948', '#b07aa1',
		'#ff9da7', '#9c755f', '#bab0ac', '#1f77b4', '#2ca02c', '#d62728', '#9467bd'];
	const ABSENT = 'not in this document';

	// elements, with text only
	function el(tag, attrs, ...kids) {
		const e = document.createElement(tag);
		for (const [k, v] of Object.entries(attrs || {})) {
			if (k === 'class')
				e.className = v;
			else
				e.setAttribute(k, v);
		}
		for (const k of kids) {
			if (k === null || k === undefined)
				continue;
			e.appendChild(typeof k === 'object' ? k : document.createTextNode(String(k)));
		}
		return e;
	}

	function bytes(v) {
		if (v === null || v === undefined)
			return '—';
		const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
		let x = Math.abs(v), u = 0;
		while (x >= 1024 && u < units.length - 1) {
			x /= 1024;
			u++;
		}
		return (v < 0 ? '-' : '') + (u ? x.toFixed(x < 10 ? 2 : 1) : x) + ' ' + units[u];
	}

	function secs(v) {
		return v === null || v === undefined ? '—' : v.toFixed(v < 10 ? 2 : 1) + ' s';
	}

	function count(v) {
		return v === null || v === undefined ? '—' : Number(v).toLocaleString('en');
	}

	function section(id, title, note) {
		const s = el('section', { id: id }, el('h2', {}, title));
		if (note)
			s.appendChild(el('p', { class: 'note' }, note));
		main.appendChild(s);
		return s;
	}

	function table(head, rows, cls) {
		const t = el('table', { class: cls || '' });
		t.appendChild(el('thead', {}, el('tr', {}, ...head.map((h) => el('th', {}, h)))));
		const b = el('tbody');
		for (const r of rows)
			b.appendChild(el('tr', {}, ...r.map((c) => el('td', {}, c))));
		t.appendChild(b);
		return t;
	}

	// the processes, root first (the snapshot's "processes"; the root alone
	// in an older document)
	const procs = snap.processes && snap.processes.length ? snap.processes : [snap];
	const last = (a) => (a && a.length ? a[a.length - 1] : null);
	const tEnd = last(ser.t) || 0;

	// The peak: the document's when it has one (the root's, kept record by
	// record; null where no replay keeps one), else the largest of the
	// series' points, which may miss one between two ticks: the page says
	// which.
	function peakOf() {
		const p = (snap.tree && snap.tree.peak) || snap.peak;
		if (p && typeof p.at_s === 'number')
			return {
				at: p.at_s, live: p.live, doc: true,
				// another heap moved in the batch's window: somewhere in it
				after: p.exact === false && typeof p.after_s === 'number' ? p.after_s : null,
			};
		let best = -1, at = null;
		const live = ser.stats.live;
		ser.t.forEach((t, i) => {
			let v = live[i];
			if (v === null)
				v = ser.groups.reduce((s, g) => s + (g.live[i] || 0), 0);
			if (v > best) {
				best = v;
				at = t;
			}
		});
		// nothing live at any point: no peak to mark
		return at === null || best <= 0 ? null : { at: at, live: best, doc: false, after: null };
	}
	const peak = peakOf();
	const t0 = snap.target || {};
	const peakSaid = !peak ? '' : bytes(peak.live) + ' live at ' + secs(peak.at) +
		(peak.after !== null ? ' (between ' + secs(peak.after) + ' and then)' : '') +
		(peak.doc ? ' in ' + (t0.comm || '?') + ' (pid ' + t0.pid + ')'
			: ' (the largest point drawn)');

	function summary() {
		const t = snap.target || {};
		const s = section('summary', 'Summary');
		const how = t.signal ? 'killed by signal ' + t.signal
			: t.exit_code !== null && t.exit_code !== undefined ? 'exited with ' + t.exit_code
			: 'running at the end';
		s.appendChild(table(['', ''], [
			['process', (t.comm || '?') + ' (pid ' + t.pid + ')'],
			['allocator', t.allocator || '?'],
			['attach', t.attach || '?'],
			['end', how],
			['traced for', secs(tEnd)],
			['processes in the tree', procs.length],
			['figures', snap.exact ? 'exact' : 'not exact (see below)'],
			['peak live', peak ? peakSaid : '—'],
		], 'kv'));
	}

	// Every reason the figures are not exact, then what is an estimate by design.
	function inexact() {
		const s = section('inexact', 'Why the figures are not exact');
		const items = [];
		for (const p of procs) {
			const who = (p.target ? p.target.comm + ' (pid ' + p.target.pid + ')' : '?');
			for (const w of p.inexact_why || [])
				items.push(who + ': ' + w);
			if (p.instance && p.instance.exact === false)
				for (const w of p.instance.inexact_why || [])
					items.push(who + ', GPU: ' + w);
		}
		const tr = snap.tree || {};
		const listed = procs.filter((p) => p.exact === false).length;
		if (tr.inexact > listed)
			items.push((tr.inexact - listed) + ' more processes of the tree, not listed one by ' +
				'one, are not exact');
		if (tr.not_listed)
			items.push(tr.not_listed + ' processes of the tree are not listed one by one');
		if (snap.target && snap.target.state_read_consistent === false)
			items.push('the state read at the attach moved while it was read');
		const ul = el('ul', { class: 'why' });
		for (const w of items)
			ul.appendChild(el('li', {}, w));
		if (!items.length)
			s.appendChild(el('p', { class: 'exact' },
				'The figures are exact: every record between the start and the end is in.'));
		else
			s.appendChild(ul);
		const est = el('ul', { class: 'estimates' });
		const rate = D.folded.rate;
		const sampled = rate && (D.folded.inuse || D.folded.alloc);
		est.appendChild(el('li', {}, sampled ? 'The flame graphs and the sites are estimates: one ' +
			'block sampled per ' + bytes(rate) + ' allocated on average, each weighed by its chance ' +
			'of being sampled.' : 'No allocation was sampled: the flame graphs are empty.'));
		est.appendChild(el('li', {}, 'The charts have a point every ' + ser.point_ms + ' ms' +
			(ser.thinned ? ', thinned from every ' + ser.interval_ms + ' ms' : '') +
			': what happened between two points is not drawn. The series keeps at most ' +
			ser.max_points + ' points: when full, it drops every second one and goes on at ' +
			'half the resolution.'));
		if (ser.groups.length > ser.max_groups || ser.processes.length > ser.max_processes)
			est.appendChild(el('li', {}, 'Past ' + ser.max_groups + ' groups or ' +
				ser.max_processes + ' processes, the rest are summed as "(other)".'));
		s.appendChild(el('h3', {}, 'Estimates and bounds'));
		s.appendChild(est);
	}

	// A vertical line at the peak, drawn on the chart's canvas.
	function peakPlugin() {
		return {
			hooks: {
				draw: [(u) => {
					if (!peak)
						return;
					const x = u.valToPos(peak.at, 'x', true);
					const c = u.ctx;
					c.save();
					c.strokeStyle = '#d00';
					c.setLineDash([6, 4]);
					c.lineWidth = 2;
					c.beginPath();
					c.moveTo(x, u.bbox.top);
					c.lineTo(x, u.bbox.top + u.bbox.height);
					c.stroke();
					c.fillStyle = '#d00';
					c.font = '12px sans-serif';
					c.fillText('peak', x + 4, u.bbox.top + 14);
					c.restore();
				}],
			},
		};
	}

	// One chart of lines over the series' time: lines [{label, data}];
	// stacked: each drawn on top of the ones before (the legend shows its
	// own value); fmt: a value as text.
	function chart(parent, title, lines, opt) {
		opt = opt || {};
		const fmt = opt.fmt || bytes;
		const box = el('div', { class: 'chart', 'data-title': title });
		parent.appendChild(box);
		if (!lines.length || !ser.t.length) {
			box.appendChild(el('p', { class: 'empty' }, title + ': nothing to draw'));
			return;
		}
		const data = [ser.t];
		const series = [{ label: 'time' }];
		let acc = ser.t.map(() => 0);
		lines.forEach((l, k) => {
			const color = PALETTE[k % PALETTE.length];
			let d = l.data;
			if (opt.stacked && !l.line) {
				acc = acc.map((a, i) => a + (d[i] || 0));
				d = acc.slice();
			}
			data.push(d);
			series.push({
				label: l.label,
				stroke: l.line ? '#000' : color,
				width: l.line ? 2 : 1,
				dash: l.line ? [4, 3] : undefined,
				fill: opt.stacked && !l.line ? color + 'cc' : undefined,
				// without a cursor, the legend says the end's value
				value: (u, v, si, i) => fmt(l.data[i === null || i === undefined ?
					l.data.length - 1 : i]),
			});
		});
		const bands = [];
		if (opt.stacked)
			for (let k = 2; k < series.length; k++)
				if (!lines[k - 1].line && !lines[k - 2].line)
					bands.push({ series: [k, k - 1] });
		const width = Math.max(400, Math.min(1200, (main.clientWidth || 900) - 20));
		new uPlot({
			title: title,
			width: width,
			height: 260,
			scales: { x: { time: false } },
			series: series,
			bands: bands,
			axes: [{ label: 'seconds' }, { size: 80, values: (u, vals) => vals.map(fmt) }],
			plugins: opt.peak ? [peakPlugin()] : [],
		}, data, box);
		if (opt.peak && peak)
			box.appendChild(el('p', { class: 'peak-note' }, 'Peak: ' + peakSaid +
				' (dashed red line).'));
	}

	function identity() {
		const s = section('identity', 'Where the bytes are (the identity, over time)',
			'The allocator\'s mapped bytes, split in its eight terms and stacked: they add up ' +
			'to mapped (the dashed line) when the identity balances.');
		const lines = TERMS.filter((k) => ser.stats[k] && ser.stats[k].some((v) => v !== null))
			.map((k) => ({ label: k, data: ser.stats[k] }));
		if (ser.stats.mapped && ser.stats.mapped.some((v) => v !== null))
			lines.push({ label: 'mapped', data: ser.stats.mapped, line: true });
		chart(s, 'Identity terms (tree)', lines, { stacked: true, peak: true });
	}

	function live() {
		const s = section('live', 'Live bytes per group and per process');
		chart(s, 'Live bytes per group', ser.groups.map((g) => ({ label: g.name, data: g.live })),
			{ peak: true });
		chart(s, 'Live bytes per process', ser.processes.map((p) => ({
			label: p.comm + ' (' + (p.pid < 0 ? 'other' : p.pid) + ')', data: p.live,
		})), { peak: true });
	}

	// CPU as cores busy between two points; GPU device bytes as they are.
	function cpuGpu() {
		const s = section('cpu-gpu', 'CPU and GPU per group');
		const rate = (a) => a.map((v, i) => {
			if (!i || v === null || a[i - 1] === null)
				return null;
			const dt = ser.t[i] - ser.t[i - 1];
			return dt > 0 ? (v - a[i - 1]) / 1e9 / dt : null;
		});
		chart(s, 'CPU per group (cores)', ser.groups.map((g) => ({
			label: g.name, data: rate(g.cpu_ns),
		})), { fmt: (v) => (v === null || v === undefined ? '—' : v.toFixed(2)) });
		const gpu = ser.groups.filter((g) => g.device_bytes.some((v) => v));
		if (gpu.length)
			chart(s, 'GPU device bytes per group', gpu.map((g) => ({
				label: g.name, data: g.device_bytes,
			})));
		else
			s.appendChild(el('p', { class: 'empty', id: 'gpu-none' },
				'GPU device bytes per group: no group held device memory.'));
	}

	function groups() {
		const s = section('groups', 'Groups');
		const by = new Map();
		for (const p of procs)
			for (const g of p.groups || []) {
				const name = g.name === null ? (g.id ? '#' + g.id : 'root') : g.name;
				const r = by.get(name) || { name: name, alloc: 0, objs: 0, cpu: 0, peak: null };
				r.alloc += g.allocated_bytes;
				r.objs += g.allocated_objects;
				r.cpu += g.cpu_ns;
				if (typeof g.peak_live === 'number')
					r.peak = (r.peak || 0) + g.peak_live;
				else if (g.peak_live === null && r.peak === null)
					r.peak = undefined; // in the document, not known
				by.set(name, r);
			}
		const rows = ser.groups.map((g) => {
			const r = by.get(g.name) || {};
			const seen = Math.max(...g.live.filter((v) => v !== null), 0);
			return [g.name, bytes(last(g.live)), r.peak === undefined ? 'not known'
				: r.peak === null ? ABSENT : bytes(r.peak), bytes(seen), bytes(r.alloc), count(r.objs),
				secs((r.cpu || 0) / 1e9), bytes(last(g.device_bytes))];
		});
		s.appendChild(table(['group', 'live at the end', 'live at each process\'s peak', 'largest point drawn',
			'allocated', 'allocations', 'CPU', 'GPU device bytes'], rows, 'groups'));
	}

	// A frame's name in the snapshot's sites: its function, else its object
	// and address.
	function frameName(f) {
		if (f.function)
			return f.function;
		const m = f.module ? f.module.split('/').pop() : '';
		return (m ? m + '@' : '') + '0x' + Number(f.address).toString(16);
	}

	// [[frames root first], bytes] from folded text or from sites
	function fromFolded(text) {
		const out = [];
		for (const line of (text || '').split('\n')) {
			const sp = line.lastIndexOf(' ');
			if (sp > 0)
				out.push([line.slice(0, sp).split(';'), Number(line.slice(sp + 1))]);
		}
		return out;
	}
	function fromSites(sites, key) {
		return (sites || []).filter((x) => x[key] > 0)
			.map((x) => [x.frames.map(frameName).reverse(), x[key]]);
	}

	function flame() {
		const s = section('flame', 'Heap profile (flame graphs)', 'Root at the top, callees below; ' +
			'a frame\'s width is its bytes. Click a frame to zoom into it, the top bar to zoom out; ' +
			'the search marks every frame whose name holds the text.');
		const pk = (snap.tree && snap.tree.peak) || snap.peak;
		// the whole profile at each process's peak (folded), else the
		// document's largest sites there; null: no replay kept a peak
		let atPeak = null;
		if (D.folded.peak)
			atPeak = fromFolded(D.folded.peak);
		else if (pk && Array.isArray(pk.sites))
			atPeak = fromSites(pk.sites, pk.sites.some((x) => 'peak_bytes' in x) ? 'peak_bytes'
				: 'inuse_bytes');
		else if (pk)
			atPeak = [];
		const views = [
			['inuse', 'In use at the end', fromFolded(D.folded.inuse)],
			['peak', 'In use at the peak', atPeak],
			['alloc', 'Allocated', fromFolded(D.folded.alloc)],
		];
		const tabs = el('div', { class: 'tabs' });
		const search = el('input', { type: 'search', placeholder: 'search frames', id: 'flame-search' });
		const matched = el('span', { class: 'matched' });
		s.appendChild(el('div', { class: 'toolbar' }, tabs, search, matched));
		const graphs = [];
		views.forEach(([id, label, stacks], k) => {
			const b = el('button', { type: 'button', 'data-view': id }, label);
			tabs.appendChild(b);
			const box = el('div', { class: 'flame', id: 'flame-' + id });
			s.appendChild(box);
			const g = stacks === null ? null : new Flame(box, stacks, label);
			if (!g)
				box.appendChild(el('p', { class: 'empty' }, label + ': ' +
					(pk === null ? 'not known (no replay keeps a peak here)' : ABSENT)));
			graphs.push([b, box, g]);
			b.addEventListener('click', () => show(k));
		});
		function show(k) {
			graphs.forEach(([b, box], j) => {
				b.classList.toggle('on', j === k);
				box.style.display = j === k ? '' : 'none';
			});
		}
		search.addEventListener('input', () => {
			const q = search.value;
			const g = graphs.find(([b]) => b.classList.contains('on'))[2];
			matched.textContent = g && q ? g.search(q) : '';
			for (const [, , o] of graphs)
				if (o && o !== g)
					o.search(q);
		});
		// the first view with bytes: a short run's few blocks in use at
		// its end may hold no sample
		const first = graphs.findIndex(([, , g]) => g && g.root.value > 0);
		show(first < 0 ? 0 : first);
	}

	// An icicle of DOM elements, so that a frame is text a person can select
	// and a test can find.
	function Flame(box, stacks, label) {
		const root = { name: label, value: 0, kids: new Map() };
		for (const [frames, v] of stacks) {
			let n = root;
			n.value += v;
			for (const f of frames) {
				let c = n.kids.get(f);
				if (!c) {
					c = { name: f, value: 0, kids: new Map(), parent: n };
					n.kids.set(f, c);
				}
				c.value += v;
				n = c;
			}
		}
		this.root = root;
		this.box = box;
		this.query = '';
		this.zoom(root);
	}
	Flame.prototype.MAX_FRAMES = 4000;
	Flame.prototype.zoom = function (focus) {
		this.focus = focus;
		this.box.textContent = '';
		const total = this.root.value;
		if (!total) {
			this.box.appendChild(el('p', { class: 'empty' }, this.root.name + ': no bytes'));
			return;
		}
		let depth = 0, drawn = 0;
		const row = (n, x, w, d) => {
			const pct = (100 * n.value / total).toFixed(1);
			const f = el('div', {
				class: 'frame' + (this.query && n.name.includes(this.query) ? ' match' : ''),
				title: n.name + ': ' + bytes(n.value) + ' (' + pct + '%)',
				style: 'left:' + x + '%;width:' + w + '%;top:' + d * 20 + 'px',
			}, n.name);
			f.addEventListener('click', () => this.zoom(n === this.focus ? n.parent || this.root : n));
			this.box.appendChild(f);
			depth = Math.max(depth, d);
			drawn++;
		};
		// the focus's ancestors full width above it
		const up = [];
		for (let a = focus; a; a = a.parent)
			up.unshift(a);
		up.forEach((a, d) => row(a, 0, 100, d));
		const walk = (n, x, d) => {
			let cx = x;
			const kids = [...n.kids.values()].sort((a, b) => b.value - a.value);
			for (const c of kids) {
				const w = 100 * c.value / focus.value;
				if (w < 0.2 || drawn >= this.MAX_FRAMES)
					break;
				row(c, cx, w, d);
				walk(c, cx, d + 1);
				cx += w;
			}
		};
		walk(focus, 0, up.length);
		this.box.style.height = (depth + 1) * 20 + 'px';
	};
	// Mark the frames whose name holds q: the bytes under them (each stack
	// counted once, at its outermost match).
	Flame.prototype.search = function (q) {
		this.query = q;
		this.zoom(this.focus);
		if (!q)
			return '';
		const sum = (n) => (n.name.includes(q) && n !== this.root ? n.value
			: [...n.kids.values()].reduce((s, c) => s + sum(c), 0));
		const m = sum(this.root);
		return 'matched: ' + bytes(m) + ' (' + (100 * m / (this.root.value || 1)).toFixed(1) + '%)';
	};

	function sitesTable(s, list, what, key) {
		if (!Array.isArray(list)) {
			s.appendChild(el('p', { class: 'empty' }, what + ': ' + ABSENT));
			return;
		}
		if (!list.length) {
			s.appendChild(el('p', { class: 'empty' }, what + ': none'));
			return;
		}
		const rows = list.map((x) => {
			const fr = (x.frames || []).map(frameName);
			const stack = el('details', {}, el('summary', {}, fr[0] || '[unknown]'),
				el('pre', {}, fr.join('\n')));
			return [key.endsWith('bytes') ? bytes(x[key]) : count(x[key]),
				count(x.inuse_objects), bytes(x.alloc_bytes),
				count(x.alloc_objects), x.group, x.pid, stack];
		});
		s.appendChild(table([key === 'inuse_bytes' ? 'in use' : 'freed within 1 ms', 'objects',
			'allocated',
			'allocations', 'group', 'pid', 'site (innermost frame first)'], rows, 'sites'));
	}

	// Each process's list put together (the root's is also the document's
	// top level), or the top level's alone.
	function gather(key) {
		let any = false, all = [];
		for (const p of procs)
			if (Array.isArray(p[key])) {
				any = true;
				all = all.concat(p[key]);
			}
		if (any)
			return all;
		return Array.isArray(snap[key]) ? snap[key] : null;
	}

	function leaks() {
		const s = section('leaks', 'Leaks', 'Sites of an ended process still in use at its end.');
		sitesTable(s, gather('leaked'), 'Leaked sites', 'inuse_bytes');
		const t = section('temporaries', 'Temporaries',
			'Sites with the most blocks freed within 1 ms of their allocation (sampled).');
		sitesTable(t, gather('temporary'), 'Temporary sites', 'freed_within_1ms');
	}

	function tree() {
		const s = section('tree', 'Process tree');
		const kids = new Map();
		const pids = new Set(procs.map((p) => p.target.pid));
		for (const p of procs) {
			const pp = pids.has(p.target.ppid) && p !== procs[0] ? p.target.ppid : 0;
			if (!kids.has(pp))
				kids.set(pp, []);
			kids.get(pp).push(p);
		}
		const node = (p) => {
			const t = p.target;
			const end = t.signal ? 'killed by ' + t.signal : t.exit_code !== null &&
				t.exit_code !== undefined ? 'exit ' + t.exit_code : 'running';
			const live = p.stats && p.stats.live !== null ? bytes(p.stats.live) : '—';
			const pk = p.peak && typeof p.peak.live === 'number' ? 'peak ' + bytes(p.peak.live) +
				' at ' + secs(p.peak.at_s) : 'peak: ' + (p.peak === null ? 'not known' : ABSENT);
			const li = el('li', { class: 'proc', 'data-pid': t.pid },
				el('span', { class: 'comm' }, t.comm || '?'), ' ',
				el('span', { class: 'pid' }, 'pid ' + t.pid), ' — ',
				'live ' + live + ', ' + pk + ', ' + end + (p.exact ? '' : ', not exact'),
				t.cmdline ? el('div', { class: 'cmdline' }, t.cmdline) : null);
			const ks = kids.get(t.pid);
			if (ks && ks.length)
				li.appendChild(el('ul', {}, ...ks.map(node)));
			return li;
		};
		s.appendChild(el('ul', { class: 'tree' }, ...(kids.get(0) || []).map(node)));
		if (snap.target && snap.target.oom_kill !== undefined)
			s.appendChild(el('p', {}, 'OOM kill: ' + JSON.stringify(snap.target.oom_kill)));
	}

	function footer() {
		main.appendChild(el('footer', {}, 'Drawn by tally report, with uPlot (MIT) for the ' +
			'charts; the data are in this page\'s tally-data element (the snapshot document is ' +
			'what `tally snapshot` prints).'));
	}

	main.textContent = '';
	for (const f of [summary, inexact, identity, live, cpuGpu, groups, flame, leaks, tree, footer]) {
		try {
			f();
		} catch (e) {
			// said on the console too: the tests fail on it
			console.error('tally report: ' + f.name + ': ' + e);
			main.appendChild(el('p', { class: 'error' }, f.name + ': ' + e));
		}
	}
})();
