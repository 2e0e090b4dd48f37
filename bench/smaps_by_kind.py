"""A process's anonymous memory by kind of mapping, every minute, as JSON lines.

    python bench/smaps_by_kind.py PID OUT.jsonl [--interval-s 60]
    python bench/smaps_by_kind.py --smoke      # a child `sleep 2`: that it still runs

Reads /proc/PID/smaps (read-only; the process is not paused) and sums the
`Anonymous:` kB of each mapping into: `[heap]` (glibc's main arena), 1-MiB
anonymous mappings (pymalloc arenas), other anonymous mappings of 1-64 MiB
(glibc's per-thread arenas), smaller ones, and named files. Run it beside
bench/service_soak.py against the `soak serve` PID to see where growth goes.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path

MiB_KB = 1024


def kind_of(name: str, size_kb: int) -> str:
    if name != "[anon]":
        return name if name.startswith("[") else "file:" + name.rsplit("/", 1)[-1]
    if size_kb == MiB_KB:
        return "anon 1MiB (pymalloc arenas)"
    if MiB_KB < size_kb <= 64 * MiB_KB:
        return "anon 1-64MiB (thread arenas)"
    return "anon <1MiB" if size_kb < MiB_KB else "anon >64MiB"


def anonymous_by_kind(smaps_text: str) -> Counter[str]:
    out: Counter[str] = Counter()
    kind = ""
    for line in smaps_text.splitlines():
        parts = line.split()
        if parts and "-" in parts[0] and not parts[0].endswith(":"):
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            kind = kind_of(parts[5] if len(parts) > 5 else "[anon]", (hi - lo) // 1024)
        elif parts and parts[0] == "Anonymous:" and int(parts[1]):
            out[kind] += int(parts[1])
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("pid", type=int, nargs="?")
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--interval-s", type=float, default=60.0)
    ap.add_argument("--smoke", action="store_true", help="a child `sleep 2`, read every 0.5 s")
    args = ap.parse_args()
    if args.smoke:
        with tempfile.TemporaryDirectory() as tmp:
            child = subprocess.Popen(["sleep", "2"])
            try:
                return watch(child.pid, Path(tmp) / "smaps.jsonl", 0.5, child.poll)
            finally:
                child.kill()
                child.wait()
    if args.pid is None or args.out is None:
        ap.error("PID and OUT are required")
    return watch(args.pid, args.out, args.interval_s, lambda: None)


def watch(pid: int, out_path: Path, interval_s: float, ended: Callable[[], object]) -> int:
    """Rows until the process ends (a child of ours is reaped by `ended`, so it does end)."""
    start = time.monotonic()
    rows = 0
    with out_path.open("a") as out:
        while ended() is None:
            try:
                text = Path(f"/proc/{pid}/smaps").read_text()
            except OSError:
                break  # the process ended
            by_kind = anonymous_by_kind(text)
            row = {
                "t_s": round(time.monotonic() - start),
                "anon_kb": sum(by_kind.values()),
                "by": dict(by_kind.most_common(8)),
            }
            out.write(json.dumps(row) + "\n")
            out.flush()
            rows += 1
            time.sleep(interval_s)
    print(f"pid {pid}: {rows} readings in {out_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
