"""Leak verdicts by evidence: a trend test that cannot be significant gives no verdict, an
early `ok` does not skip the wait for start-up growth, growth that reaches its limit soon
is `growing` at once, and the server's own accounting tells a filling cache from a leak."""

from __future__ import annotations

from pathlib import Path

from soak.analysis.leaks import LeakFit
from soak.analysis.pvalues import mann_kendall_points_needed, mann_kendall_smallest_p
from soak.analysis.scenario_sections import LeaksConfig
from soak.analysis.verdicts import run_verdicts
from soak.clock import NS_PER_S
from soak.points import Point
from soak.sinks.sqlite import SqliteStore

MiB = 1024**2
GiB = 1024**3
T0_S = 1_764_547_200
TAGS = {"soak": "r", "scenario": "s", "target": "t", "version": "v"}


def test_mann_kendall_needs_five_points_at_five_percent() -> None:
    assert mann_kendall_smallest_p(4) > 0.05 > mann_kendall_smallest_p(5)
    assert mann_kendall_points_needed(0.05) == 5
    assert mann_kendall_points_needed(0.01) == 6


def fit_of(values: list[float], window_s: float = 600.0) -> LeakFit:
    fit = LeakFit()
    fit.update(tuple((T0_S + (i + 0.5) * window_s, v) for i, v in enumerate(values)))
    return fit


def test_four_windows_of_a_steep_rise_are_not_judged_never_ok() -> None:
    """1,086 MiB/h against a 20 MiB/h threshold on 4 windows: the test cannot reach p < 0.05."""
    rise = [100 * MiB + i * 181 * MiB for i in range(4)]
    v = fit_of(rise).verdict(
        resource="rss_anon_bytes",
        threshold_per_hour=20 * MiB,
        min_windows=4,
        p_value_max=0.05,
        startup_max_s=0.0,
    )
    assert v.verdict == "insufficient" and v.why == "power"
    assert "needs 5" in v.note


def test_an_early_ok_does_not_skip_the_wait_for_start_up_growth() -> None:
    """Six noisy windows (no significant trend, nor a confidently flat one), then a steady
    rise from the warm-up's end: the rise still waits for start-up growth to stop."""
    noisy = [100.0, 104.0, 99.0, 105.0, 101.0, 106.0]
    asked = {
        "resource": "fds",
        "threshold_per_hour": 1.0,
        "min_windows": 6,
        "p_value_max": 0.05,
        "startup_max_s": 24 * 600.0,
    }
    fit = LeakFit()
    series = noisy[:]
    windows = tuple((T0_S + (i + 0.5) * 600, v) for i, v in enumerate(series))
    fit.update(windows)
    first = fit.verdict(**asked)  # type: ignore[arg-type]
    assert first.verdict == "ok"
    series += [106.0 + 3 * i for i in range(1, 9)]  # then 18 fds/h, still rising
    fit.update(tuple((T0_S + (i + 0.5) * 600, v) for i, v in enumerate(series)))
    later = fit.verdict(**asked)  # type: ignore[arg-type]
    assert later.verdict == "insufficient" and later.why == "startup", later


def store_with(tmp_path: Path, series: dict[str, list[float]], step_s: float) -> SqliteStore:
    store = SqliteStore(tmp_path / "points.db")
    n = max(len(v) for v in series.values())
    for i in range(n):
        t_ns = round((T0_S + i * step_s) * NS_PER_S)
        fields = {k: v[i] for k, v in series.items() if i < len(v)}
        process = {k: v for k, v in fields.items() if k in ("rss_anon_bytes", "fds")}
        runtime = {k: v for k, v in fields.items() if k not in process}
        store.write([Point("process", process, t_ns, TAGS)])
        if runtime:
            store.write([Point("runtime", runtime, t_ns, TAGS)])
    return store


def verdicts(store: SqliteStore, cfg: LeaksConfig, limits: dict[str, float] | None = None):  # type: ignore[no-untyped-def]
    found = run_verdicts(store, "r", cfg, T0_S * NS_PER_S, limits=limits, sample_interval_s=10.0)
    return {v.resource: v for v in found}


