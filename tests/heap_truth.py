#!/usr/bin/env python3
"""Check a libtally_alloc process's Stats against truths tally does not derive.

usage: heap_truth.py PID STATS.json [--live N] [--rss-slack BYTES]

STATS.json holds one "stats" object as tally printed it (a snapshot's .stats,
or the same terms from another view). The allocator's own walk
(alloc/stats_walk.h) and tally's reader of a target share that code, so
comparing the two cannot catch a wrong term; these checks use what the
kernel and the workload say instead:

- mapped equals the sizes of the allocator's mappings in /proc/PID/smaps
  (its segments carry MADV_NOHUGEPAGE and MADV_RANDOM: VmFlags "nh" and "rr");
- the identity's sum, done here: mapped == live + rounding + cache +
  span_free + returned + virgin + hysteresis + segment_overhead, no term < 0;
- what is never resident (virgin pages never touched, returned pages
  given back) leaves room for the kernel's Rss: Rss <= mapped - virgin -
  returned (plus --rss-slack, for pages a thread touches between reads);
- measured_resident, where given, equals that Rss;
- --live N: live equals the workload's own count.

The target must be quiet (no thread allocating) between tally's read and
this one. Prints one line per breach and exits 1; prints "heap truth: ok
..." and exits 0 when all hold.
"""
import json
import re
import sys

TERMS = ("live", "rounding", "cache", "span_free", "returned", "virgin",
         "hysteresis", "segment_overhead")


def kernel_view(pid):
    """(count, total Size, total Rss) of the allocator's mappings."""
    n = size = rss = 0
    cur_size = cur_rss = 0
    head = re.compile(r"^([0-9a-f]+)-([0-9a-f]+) ")
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            m = head.match(line)
            if m:
                cur_size = int(m.group(2), 16) - int(m.group(1), 16)
                cur_rss = 0
            elif line.startswith("Rss:"):
                cur_rss = int(line.split()[1]) * 1024
            elif line.startswith("VmFlags:"):
                flags = line.split()[1:]
                if "nh" in flags and "rr" in flags:
                    n += 1
                    size += cur_size
                    rss += cur_rss
    return n, size, rss


def main(argv):
    if len(argv) < 3:
        print(__doc__.strip().splitlines()[2], file=sys.stderr)
        return 2
    pid, path = int(argv[1]), argv[2]
    live = None
    slack = 0
    rest = argv[3:]
    while rest:
        if rest[0] == "--live" and len(rest) > 1:
            live = int(rest[1])
        elif rest[0] == "--rss-slack" and len(rest) > 1:
            slack = int(rest[1])
        else:
            print(f"heap_truth.py: unknown argument {rest[0]}", file=sys.stderr)
            return 2
        rest = rest[2:]
    with open(path) as f:
        st = json.load(f)
    bad = []
    for k in ("mapped",) + TERMS:
        if not isinstance(st.get(k), int):
            bad.append(f"{k} is {st.get(k)!r}, not a number")
    if bad:
        print("\n".join(bad))
        return 1
    n, size, rss = kernel_view(pid)
    if n == 0:
        bad.append("no allocator mapping (VmFlags nh rr) in /proc/%d/smaps" % pid)
    if st["mapped"] != size:
        bad.append(f"mapped {st['mapped']} != {size}, the kernel's size of the "
                   f"allocator's {n} mappings")
    total = sum(st[k] for k in TERMS)
    if st["mapped"] != total:
        bad.append(f"identity: mapped {st['mapped']} != {total}, the sum of its terms "
                   + json.dumps({k: st[k] for k in TERMS}))
    neg = [k for k in ("mapped",) + TERMS if st[k] < 0]
    if neg:
        bad.append("terms below zero: " + ", ".join(neg))
    room = st["mapped"] - st["virgin"] - st["returned"]
    if rss > room + slack:
        bad.append(f"Rss {rss} of the allocator's mappings > mapped - virgin - returned "
                   f"= {room} (+{slack}): virgin or returned counts resident pages")
    mr = st.get("measured_resident")
    if isinstance(mr, int) and abs(mr - rss) > slack:
        bad.append(f"measured_resident {mr} != {rss}, the kernel's Rss")
    if live is not None and st["live"] != live:
        bad.append(f"live {st['live']} != {live}, the workload's own count")
    if bad:
        print("\n".join(bad))
        return 1
    print(f"heap truth: ok ({n} mappings, {size} bytes, Rss {rss})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
