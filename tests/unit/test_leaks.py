"""Leak verdicts on synthetic, seeded series: a GC sawtooth under noise."""

from __future__ import annotations

import random

import pytest

from soak.analysis.leaks import (
    MAX_WINDOWS,
    LeakVerdict,
    leak_points,
    leak_verdict,
    mann_kendall,
    merge_windows,
    theil_sen_slope,
    window_minima,
)

MiB = 1024**2


def sawtooth(
    seed: int,
    *,
    hours: float = 12.0,
    step_s: float = 60.0,
    drift_per_h: float = 0.0,
    level_after_h: float | None = None,
    noise: float = 1 * MiB,
) -> tuple[list[float], list[float]]:
    """300 MiB floor, a 50 MiB tooth every 7 min (the GC cycle), Gaussian noise, a drift."""
    rng = random.Random(seed)
    period_s, tooth = 420.0, 50 * MiB
    phase_s = rng.uniform(0, period_s)
    times, values = [], []
    t = 0.0
    while t < hours * 3600:
        grown_h = t / 3600 if level_after_h is None else min(t / 3600, level_after_h)
        saw = tooth * (((t + phase_s) % period_s) / period_s)
        times.append(t)
        values.append(300 * MiB + drift_per_h * grown_h + saw + rng.gauss(0, noise))
        t += step_s
    return times, values


def verdict(
    times: list[float], values: list[float], threshold: float, min_windows: int = 6
) -> LeakVerdict:
    return leak_verdict(
        times,
        values,
        resource="rss_anon_bytes",
        threshold_per_hour=threshold,
        window_s=600,
        min_windows=min_windows,
        p_value_max=0.05,
    )


def test_drift_of_1mib_per_hour_under_sawtooth_and_noise_is_growing() -> None:
    v = verdict(*sawtooth(1, drift_per_h=1 * MiB), threshold=0.5 * MiB)
    assert v.verdict == "growing"
    assert v.slope_per_hour == pytest.approx(1 * MiB, rel=0.3)
    assert v.p_value < 0.001
    assert v.windows == 72
    assert v.threshold_per_hour == 0.5 * MiB


def test_the_sawtooth_alone_would_hide_the_drift_without_window_minima() -> None:
    # The teeth are 50x the drift per hour: the window minimum is what exposes it.
    times, values = sawtooth(2, drift_per_h=1 * MiB)
    minima = window_minima(times, values, 600)
    assert max(values) - min(values) > 40 * MiB
    assert [m for _, m in minima[:6]] < [m for _, m in minima[-6:]]


def test_flat_sawtooth_is_ok() -> None:
    v = verdict(*sawtooth(3), threshold=0.5 * MiB)
    assert v.verdict == "ok"
    assert abs(v.slope_per_hour) < 0.5 * MiB


@pytest.mark.parametrize("seed", range(5))
def test_flat_sawtooth_is_ok_for_several_seeds(seed: int) -> None:
    assert verdict(*sawtooth(100 + seed), threshold=0.5 * MiB).verdict == "ok"


def test_growth_then_plateau_is_levelling() -> None:
    times, values = sawtooth(4, drift_per_h=10 * MiB, level_after_h=6)
    v = verdict(times, values, threshold=5 * MiB)
    assert v.verdict == "levelling"
    assert abs(v.recent_slope_per_hour) < 5 * MiB


def test_steady_growth_is_not_mistaken_for_levelling() -> None:
    # A short run of a small steady leak: the tail's slope is noisy; it must stay `growing`.
    for seed in range(10):
        v = verdict(*sawtooth(200 + seed, hours=6, drift_per_h=1 * MiB), threshold=0.5 * MiB)
        assert v.verdict == "growing", (seed, v)


def test_growth_below_threshold_is_ok() -> None:
    v = verdict(*sawtooth(5, drift_per_h=1 * MiB), threshold=5 * MiB)
    assert v.verdict == "ok"
    assert v.p_value < 0.05  # significant, but under the threshold


