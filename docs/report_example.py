# The program of docs/report.png (scripts/report-screenshot.sh runs it under
# `tally report`): a python3 that parses batches in the group "parse",
# renders them in "render" (through libtally.so, which tally preloads, by
# ctypes), peaks in its third batch, hands a last job to a child process and
# ends with a small cache.
import ctypes
import subprocess
import sys
import time


class Group(ctypes.Structure):
    _fields_ = [("id", ctypes.c_uint32)]


class Guard(ctypes.Structure):
    _fields_ = [("prev", ctypes.c_uint32)]


sdk = ctypes.CDLL(None)  # libtally.so, preloaded by tally
sdk.tally_group_register.restype = Group
sdk.tally_group_register.argtypes = [ctypes.c_char_p]
sdk.tally_group_enter.restype = Guard
sdk.tally_group_enter.argtypes = [Group]
sdk.tally_group_exit.argtypes = [Guard]


def in_group(name, fn, *args):
    guard = sdk.tally_group_enter(sdk.tally_group_register(name.encode()))
    try:
        return fn(*args)
    finally:
        sdk.tally_group_exit(guard)


def parse_batch(n):
    return [bytes(200_000) for _ in range(n)]


def render_rows(rows):
    return [bytearray(r[:80_000]) for r in rows]


cache = []
for step, n in enumerate((60, 90, 160, 60)):
    rows = in_group("parse", parse_batch, n)
    time.sleep(0.3)
    out = in_group("render", render_rows, rows)
    time.sleep(0.3)
    cache.append(out[:4])
    del rows, out
subprocess.run([sys.executable, "-c", "x = [bytes(100_000) for _ in range(200)]; "
                "import time; time.sleep(0.6)"], check=True)
time.sleep(0.5)
