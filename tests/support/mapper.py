"""A process whose memory grows in one way, for the `smaps` sampler's tests.

    python -m tests.support.mapper --file PATH --kib-per-s 512   # maps PATH, grows and reads it
    python -m tests.support.mapper --kib-per-s 512               # anonymous memory (malloc)

Every second (on absolute deadlines) it adds `--kib-per-s` KiB: with `--file`,
the file is extended and the new part mapped shared and read, so the pages are
resident and file-backed (clean: nothing anonymous grows); without it, a
bytearray is filled (anonymous). It ends after `--duration-s` (every loop is
bounded) or on SIGTERM, and prints `ready` once started.
"""

from __future__ import annotations

import argparse
import mmap
import os
import sys
import time

from tests.support.procs import stop_on_sigterm


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="mapper")
    ap.add_argument("--file", default=None)
    ap.add_argument("--kib-per-s", type=int, default=512)
    ap.add_argument("--duration-s", type=float, default=60.0)
    args = ap.parse_args(argv)
    stop = stop_on_sigterm()
    chunk = args.kib_per_s * 1024
    held: list[object] = []
    fd = os.open(args.file, os.O_RDWR | os.O_CREAT, 0o600) if args.file else -1
    size = 0
    block = b"\x5a" * chunk  # allocated once: writing the file grows nothing anonymous
    checksum = 0
    start = time.monotonic()
    print("ready", flush=True)
    tick = 0
    while not stop.is_set() and tick < args.duration_s:
        tick += 1
        if fd >= 0:
            os.pwrite(fd, block, size)  # the page cache holds it; then mapped
            size += chunk
            m = mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ)
            for offset in range(0, size, mmap.PAGESIZE):  # touched: resident in this process
                checksum += m[offset]
            held.append(m)
        else:
            held.append(bytearray(b"\x5a") * chunk)
        time.sleep(max(0.0, start + tick - time.monotonic()))
    return 0 if checksum >= 0 else 1


if __name__ == "__main__":
    sys.exit(main())
