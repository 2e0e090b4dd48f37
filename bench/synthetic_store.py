"""A synthetic run in the embedded store, written through SqliteStore, cached under /tmp.

    .venv/bin/python bench/synthetic_store.py --ticks 86400 --step-s 1   # prints the path
    .venv/bin/python bench/synthetic_store.py --smoke    # 600 ticks in a temporary directory

Each tick writes what a soak with load writes: `process` (15 fields), `runtime`
(4) and `load` class `all` (14 and `rcode_noerror`), with the run's four tags.
Memory is a GC sawtooth (a 50 MiB tooth every 7 min) on a flat floor with
noise; one tick in the middle of the run has a 400 MiB RSS spike (a report
must still show it). Stores are cached by their parameters: a second call
returns at once.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from soak.clock import NS_PER_S
from soak.names import SERIES
from soak.points import Point
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
MiB = 1024**2
CACHE_ENV = "SOAK_BENCH_STORES"  # where stores are cached, if not in /tmp/soak-bench-stores
START_NS = 1_764_547_200 * S  # 2025-12-01 00:00 UTC
RUN_ID = "synthetic"
TAGS = {"soak": RUN_ID, "scenario": "synthetic", "target": "unbound", "version": "1.22.0"}
SPIKE_BYTES = 400 * MiB
_BATCH_TICKS = 3600


def spike_tick(ticks: int) -> int:
    return ticks // 2 + 7


def tick_points(i: int, step_s: float, rng: random.Random, ticks: int) -> list[Point]:
    t_s = i * step_s
    t_ns = START_NS + round(t_s * S)
    saw = 50 * MiB * ((t_s % 420.0) / 420.0)
    anon = 300 * MiB + saw + rng.gauss(0, MiB) + (SPIKE_BYTES if i == spike_tick(ticks) else 0)
    process = {f: float(rng.randrange(1000)) for f in SERIES["process"].fields}
    process.update(
        rss_bytes=anon + 20 * MiB,
        rss_anon_bytes=anon,
        fds=float(40 + rng.randrange(3)),
        fd_limit=65536.0,
        threads=8.0,
        cpu_user_s=t_s * 0.4,
        cpu_system_s=t_s * 0.1,
    )
    runtime = {
        "goroutines": float(20 + rng.randrange(5)),
        "heap_inuse_bytes": 100 * MiB + saw / 2,
        "heap_alloc_bytes": 90 * MiB + saw / 2,
        "querylog_dropped_total": 0.0,
    }
    qps = 1000.0 * step_s
    lost = float(rng.randrange(2))
    load = {
        "sent": qps,
        "completed": qps - lost,
        "lost": lost,
        "late": 0.0,
        "rate_target": 1000.0,
        "rate_achieved": 1000.0,
        "lat_min_ms": 0.05,
        "lat_avg_ms": 0.3 + rng.random() * 0.05,
        "lat_p50_ms": 0.25,
        "lat_p95_ms": 0.6,
        "lat_p99_ms": 0.9 + rng.random() * 0.2,
        "lat_p999_ms": 2.0,
        "lat_max_ms": 3.0 + rng.random(),
        "wrong_answers": 0.0,
        "rcode_noerror": qps - lost,
    }
    return [
        Point("process", process, t_ns, TAGS),
        Point("runtime", runtime, t_ns, TAGS),
        Point("load", load, t_ns, {**TAGS, "class": "all"}),
    ]


def synthetic_store(ticks: int, step_s: float = 1.0) -> Path:
    """The path of a store holding `ticks` ticks of `step_s` (made once, then cached)."""
    cache = Path(os.environ.get(CACHE_ENV, "/tmp/soak-bench-stores"))
    path = cache / f"run-{ticks}x{step_s:g}s.db"
    if path.exists():
        return path
    cache.mkdir(parents=True, exist_ok=True)
    part = path.with_suffix(".part")
    for leftover in cache.glob(part.name + "*"):
        leftover.unlink()
    store = SqliteStore(part)
    rng = random.Random(ticks)
    for first in range(0, ticks, _BATCH_TICKS):
        batch = range(first, min(ticks, first + _BATCH_TICKS))
        store.write([p for i in batch for p in tick_points(i, step_s, rng, ticks)])
    store.close()
    with contextlib.closing(sqlite3.connect(part)) as db:  # the WAL folded in: one file
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    part.rename(path)
    return path


@contextlib.contextmanager
def smoke_cache(smoke: bool) -> Iterator[None]:
    """--smoke: stores made in a temporary directory, not in (or from) the shared cache."""
    if not smoke:
        yield
        return
    kept = os.environ.get(CACHE_ENV)
    with tempfile.TemporaryDirectory(prefix="soak-bench-smoke-") as tmp:
        os.environ[CACHE_ENV] = tmp  # a child process (bench/report_long.py) finds it too
        try:
            yield
        finally:
            if kept is None:
                del os.environ[CACHE_ENV]
            else:
                os.environ[CACHE_ENV] = kept


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ticks", type=int)
    ap.add_argument("--step-s", type=float, default=1.0)
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    if args.smoke:
        args.ticks = 600
    elif args.ticks is None:
        ap.error("--ticks is required")
    with smoke_cache(args.smoke):
        make(args.ticks, args.step_s)


def make(ticks: int, step_s: float) -> None:
    started = time.monotonic()
    path = synthetic_store(ticks, step_s)
    size = path.stat().st_size
    print(f"{path}  {size / MiB:.1f} MiB  ({time.monotonic() - started:.1f} s)")


if __name__ == "__main__":
    main()
