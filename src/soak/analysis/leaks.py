"""Leak verdicts: is a resource still growing after the warm-up?

Pure functions, no I/O. For one resource series (anonymous RSS, heap in use,
fds, goroutines or threads):

1. Take the minimum of each window (10 min by default). A garbage-collected
   heap rises and falls in a sawtooth; its floor is what a leak moves, and the
   window minimum removes the teeth without a smoothing model.
2. Fit a Theil-Sen slope (the median of the pairwise slopes) on the window
   minima: one odd window (a burst, a reload) cannot tilt it.
3. Test the trend with Mann-Kendall (with the tie correction: fds, goroutines
   and threads are integers and tie often; the normal approximation).

The verdict is `growing` when the slope is above the resource's threshold per
hour and the trend is significant; `levelling` when the first part grew that
way but the last part is flat (memory that settles: "it will stabilise");
`insufficient` with fewer than `min_windows` windows; `ok` otherwise.

Every number in a verdict is finite (no NaN): with fewer than two windows the
slope is 0 and the p-value 1, and the verdict says `insufficient`.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

from soak.points import Point
from soak.windows import WindowMinima

VERDICTS = ("ok", "growing", "levelling", "insufficient")

# The last part judged for `levelling` is this share of the windows (at least
# _TAIL_MIN_WINDOWS of them, and as many again before it).
_TAIL_SHARE = 1 / 3
_TAIL_MIN_WINDOWS = 3
# A tail is flat when its slope is confidently under the threshold (Sen's
# upper bound, not the point estimate: a steady leak near the threshold must
# not pass as `levelling` because the short tail's noisy slope dipped under
# it) and at most this share of the first part's slope.
_TAIL_MAX_SHARE_OF_HEAD = 0.5
_TAIL_CONFIDENCE_FACTOR = 0.1  # the tail's bound is at 1 - p_value_max / 10
# The fit is O(n^2) in windows: a week of 10-min windows (1,008) is merged
# into at most this many (minima of consecutive windows), so a verdict costs
# about 0.1 s however long the run.
MAX_WINDOWS = 400


@dataclass(frozen=True, slots=True)
class LeakVerdict:
    resource: str
    verdict: str  # one of VERDICTS
    slope_per_hour: float  # Theil-Sen slope of the window minima, units per hour
    p_value: float  # Mann-Kendall, two-sided
    windows: int  # complete windows used
    threshold_per_hour: float
    # Slope of the last part (the tail judged for `levelling`); 0 when too short.
    recent_slope_per_hour: float = 0.0


@dataclass(frozen=True, slots=True)
class Trend:
    slope_per_s: float
    s: int  # Mann-Kendall S: > 0 rising, < 0 falling
    p_value: float
    # Sen's one-sided upper confidence bound on the slope (at 1 - p_value_max).
    slope_upper_per_s: float


def window_minima(
    times_s: Sequence[float], values: Sequence[float], window_s: float
) -> list[tuple[float, float]]:
    """(window midpoint, minimum) of every complete window, aligned to the first sample.

    A window counts only when the samples reach its end (within one sample
    interval): the minimum of a half-filled window is biased upwards, since it
    may not have seen the next trough yet. Windows with no sample (a gap in
    sampling) are skipped, not filled in. Non-finite values are ignored.
    (soak.windows.WindowMinima owns the rule; a store keeps one per series.)
    """
    windows = WindowMinima(window_s)
    windows.add(sorted((float(t), float(v)) for t, v in zip(times_s, values, strict=True)))
    return list(windows.complete())


def merge_windows(
    minima: Sequence[tuple[float, float]], max_windows: int
) -> list[tuple[float, float]]:
    """At most max_windows: groups of k consecutive windows, each its mean time and minimum."""
    k = math.ceil(len(minima) / max_windows) if max_windows > 0 else 1
    if k <= 1:
        return list(minima)
    groups = [minima[i : i + k] for i in range(0, len(minima), k)]
    return [(sum(t for t, _ in g) / len(g), min(v for _, v in g)) for g in groups]


def pairwise_slopes(xs: Sequence[float], ys: Sequence[float]) -> list[float]:
    """The slopes of every pair with distinct x, sorted."""
    slopes: list[float] = []
    for i, (xi, yi) in enumerate(zip(xs, ys, strict=True)):
        slopes += [
            (yj - yi) / (xj - xi)
            for xj, yj in zip(xs[i + 1 :], ys[i + 1 :], strict=True)
            if xj != xi
        ]
    slopes.sort()
    return slopes


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the pairwise slopes (0 with fewer than two points)."""
    slopes = pairwise_slopes(xs, ys)
    return _median(slopes) if slopes else 0.0


def mann_kendall(ys: Sequence[float]) -> tuple[int, float]:
    """(S, two-sided p-value) of the Mann-Kendall trend test, ties corrected.

    Normal approximation with the continuity correction; ys in time order.
    All values tied (a flat fd count) gives S = 0 and p = 1.
    """
    n = len(ys)
    s = 0
    earlier: list[float] = []  # sorted; each value counts the earlier ones below and above it
    for y in ys:
        s += bisect_left(earlier, y) - (len(earlier) - bisect_right(earlier, y))
        insort(earlier, y)
    ties = sum(t * (t - 1) * (2 * t + 5) for t in Counter(ys).values() if t > 1)
    var = (n * (n - 1) * (2 * n + 5) - ties) / 18.0
    if var <= 0 or s == 0:
        return s, 1.0
    z = (s - 1 if s > 0 else s + 1) / math.sqrt(var)
    return s, min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))


