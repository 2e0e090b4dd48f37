"""One leak-analysis pass over a store holding 1 hour, 1 day and 7 days of 1-s ticks.

    .venv/bin/python bench/leak_pass.py                 # 1 h, 1 d, 7 d (stores cached in /tmp)
    .venv/bin/python bench/leak_pass.py --hours 1 24    # some of them
    .venv/bin/python bench/leak_pass.py --smoke         # 15- and 30-min stores, 3 minutes added

The stores are synthetic runs written through SqliteStore (bench/synthetic_store.py),
default leaks config (10-min windows, five resources, four of them sampled here).
For each store:

- `full read` (the named peer: the pass as it was before the store kept window
  minima): every sample of every resource read, windows and fit computed;
- `first`: the new pass on a freshly opened store (it reads everything once);
- then 30 minutes of ticks are appended a minute at a time, each followed by a
  pass with the same kept fits, as the service does: `steady` is the median of
  those passes (no window closed: the verdict is remembered), `window end` the
  slowest (three windows close; past 400 windows they are merged in groups, so
  a group of three completes in one of them at 7 days and the kept fits take
  a point), `mean` the mean of the thirty; two more minutes, each followed by
  a traced pass, give the steady peak;
- `refit`: a pass with fresh fits on the store whose window minima are kept,
  the cost of the pass in which the group size grows (at 400, 800, 1,200
  windows: 2.8, 5.6, 8.3 days of 10-min windows) and all fits start afresh.

CPU is the process's CPU time (time.process_time) of the pass; peak is
tracemalloc's peak of Python allocations during a second, traced run of the
same pass (SQLite's page cache is not counted). The appended ticks are deleted
again, so the cached stores stay as made.
"""

from __future__ import annotations

import argparse
import contextlib
import random
import sqlite3
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests.support

from tests.support.leakpass import full_read_verdicts

from soak.analysis.leaks import LeakFits, LeakVerdict
from soak.analysis.verdicts import run_verdicts
from soak.clock import NS_PER_S
from soak.config import LeaksConfig
from soak.sinks.sqlite import SqliteStore
from synthetic_store import RUN_ID, START_NS, smoke_cache, synthetic_store, tick_points

S = NS_PER_S
MiB = 1024**2
MINUTES = 30  # passes after the store's end: three windows close


def full_read_pass(store: SqliteStore, cfg: LeaksConfig) -> list[LeakVerdict]:
    """The pass before window minima were kept: read every sample, fit every time."""
    return full_read_verdicts(store, RUN_ID, cfg, START_NS)


def cpu_s(fn: Callable[[], object]) -> tuple[float, object]:
    started = time.process_time()
    result = fn()
    return time.process_time() - started, result


def kept_mib(fn: Callable[[], object]) -> float:
    """What fn leaves allocated (traced allocations still live after it returns)."""
    tracemalloc.start()
    try:
        kept = fn()
        size = tracemalloc.get_traced_memory()[0]
        del kept
        return size / MiB
    finally:
        tracemalloc.stop()


def peak_mib(fn: Callable[[], object]) -> float:
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1] / MiB
    finally:
        tracemalloc.stop()


def append_minute(store: SqliteStore, first_tick: int, ticks: int) -> None:
    rng = random.Random(first_tick)
    store.write(
        [p for i in range(first_tick, first_tick + 60) for p in tick_points(i, 1.0, rng, ticks)]
    )


def delete_after(path: Path, end_ns: int) -> None:
    with contextlib.closing(sqlite3.connect(path)) as db:
        db.execute("DELETE FROM samples WHERE time_ns >= ?", (end_ns,))
        db.commit()
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")


def bench_store(hours: float, minutes: int = MINUTES) -> dict[str, float]:
    ticks = round(hours * 3600)
    path = synthetic_store(ticks, 1.0)
    cfg = LeaksConfig()
    end_ns = START_NS + ticks * S
    out: dict[str, float] = {}
    store = SqliteStore(path)
    try:
        out["full_cpu_s"], old = cpu_s(lambda: full_read_pass(store, cfg))
        out["full_peak_mib"] = peak_mib(lambda: full_read_pass(store, cfg))
        first = SqliteStore(path)  # nothing kept yet
        out["first_cpu_s"], new = cpu_s(lambda: run_verdicts(first, RUN_ID, cfg, START_NS))
        first.close()
        assert new == old, "the kept-minima pass must give the full read's verdicts"
        traced = SqliteStore(path)
        out["first_peak_mib"] = peak_mib(lambda: run_verdicts(traced, RUN_ID, cfg, START_NS))
        traced.close()
        fits = LeakFits()  # the service's: kept across its passes
        run_verdicts(store, RUN_ID, cfg, START_NS, fits)
        out["refit_cpu_s"] = cpu_s(lambda: run_verdicts(store, RUN_ID, cfg, START_NS))[0]
        fresh = LeakFits()  # the memory a run's kept fits hold
        out["kept_mib"] = kept_mib(lambda: run_verdicts(store, RUN_ID, cfg, START_NS, fresh))
        passes = []
        for minute in range(minutes):
            append_minute(store, ticks + 60 * minute, ticks)
            passes.append(cpu_s(lambda: run_verdicts(store, RUN_ID, cfg, START_NS, fits))[0])
        peaks = []
        for minute in range(minutes, minutes + 2):  # traced passes are not timed
            append_minute(store, ticks + 60 * minute, ticks)
            peaks.append(peak_mib(lambda: run_verdicts(store, RUN_ID, cfg, START_NS, fits)))
        timed = passes
        out["steady_cpu_s"] = statistics.median(timed)
        out["window_end_cpu_s"] = max(timed)
        out["mean_cpu_s"] = statistics.mean(timed)
        out["steady_peak_mib"] = max(peaks)
        assert run_verdicts(store, RUN_ID, cfg, START_NS, fits) == full_read_pass(store, cfg)
    finally:
        store.close()
        delete_after(path, end_ns)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hours", type=float, nargs="+", default=[1, 24, 168])
    ap.add_argument("--smoke", action="store_true", help="seconds, tiny sizes: that it runs")
    args = ap.parse_args()
    minutes = 3 if args.smoke else MINUTES
    if args.smoke:
        args.hours = [0.25, 0.5]
    with smoke_cache(args.smoke):
        rows = {h: bench_store(h, minutes) for h in args.hours}
    head = (
        "store | full read CPU s | full read peak MiB | first pass CPU s | first peak MiB"
        " | refit CPU s | steady pass CPU s | window-end pass CPU s | mean of 30 CPU s"
        " | steady peak MiB | kept fits MiB"
    )
    print(head)
    for h, r in rows.items():
        print(
            f"{h:g} h | {r['full_cpu_s']:.3f} | {r['full_peak_mib']:.1f} | {r['first_cpu_s']:.3f}"
            f" | {r['first_peak_mib']:.1f} | {r['refit_cpu_s']:.4f} | {r['steady_cpu_s']:.4f}"
            f" | {r['window_end_cpu_s']:.4f} | {r['mean_cpu_s']:.4f} | {r['steady_peak_mib']:.2f}"
            f" | {r['kept_mib']:.2f}"
        )
    if len(rows) > 1:
        lo, hi = rows[min(rows)], rows[max(rows)]
        for key in ("steady_cpu_s", "mean_cpu_s", "window_end_cpu_s", "refit_cpu_s", "full_cpu_s"):
            print(f"{max(rows):g} h / {min(rows):g} h, {key}: {hi[key] / lo[key]:.2f}")


if __name__ == "__main__":
    main()