def test_too_short_is_insufficient() -> None:
    times, values = sawtooth(6, hours=0.75, drift_per_h=100 * MiB)
    v = verdict(times, values, threshold=0.5 * MiB)
    assert v.verdict == "insufficient"
    assert v.windows == 4  # 45 min: four complete 10-min windows, the fifth is partial


def test_no_samples_is_insufficient_with_finite_numbers() -> None:
    v = verdict([], [], threshold=1.0)
    assert (v.verdict, v.windows, v.slope_per_hour, v.p_value) == ("insufficient", 0, 0.0, 1.0)


def test_flat_integer_series_with_all_ties() -> None:
    times = [float(t) for t in range(0, 7200, 60)]
    v = leak_verdict(
        times,
        [47.0] * len(times),
        resource="fds",
        threshold_per_hour=1.0,
        window_s=600,
        min_windows=6,
        p_value_max=0.05,
    )
    assert (v.verdict, v.slope_per_hour, v.p_value) == ("ok", 0.0, 1.0)


def test_fds_growing_one_every_ten_minutes() -> None:
    times = [float(t) for t in range(0, 4 * 3600, 60)]
    values = [40.0 + t // 600 for t in times]
    v = leak_verdict(
        times,
        values,
        resource="fds",
        threshold_per_hour=1.0,
        window_s=600,
        min_windows=6,
        p_value_max=0.05,
    )
    assert v.verdict == "growing"
    assert v.slope_per_hour == pytest.approx(6.0)


def test_window_minima_skip_the_partial_last_window_and_gaps() -> None:
    times = [0.0, 10.0, 20.0, 30.0, 70.0, 80.0, 90.0, 100.0]
    values = [5.0, 3.0, 4.0, 9.0, 1.0, 2.0, 8.0, 0.0]
    # Windows of 30 s from t=0: [0,30) [30,60) [60,90) [90,120): the last is partial.
    assert window_minima(times, values, 30.0) == [(15.0, 3.0), (45.0, 9.0), (75.0, 1.0)]


def test_mann_kendall_known_values() -> None:
    s, p = mann_kendall([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0, 10.0])
    assert s == 45
    # var = 10*9*25/18 = 125; z = 44/sqrt(125) = 3.9355; two-sided p = 8.3e-5
    assert p == pytest.approx(8.30e-5, rel=0.01)
    s, p = mann_kendall([1.0, 1.0, 2.0, 2.0, 3.0])
    # ties: two groups of 2: var = (5*4*15 - 2*(2*1*9))/18 = 14.67; z = 7/3.83 = 1.828
    assert s == 8
    assert p == pytest.approx(0.0676, abs=0.001)


def test_theil_sen_ignores_an_outlier() -> None:
    xs = [float(x) for x in range(10)]
    ys = [2.0 * x for x in xs]
    ys[5] = 1000.0
    assert theil_sen_slope(xs, ys) == pytest.approx(2.0)


def test_leak_points() -> None:
    v = LeakVerdict("fds", "growing", 6.0, 0.001, 24, 1.0)
    (p,) = leak_points([v], 123)
    assert p.measurement == "leak"
    assert p.tags == {"resource": "fds"}
    assert p.fields == {"slope_per_hour": 6.0, "p_value": 0.001, "verdict": "growing"}
    assert p.time_ns == 123


def test_a_week_is_merged_into_at_most_max_windows() -> None:
    flat = verdict(*sawtooth(8, hours=168), threshold=0.5 * MiB)
    assert flat.verdict == "ok"
    assert flat.windows <= MAX_WINDOWS
    drift = verdict(*sawtooth(9, hours=168, drift_per_h=1 * MiB), threshold=0.5 * MiB)
    assert drift.verdict == "growing"
    assert drift.slope_per_hour == pytest.approx(1 * MiB, rel=0.05)


def test_merge_windows_keeps_the_minimum_of_complete_groups() -> None:
    minima = [(float(t), float(v)) for t, v in enumerate([5, 3, 4, 9, 1, 2, 8])]
    # Groups of 3: the seventh window waits for two more (groups, once made, stay).
    assert merge_windows(minima, 3) == [(1.0, 3.0), (4.0, 1.0)]
    assert merge_windows(minima, 10) == minima