def trend(points: Sequence[tuple[float, float]], p_value_max: float) -> Trend:
    """Theil-Sen slope, Mann-Kendall S and p, and Sen's upper bound on the slope."""
    xs = [p[0] for p in points]
    ys = [p[1] for p in points]
    s, p = mann_kendall(ys)
    slopes = pairwise_slopes(xs, ys)
    if not slopes:
        return Trend(0.0, s, p, 0.0)
    # Sen (1968): the bound is the slope ranked z * sd(S) / 2 above the median.
    n = len(xs)
    ties = sum(t * (t - 1) * (2 * t + 5) for t in Counter(ys).values() if t > 1)
    sd_s = math.sqrt(max(0.0, (n * (n - 1) * (2 * n + 5) - ties) / 18.0))
    z = NormalDist().inv_cdf(1.0 - p_value_max)
    upper_rank = min(len(slopes) - 1, math.ceil((len(slopes) + z * sd_s) / 2.0))
    return Trend(_median(slopes), s, p, slopes[upper_rank])


def _grows(t: Trend, threshold_per_hour: float, p_value_max: float) -> bool:
    return t.s > 0 and t.p_value < p_value_max and t.slope_per_s * 3600.0 > threshold_per_hour


def _levelled(
    minima: Sequence[tuple[float, float]], threshold_per_hour: float, p_value_max: float
) -> tuple[bool, float]:
    """(grew then flattened?, tail slope per hour)."""
    n = len(minima)
    tail_n = max(_TAIL_MIN_WINDOWS, round(n * _TAIL_SHARE))
    if n - tail_n < _TAIL_MIN_WINDOWS:
        return False, 0.0
    head = trend(minima[:-tail_n], p_value_max)
    # Calling a real leak `levelling` silences its alert: ask the tail for more confidence.
    tail = trend(minima[-tail_n:], p_value_max * _TAIL_CONFIDENCE_FACTOR)
    tail_per_h = tail.slope_per_s * 3600.0
    if not _grows(head, threshold_per_hour, p_value_max):
        return False, tail_per_h
    flat = (
        tail.slope_upper_per_s * 3600.0 < threshold_per_hour
        and tail.slope_per_s <= _TAIL_MAX_SHARE_OF_HEAD * head.slope_per_s
    )
    return flat, tail_per_h


def leak_verdict(
    times_s: Sequence[float],
    values: Sequence[float],
    *,
    resource: str,
    threshold_per_hour: float,
    window_s: float,
    min_windows: int,
    p_value_max: float,
) -> LeakVerdict:
    """The verdict for one resource series; give only samples after the warm-up."""
    return leak_verdict_from_minima(
        tuple(window_minima(times_s, values, window_s)),
        resource=resource,
        threshold_per_hour=threshold_per_hour,
        min_windows=min_windows,
        p_value_max=p_value_max,
    )


@lru_cache(maxsize=64)
def leak_verdict_from_minima(
    windows: tuple[tuple[float, float], ...],
    *,
    resource: str,
    threshold_per_hour: float,
    min_windows: int,
    p_value_max: float,
) -> LeakVerdict:
    """The verdict from the complete windows' (midpoint s, minimum), in time order.

    Remembered for the last few inputs: between two window ends a periodic pass
    gives the same windows, and the fit is the only part that grows with a run.
    """
    minima = merge_windows(windows, MAX_WINDOWS)
    n = len(minima)
    whole = trend(minima, p_value_max) if n >= 2 else Trend(0.0, 0, 1.0, 0.0)
    slope_per_h = whole.slope_per_s * 3600.0

    def verdict(name: str, recent_per_h: float = 0.0) -> LeakVerdict:
        return LeakVerdict(
            resource, name, slope_per_h, whole.p_value, n, threshold_per_hour, recent_per_h
        )

    if n < min_windows:
        return verdict("insufficient")
    levelled, tail_per_h = _levelled(minima, threshold_per_hour, p_value_max)
    if levelled:
        return verdict("levelling", tail_per_h)
    if _grows(whole, threshold_per_hour, p_value_max):
        return verdict("growing", tail_per_h)
    return verdict("ok", tail_per_h)


def leak_points(verdicts: Sequence[LeakVerdict], time_ns: int) -> list[Point]:
    """`leak` points (tag `resource`; fields slope_per_hour, p_value, verdict)."""
    return [
        Point(
            "leak",
            {"slope_per_hour": v.slope_per_hour, "p_value": v.p_value, "verdict": v.verdict},
            time_ns,
            {"resource": v.resource},
        )
        for v in verdicts
    ]


def _median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    mid = n // 2
    return s[mid] if n % 2 else (s[mid - 1] + s[mid]) / 2.0