CFG = LeaksConfig(thresholds={"rss_anon_bytes": 5 * MiB})  # default 10-min windows, 4-h wait


def test_growth_that_reaches_the_limit_soon_is_growing_at_once(tmp_path: Path) -> None:
    """7 GiB/h from the first sample, 10-s samples: after one 10-min window (5 short
    windows of 2 min) it is `growing`, where the wait for start-up growth has 4 h to go."""
    per_tick = 7 * GiB / 360
    rss = [80 * MiB + i * per_tick for i in range(61)]
    store = store_with(tmp_path, {"rss_anon_bytes": rss}, 10.0)
    try:
        without = verdicts(store, CFG)["rss_anon_bytes"]
        assert without.verdict == "insufficient"
        v = verdicts(store, CFG, {"rss_anon_bytes": 24 * GiB})["rss_anon_bytes"]
        assert v.verdict == "growing", v
        assert "reaches its limit 24" in v.note and v.slope_per_hour > 6 * GiB
    finally:
        store.close()


def test_a_limit_far_off_changes_nothing(tmp_path: Path) -> None:
    per_tick = 10 * MiB / 360  # 10 MiB/h: 24 GiB in 100 days
    rss = [80 * MiB + i * per_tick for i in range(61)]
    store = store_with(tmp_path, {"rss_anon_bytes": rss}, 10.0)
    try:
        v = verdicts(store, CFG, {"rss_anon_bytes": 24 * GiB})["rss_anon_bytes"]
        assert v.verdict == "insufficient"
    finally:
        store.close()


def rising_rss(windows: int, mib_per_h: float) -> list[float]:
    per_tick = mib_per_h * MiB / 360
    return [80 * MiB + i * per_tick + (i % 7) * 64 * 1024 for i in range(windows * 60 + 1)]


def test_memory_rising_with_a_flat_cache_is_judged_at_once(tmp_path: Path) -> None:
    """20 MiB/h for 80 min while the server's cache entries stay flat: not the cache;
    judged at once instead of waiting 4 h for start-up growth to stop."""
    rss = rising_rss(8, 20)
    entries = [350.0] * len(rss)
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_entries": entries}, 10.0)
    try:
        v = verdicts(store, CFG)["rss_anon_bytes"]
        assert v.verdict == "growing", v
        assert "cache_entries 350 -> 350" in v.note
    finally:
        store.close()


def test_memory_rising_with_its_filling_cache_is_explained(tmp_path: Path) -> None:
    rss = rising_rss(8, 20)
    entries = [1000.0 + 5 * i for i in range(len(rss))]
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_entries": entries}, 10.0)
    try:
        v = verdicts(store, CFG)["rss_anon_bytes"]
        assert v.verdict == "levelling", v
        assert v.note.startswith("explained: the server's own cache_entries")
    finally:
        store.close()


def test_a_cache_in_bytes_explains_no_more_than_its_overhead(tmp_path: Path) -> None:
    """RSS rising 20 MiB/h while the cache says it holds 1 MiB/h more: a leak beside it."""
    rss = rising_rss(8, 20)
    cache = [5 * MiB + i * MiB / 360 for i in range(len(rss))]
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_bytes": cache}, 10.0)
    try:
        v = verdicts(store, CFG)["rss_anon_bytes"]
        assert v.verdict == "growing", v
    finally:
        store.close()


def test_a_cache_filling_slowly_does_not_explain_a_fast_rise(tmp_path: Path) -> None:
    """RSS rising 7 GiB/h while the cache gains 2 entries a second (about 1 MiB an entry):
    more than any cache entry costs; at its pace it reaches the limit: `growing`."""
    rss = rising_rss(2, 7 * 1024)
    entries = [100.0 + 20 * i for i in range(len(rss))]
    store = store_with(tmp_path, {"rss_anon_bytes": rss, "cache_entries": entries}, 10.0)
    try:
        v = verdicts(store, CFG, {"rss_anon_bytes": 24 * GiB})["rss_anon_bytes"]
        assert v.verdict == "growing", v
    finally:
        store.close()
