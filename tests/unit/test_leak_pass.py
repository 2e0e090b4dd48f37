"""A leak pass reads window minima kept by the store: the same verdicts as reading every sample."""

from __future__ import annotations

import math
import random
from collections import Counter
from itertools import pairwise
from pathlib import Path

import pytest

from soak.analysis.leaks import mann_kendall
from soak.analysis.verdicts import run_verdicts
from soak.clock import ns_to_s, s_to_ns
from soak.config import LeaksConfig
from soak.points import Point
from soak.sinks.sqlite import SqliteStore
from soak.windows import WindowMinima
from tests.support.leakpass import full_read_verdicts

MiB = 1024**2
SOAK = "r1"


def window_minima_before(
    times_s: list[float], values: list[float], window_s: float
) -> list[tuple[float, float]]:
    """soak.analysis.leaks.window_minima as it was before soak.windows: the oracle."""
    pairs = sorted(
        (float(t), float(v))
        for t, v in zip(times_s, values, strict=True)
        if math.isfinite(t) and math.isfinite(v)
    )
    if not pairs:
        return []
    t0, t_last = pairs[0][0], pairs[-1][0]
    diffs = sorted(b[0] - a[0] for a, b in pairwise(pairs)) or [0.0]
    mid = len(diffs) // 2
    step_s = diffs[mid] if len(diffs) % 2 else (diffs[mid - 1] + diffs[mid]) / 2.0
    minima: dict[int, float] = {}
    for t, v in pairs:
        k = int((t - t0) // window_s)
        old = minima.get(k)
        minima[k] = v if old is None or v < old else old
    out = []
    for k in sorted(minima):
        end_s = t0 + (k + 1) * window_s
        if t_last + step_s + 1e-9 * window_s < end_s:
            continue
        out.append((t0 + (k + 0.5) * window_s, minima[k]))
    return out


def mann_kendall_s_before(ys: list[float]) -> int:
    return sum(
        (ys[j] > ys[i]) - (ys[j] < ys[i]) for i in range(len(ys)) for j in range(i + 1, len(ys))
    )


@pytest.mark.parametrize("seed", range(8))
def test_window_minima_fed_in_batches_equal_the_oracle(seed: int) -> None:
    rng = random.Random(seed)
    start_ns = 1_765_000_000 * 10**9 + rng.randrange(10**9)  # a fractional second
    step_ns = rng.choice([10**9, 10 * 10**9, 1_000_000_007])
    times_ns = [
        start_ns + i * step_ns + rng.choice([0, 0, 0, rng.randrange(-999, 999)])
        for i in range(rng.randrange(1, 3000))
    ]
    times_ns = sorted(t for t in times_ns if rng.random() > 0.05)  # gaps
    values = [float(rng.randrange(100)) for _ in times_ns]  # ties
    times_s = [ns_to_s(t) for t in times_ns]
    window_s = rng.choice([60.0, 600.0, 37.5])
    windows = WindowMinima(window_s)
    i = 0
    while i < len(times_s):
        n = rng.randrange(1, 400)
        windows.add(zip(times_s[i : i + n], values[i : i + n], strict=True))
        i += n
        assert list(windows.complete()) == window_minima_before(times_s[:i], values[:i], window_s)


def test_the_same_windows_are_the_same_object_until_one_closes() -> None:
    windows = WindowMinima(10.0)
    windows.add((float(t), 5.0 - t % 3) for t in range(25))
    first = windows.complete()
    assert len(first) == 2
    windows.add([(25.0, 0.0), (26.0, 9.0)])  # inside the open window
    assert windows.complete() is first
    windows.add([(30.0, 1.0)])  # the window ending at 30 s is reached
    assert windows.complete() == (*first, (25.0, 0.0))


def test_mann_kendall_s_equals_the_pairwise_count() -> None:
    rng = random.Random(3)
    for n in (0, 1, 2, 5, 50, 400):
        ys = [float(rng.randrange(20)) for _ in range(n)]
        assert mann_kendall(ys)[0] == mann_kendall_s_before(ys)


def write_run(
    store: SqliteStore, start_ns: int, ticks: range, step_s: float, drift_per_h: float, seed: int
) -> None:
    """process rss_anon_bytes (sawtooth + drift), fds, threads; runtime goroutines."""
    rng = random.Random(seed)
    points = []
    for i in ticks:
        t_s = i * step_s
        saw = 50 * MiB * ((t_s % 420.0) / 420.0)
        rss = 300 * MiB + drift_per_h * t_s / 3600 + saw + rng.gauss(0, MiB)
        time_ns = start_ns + s_to_ns(t_s)
        tags = {"soak": SOAK, "scenario": "s", "target": "t", "version": "1"}
        fds = 40 + (i * drift_per_h > 0) * (i // 60) + rng.randrange(3)
        points.append(
            Point("process", {"rss_anon_bytes": rss, "fds": fds, "threads": 8}, time_ns, tags)
        )
        points.append(Point("runtime", {"goroutines": 20 + rng.randrange(5)}, time_ns, tags))
    store.write(points)


@pytest.mark.parametrize(("drift_per_h", "expected"), [(8 * MiB, "growing"), (0.0, "ok")])
def test_pass_over_a_growing_store_gives_the_full_read_verdicts(
    tmp_path: Path, drift_per_h: float, expected: str
) -> None:
    store = SqliteStore(tmp_path / "points.db")
    cfg = LeaksConfig(startup_max_s=0)  # as the reference, which judges at once
    start_ns = 1_765_000_000 * 10**9 + 123_456_789
    since_ns = start_ns + 600 * 10**9  # after a warm-up
    step_s, per_pass = 10.0, 6 * 6  # a pass every 6 minutes of 10-s ticks
    seen = Counter()
    for n in range(0, 8 * 360, per_pass):
        write_run(store, start_ns, range(n, n + per_pass), step_s, drift_per_h, seed=n)
        new = run_verdicts(store, SOAK, cfg, since_ns)
        for got, want in zip(new, full_read_verdicts(store, SOAK, cfg, since_ns), strict=True):
            if got != want:  # the fds' staircase (1 a window) is judged before min_windows
                assert want.why == "windows" and "a staircase that never falls back" in got.note
        seen.update(v.verdict for v in new if v.resource == "rss_anon_bytes")
    assert seen[expected] > 0
    assert {v.resource for v in new} == {"rss_anon_bytes", "fds", "threads", "goroutines"}


def test_a_late_sample_for_a_read_time_is_not_missed(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    cfg = LeaksConfig()
    start_ns = 1_765_000_000 * 10**9
    write_run(store, start_ns, range(0, 720), 10.0, 0.0, seed=1)
    before = run_verdicts(store, SOAK, cfg, start_ns)
    tags = {"soak": SOAK, "scenario": "s", "target": "t", "version": "1"}
    store.write([Point("process", {"rss_anon_bytes": 1.0}, start_ns + 5 * 10**9, tags)])
    after = run_verdicts(store, SOAK, cfg, start_ns)
    assert after == full_read_verdicts(store, SOAK, cfg, start_ns)
    assert after != before


def test_a_resource_never_sampled_has_no_verdict(tmp_path: Path) -> None:
    store = SqliteStore(tmp_path / "points.db")
    assert store.window_minima(SOAK, "process", "fds", 0, 600.0) is None
    assert run_verdicts(store, SOAK, LeaksConfig(), 0) == []
