#!/usr/bin/env python3
# SPDX-License-Identifier: (LGPL-2.1 OR BSD-2-Clause)
"""A flame graph (SVG) from folded stacks, `tally profile --format folded`'s
output: one "frame;frame;frame VALUE" line per stack, outermost frame first.
The same picture flamegraph.pl draws, without it (Debian does not package
it): frames as boxes as wide as their bytes, callers below callees.

    tally profile --format folded -- ./app | scripts/flamegraph.py > heap.svg
"""
import argparse
import html
import sys
import zlib

ROW = 17
FONT = 12
PAD = 10


def parse(lines):
    root = {"name": "all", "value": 0, "kids": {}}
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, value = line.rpartition(" ")
        try:
            v = int(value)
        except ValueError:
            sys.exit(f"flamegraph.py: line {n}: no value at its end: {line[:80]!r}")
        node = root
        node["value"] += v
        for frame in stack.split(";"):
            node = node["kids"].setdefault(frame, {"name": frame, "value": 0, "kids": {}})
            node["value"] += v
    return root


def depth(node):
    return 1 + max((depth(k) for k in node["kids"].values()), default=0)


def color(name):
    # warm colours, stable per name (as flamegraph.pl's "hot" palette)
    h = zlib.crc32(name.encode())
    return f"rgb({205 + h % 50},{(h >> 8) % 180 + 40},{(h >> 16) % 55})"


def human(v, unit):
    if unit != "bytes":
        return f"{v:,} {unit}"
    for u in ("B", "KiB", "MiB", "GiB"):
        if v < 1024 or u == "GiB":
            return f"{v:.1f} {u}" if u != "B" else f"{v} B"
        v /= 1024


def draw(node, x, level, width, total, height, out, unit):
    w = node["value"] / total * width
    if w < 0.1:
        return
    y = height - (level + 1) * ROW - PAD
    name = html.escape(node["name"])
    tip = f"{name} ({html.escape(human(node['value'], unit))}, {100 * node['value'] / total:.2f}%)"
    chars = int(w / (FONT * 0.6))
    label = name if len(node["name"]) <= chars else html.escape(node["name"][: max(chars - 2, 0)]) + ".." if chars > 3 else ""
    out.append(f'<g><title>{tip}</title><rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{ROW - 1}" '
               f'fill="{color(node["name"])}" rx="2"/><text x="{x + 3:.1f}" y="{y + ROW - 5}">{label}</text></g>')
    for kid in sorted(node["kids"].values(), key=lambda k: k["name"]):
        draw(kid, x, level + 1, width, total, height, out, unit)
        x += kid["value"] / total * width


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("file", nargs="?", help="folded stacks (default: stdin)")
    ap.add_argument("--title", default="Heap in use by call site")
    ap.add_argument("--unit", default="bytes")
    ap.add_argument("--width", type=int, default=1200)
    a = ap.parse_args()
    with (open(a.file) if a.file else sys.stdin) as f:
        root = parse(f)
    if not root["value"]:
        sys.exit("flamegraph.py: no stacks with a value")
    height = (depth(root) + 1) * ROW + 2 * PAD + 20
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{a.width}" height="{height}" '
           f'font-family="Verdana,sans-serif" font-size="{FONT}">',
           f'<rect width="100%" height="100%" fill="#f8f8f0"/>',
           f'<text x="{a.width / 2}" y="20" text-anchor="middle" font-size="16">{html.escape(a.title)}</text>']
    draw(root, PAD, 0, a.width - 2 * PAD, root["value"], height, out, a.unit)
    out.append("</svg>")
    print("\n".join(out))


if __name__ == "__main__":
    main()
