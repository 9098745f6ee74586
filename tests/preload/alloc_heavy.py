#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Allocation-heavy Python workload for the preload integration test.

Builds and drops many dicts, lists, strings and bytes from a few bytes to
several MiB, round-trips JSON, sorts, runs threads that allocate (some with
the GIL released, inside hashlib and zlib), and forks children that allocate
and report back. Run it with PYTHONMALLOC=malloc so that every Python object
goes through malloc rather than pymalloc's arenas.

Each section prints one line: its name and a sha256 digest of what it
computed. The digests depend only on this file, never on addresses, timing,
hash randomisation or thread interleaving, so a run with an allocator
preloaded must print exactly what a plain run prints.

Exit status: 0 when every self-check held, 1 otherwise (named on stderr).
"""

import hashlib
import json
import multiprocessing
import os
import random
import subprocess
import sys
import threading
import zlib

failures = 0


def check(ok, what):
    global failures
    if not ok:
        failures += 1
        print(f"alloc_heavy: check failed: {what}", file=sys.stderr)


def report(section, *values):
    h = hashlib.sha256()
    for v in values:
        h.update(repr(v).encode())
    print(f"{section:<14} {h.hexdigest()[:32]}", flush=True)


def varied_size(r):
    """A size from tiny to multi-MiB, weighted towards the small end."""
    k = r.randrange(100)
    if k < 50:
        return r.randrange(1, 64)
    if k < 80:
        return r.randrange(64, 4096)
    if k < 97:
        return r.randrange(4096, 256 * 1024)
    return r.randrange(1 << 20, 4 << 20)


def section_objects():
    """Many small containers built, kept for a while, and dropped."""
    r = random.Random(1)
    total = 0
    kept = []
    for i in range(30000):
        d = {f"k{j}": [j] * (j % 7) for j in range(r.randrange(12))}
        t = tuple(range(r.randrange(20)))
        s = "x" * r.randrange(100) + str(i)
        kept.append((d, t, s))
        if len(kept) > 5000:
            # Drop a random slice: frees in an order unrelated to the
            # allocation order.
            a = r.randrange(len(kept))
            del kept[a:a + 2000]
        total += len(d) + len(t) + len(s)
    nested = [[{"v": [i, str(i), float(i)]} for i in range(50)] for _ in range(2000)]
    total += sum(len(x) for x in nested)
    del nested, kept
    report("objects", total)


def section_buffers():
    """bytes and bytearray from 1 byte to several MiB, grown in place."""
    r = random.Random(2)
    h = hashlib.sha256()
    for _ in range(3000):
        n = varied_size(r)
        b = r.randbytes(min(n, 4096)) * (n // 4096 + 1)
        h.update(b[:n][-64:])
    # bytearray grown by appends reallocates its buffer many times.
    ba = bytearray()
    for i in range(200000):
        ba += i.to_bytes(4, "little") * (1 + i % 5)
    h.update(ba)
    del ba[1000:len(ba) - 1000]
    h.update(ba)
    parts = [bytes([i % 256]) * (i % 3000) for i in range(5000)]
    joined = b"".join(parts)
    h.update(joined)
    big = bytes(8 << 20)
    check(big.count(0) == len(big), "zeroed 8 MiB buffer is zero")
    h.update(len(big).to_bytes(8, "little"))
    report("buffers", h.hexdigest())


def section_strings():
    r = random.Random(3)
    words = ["".join(chr(97 + r.randrange(26)) for _ in range(r.randrange(1, 12)))
             for _ in range(20000)]
    text = " ".join(words)
    check(text.split(" ") == words, "split undoes join")
    upper = text.upper()
    replaced = text.replace("a", "\u00e4\u00e4").replace("e", "\u20ac")
    encoded = replaced.encode("utf-8")
    check(encoded.decode("utf-8") == replaced, "utf-8 round trip")
    pieces = []
    for i in range(100000):
        pieces.append(f"{i}:{words[i % len(words)]};")
    s = "".join(pieces)
    report("strings", len(upper), hashlib.sha256(encoded).hexdigest(),
           hashlib.sha256(s.encode()).hexdigest())


def make_doc(r, depth):
    if depth == 0 or r.randrange(4) == 0:
        k = r.randrange(4)
        if k == 0:
            return r.randrange(-10**9, 10**9)
        if k == 1:
            return "".join(chr(32 + r.randrange(90)) for _ in range(r.randrange(40)))
        if k == 2:
            return r.random() < 0.5
        return None
    if r.randrange(2):
        return [make_doc(r, depth - 1) for _ in range(r.randrange(8))]
    return {f"f{r.randrange(1000)}": make_doc(r, depth - 1) for _ in range(r.randrange(8))}


def section_json():
    r = random.Random(4)
    h = hashlib.sha256()
    for _ in range(40):
        doc = make_doc(r, 7)
        text = json.dumps(doc, sort_keys=True)
        back = json.loads(text)
        check(back == doc, "json round trip")
        h.update(json.dumps(back, sort_keys=True, indent=1).encode())
    # One large document: a few MiB of JSON text.
    big = {str(i): {"name": "n" * (i % 50), "vals": list(range(i % 30))} for i in range(40000)}
    text = json.dumps(big, sort_keys=True)
    check(json.loads(text) == big, "big json round trip")
    h.update(text.encode())
    report("json", h.hexdigest())


def section_sort():
    r = random.Random(5)
    nums = [r.randrange(10**12) for _ in range(200000)]
    strs = [format(n, "x") * (1 + n % 3) for n in nums[:100000]]
    recs = [(n % 1000, str(n), n) for n in nums[:100000]]
    nums.sort()
    strs.sort(reverse=True)
    recs.sort(key=lambda t: (t[0], t[1]))
    check(all(nums[i] <= nums[i + 1] for i in range(len(nums) - 1)), "sorted ints ordered")
    report("sort", nums[::1000], strs[::1000], recs[::1000])


def thread_work(idx, out):
    r = random.Random(100 + idx)
    h = hashlib.sha256()
    for i in range(200):
        n = varied_size(r)
        # hashlib and zlib release the GIL on large inputs, so these
        # threads really do run (and allocate) at the same time.
        blob = r.randbytes(min(n, 65536)) * (1 + n // 65536)
        h.update(hashlib.sha256(blob).digest())
        if i % 10 == 0:
            z = zlib.compress(blob, 1)
            check(zlib.decompress(z) == blob, "zlib round trip in a thread")
            h.update(len(blob).to_bytes(8, "little"))
        d = {j: str(j) * (j % 5) for j in range(r.randrange(500))}
        h.update(repr(sorted(d.items())[:5]).encode())
    out[idx] = h.hexdigest()


def section_threads():
    out = [None] * 4
    ts = [threading.Thread(target=thread_work, args=(i, out)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    check(all(out), "every thread finished")
    report("threads", out)


def child_work(seed):
    """Runs in a forked child: allocate, and return a digest."""
    r = random.Random(seed)
    keep = [b""] * 128
    h = hashlib.sha256()
    for i in range(1000):
        n = varied_size(r)
        if n > 65536:
            n = 65536 + i
        keep[r.randrange(128)] = bytes([i % 256]) * n
        if i % 50 == 0:
            h.update(json.dumps({str(k): k * i for k in range(100)}).encode())
    h.update(repr([len(b) for b in keep]).encode())
    return h.hexdigest()


def section_fork():
    results = []
    # os.fork with a pipe, while a thread of ours is allocating. The busy
    # thread holds the GIL only between bytecodes, so the fork can land
    # while it is inside zlib (GIL released, allocator in use).
    stop = threading.Event()

    def busy():
        r = random.Random(7)
        while not stop.is_set():
            blob = r.randbytes(200000)
            zlib.compress(blob, 1)

    t = threading.Thread(target=busy)
    t.start()
    for i in range(4):
        rfd, wfd = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(rfd)
            try:
                os.write(wfd, child_work(200 + i).encode())
                code = 0
            except BaseException:
                code = 3
            os._exit(code)
        os.close(wfd)
        with os.fdopen(rfd, "rb") as f:
            got = f.read().decode()
        _, status = os.waitpid(pid, 0)
        check(os.waitstatus_to_exitcode(status) == 0, "forked child exited 0")
        results.append(got)
    stop.set()
    t.join()

    # multiprocessing with the fork start method: a pool of forked workers,
    # results pickled back through pipes.
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(2) as pool:
        results.extend(pool.map(child_work, range(300, 308)))

    # A fresh interpreter (fork + exec): it inherits LD_PRELOAD.
    code = "import hashlib;print(hashlib.sha256(repr([list(range(i)) for i in range(2000)]).encode()).hexdigest())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, check=True, text=True)
    results.append(out.stdout.strip())
    report("fork", results)


def main():
    section_objects()
    section_buffers()
    section_strings()
    section_json()
    section_sort()
    section_threads()
    section_fork()
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
