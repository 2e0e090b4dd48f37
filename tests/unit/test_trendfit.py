"""The kept fit against a brute-force one: the same numbers after appends and drops."""

from __future__ import annotations

import math
import random
from collections import Counter
from statistics import NormalDist

import pytest

from soak.analysis.leaks import LeakFit, leak_verdict_from_minima, merge_windows
from soak.analysis.trendfit import Trend, TrendFit


def brute_trend(points: list[tuple[float, float]], p_value_max: float) -> Trend:
    """Every pair, sorted; Mann-Kendall by counting signs: the textbook definitions."""
    slopes = sorted(
        (yj - yi) / (xj - xi)
        for i, (xi, yi) in enumerate(points)
        for xj, yj in points[i + 1 :]
        if xj != xi
    )
    ys = [y for _, y in points]
    n = len(ys)
    s = sum((ys[j] > ys[i]) - (ys[j] < ys[i]) for i in range(n) for j in range(i + 1, n))
    ties = sum(t * (t - 1) * (2 * t + 5) for t in Counter(ys).values() if t > 1)
    var = (n * (n - 1) * (2 * n + 5) - ties) / 18.0
    p = 1.0
    if var > 0 and s != 0:
        z = (s - 1 if s > 0 else s + 1) / math.sqrt(var)
        p = min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))
    if not slopes:
        return Trend(0.0, s, p, 0.0)
    m = len(slopes)
    median = slopes[m // 2] if m % 2 else (slopes[m // 2 - 1] + slopes[m // 2]) / 2.0
    z_bound = NormalDist().inv_cdf(1.0 - p_value_max)
    upper = min(m - 1, math.ceil((m + z_bound * math.sqrt(max(0.0, var))) / 2.0))
    return Trend(median, s, p, slopes[upper])


def series(seed: int, n: int, *, slope: float, integer: bool) -> list[tuple[float, float]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        y = slope * i + rng.gauss(0, 5.0)
        out.append((600.0 * i + 300.0, float(round(y)) if integer else y))
    return out


@pytest.mark.parametrize("integer", [False, True])  # integers tie, as fd counts do
def test_appends_and_drops_give_the_brute_force_numbers(integer: bool) -> None:
    points = series(1, 260, slope=0.3, integer=integer)
    fit = TrendFit()
    kept: list[tuple[float, float]] = []
    for i, point in enumerate(points):
        fit.append(point)
        kept.append(point)
        if i % 3 == 2:  # a sliding window that also grows, as the levelling tail does
            assert fit.pop_first() == kept.pop(0)
        if i % 17 == 0 or i == len(points) - 1:
            for p_max in (0.05, 0.005):
                assert fit.trend(p_max) == brute_trend(kept, p_max)


def test_a_regime_change_moves_the_median_out_of_the_band_and_back_in() -> None:
    flat = series(2, 150, slope=0.0, integer=False)
    steep = [
        (x + 150 * 600.0, y + 40.0 * i)
        for i, (x, y) in enumerate(series(3, 150, slope=0, integer=False))
    ]
    fit = TrendFit()
    for k, point in enumerate(flat + steep):
        fit.append(point)
        if k >= 1:
            assert fit.trend(0.05) == brute_trend((flat + steep)[: k + 1], 0.05)


def test_short_fits_have_finite_numbers() -> None:
    assert TrendFit().trend(0.05) == Trend(0.0, 0, 1.0, 0.0)
    assert TrendFit([(1.0, 5.0)]).trend(0.05) == Trend(0.0, 0, 1.0, 0.0)
    same_x = TrendFit([(1.0, 5.0), (1.0, 7.0)]).trend(0.05)
    assert same_x.slope_per_s == 0.0 and same_x.s == 1


def test_a_kept_leak_fit_gives_the_verdict_of_a_fresh_one() -> None:
    """Windows arriving one by one past MAX_WINDOWS (groups of 2, then 3): each verdict is
    the one a fit made from all the windows at once gives."""
    rng = random.Random(4)
    windows = [(600.0 * i + 300.0, 1e8 + 2e3 * i + rng.gauss(0, 1e5)) for i in range(820)]
    kept = LeakFit()
    asked = {"resource": "rss_anon_bytes", "threshold_per_hour": 1e3, "min_windows": 6}
    for n in [*range(1, 40), *range(395, 410), *range(795, 820)]:
        kept.update(tuple(windows[:n]))
        v = kept.verdict(**asked, p_value_max=0.05)
        assert v == leak_verdict_from_minima(windows[:n], **asked, p_value_max=0.05)
        assert v.windows == len(merge_windows(windows[:n], 400))


def test_a_lowered_closed_window_starts_the_fit_afresh() -> None:
    windows = [(600.0 * i, 100.0 + i) for i in range(30)]
    kept = LeakFit()
    asked = {"resource": "fds", "threshold_per_hour": 1.0, "min_windows": 6, "p_value_max": 0.05}
    kept.update(tuple(windows))
    assert kept.verdict(**asked).verdict == "growing"
    lowered = [(t, 100.0) for t, _ in windows]  # every minimum lowered: the same length
    kept.update(tuple(lowered))
    assert kept.verdict(**asked) == leak_verdict_from_minima(lowered, **asked)
    assert kept.verdict(**asked).verdict == "ok"
