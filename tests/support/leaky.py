"""A process whose memory grows on purpose, for leak-verdict and alert tests.

    python -m tests.support.leaky --kib-per-s 512                 # grows until it ends
    python -m tests.support.leaky --kib-per-s 512 --grow-for-s 20 # grows, then holds still
    python -m tests.support.leaky --fds-per-s 1                   # leaks file descriptors

Every second (on absolute deadlines) it holds `--kib-per-s` more KiB of
anonymous memory, written so that the pages are resident, and opens
`--fds-per-s` more file descriptors, for `--grow-for-s` seconds (default:
all along); then it only waits. It ends by itself after `--duration-s`
(every loop is bounded) or on SIGTERM. It prints `ready` once started.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from tests.support.procs import stop_on_sigterm


def leaky_target(name: str, *args: str) -> dict[str, Any]:
    """A scenario's `target`: this module as a process (`args` its options), run from the
    repository so that it imports the tests' packages."""
    root = Path(__file__).resolve().parents[2]
    return {
        "runtime": "process",
        "name": name,
        "argv": [sys.executable, "-m", "tests.support.leaky", *args],
        "cwd": str(root),
        "env": {"PYTHONPATH": str(root)},
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="leaky")
    ap.add_argument("--kib-per-s", type=float, default=256.0)
    ap.add_argument("--fds-per-s", type=int, default=0)
    ap.add_argument("--grow-for-s", type=float, default=None)
    ap.add_argument("--duration-s", type=float, default=3600.0)
    args = ap.parse_args(argv)

    stop = stop_on_sigterm()
    held: list[bytearray] = []
    fds: list[int] = []
    chunk = int(args.kib_per_s * 1024)
    start = time.monotonic()
    print("ready", flush=True)
    tick = 0
    while not stop.is_set():
        tick += 1
        deadline = start + tick
        elapsed = deadline - start
        if elapsed > args.duration_s:
            break
        if args.grow_for_s is None or elapsed <= args.grow_for_s:
            if chunk > 0:
                held.append(bytearray(b"\x5a") * chunk)  # filled: resident, not just reserved
            fds += [os.open(os.devnull, os.O_RDONLY) for _ in range(args.fds_per_s)]
        time.sleep(max(0.0, deadline - time.monotonic()))
    for fd in fds:
        os.close(fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
