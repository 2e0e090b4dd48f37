"""The shape of a rise from the warm-up's end: a leak's steady climb, or start-up growth.

Two kinds of evidence that judge such a rise before start-up growth could have stopped
(soak.analysis.verdicts applies them; pure functions of window minima):

- *a count's staircase* (fds, goroutines, threads: integers that move in whole steps,
  often with no noise between them): window minima that never fall back, rising in at
  least STAIR_STEPS_MIN steps, the newer half of the span still climbing at least
  KEEP_SHARE of the older half's pace, is a leak's evidence. Two steps are enough when
  they are spread as a steady leak spreads them: at least SPREAD_MIN_WINDOWS windows
  apart, neither in the first window (start-up's socket or thread is added at once, a
  pool grows in a burst). A count that goes up and down (a pool taking and giving back)
  is none; a start-up staircase that stopped (threads added in the first minutes) fails
  the newer half.
- *a rise that keeps its rate*: the window minima's older and newer halves fitted with a
  line each, their residuals giving the noise; the rise keeps its rate when the newer
  half's slope, less its one-sided confidence margin at p, is at least KEEP_SHARE of the
  older half's, and is a leak's when the slope of all of them is above the threshold. A
  cache filling toward a level (an exponential approach, increments shrinking) falls
  short; a noisy series has too wide a margin to show it and waits.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from statistics import NormalDist

# A staircase needs this many steps: one is a start-up's thread or socket.
STAIR_STEPS_MIN = 2
# Bunched steps are start-up's (a pool growing, threads added under the first load): a
# staircase of fewer than SPREAD_STEPS steps counts only when its steps are this many
# windows apart, the first after the first window. A leak of 2/h at 10-min windows steps
# every 3 windows; the real-time corpus's healthy counts stepped up at most once.
SPREAD_MIN_WINDOWS = 2
SPREAD_STEPS = 3
# The newer half keeps the rate when it rises at least this share of the older half's pace.
KEEP_SHARE = 0.5
# Each half of a rise judged for its rate holds at least this many windows.
HALF_MIN_WINDOWS = 3


@dataclass(frozen=True, slots=True)
class Rise:
    slope_per_s: float  # over the windows judged
    first: float
    last: float
    steps: int  # a staircase's steps (0 for a rise judged by its rate)
    span_s: float

    def words(self, units: str = "") -> str:
        said = f"{_num(self.first)} -> {_num(self.last)}{units} in {self.span_s / 60:.0f} min"
        if self.steps:
            return f"a staircase that never falls back ({self.steps} steps, {said})"
        return f"a rise that keeps its rate ({said})"


def is_count(resource: str, minima: Sequence[tuple[float, float]]) -> bool:
    """A count of things (fds, goroutines, threads): whole values, and not bytes (memory
    is whole bytes too, but moves by pages and allocations, never in single steps)."""
    return not resource.endswith("_bytes") and all(float(v).is_integer() for _, v in minima)


def staircase(minima: Sequence[tuple[float, float]], threshold_per_s: float) -> Rise | None:
    """A count's window minima that never fall back and keep climbing above the
    threshold's pace; None otherwise."""
    if len(minima) < STAIR_STEPS_MIN + 1:
        return None
    values = [v for _, v in minima]
    if any(b < a for a, b in pairwise(values)):
        return None  # it returned: a count that goes up and down
    at = [i for i, (a, b) in enumerate(pairwise(values), start=1) if b > a]
    steps = len(at)
    span_s = minima[-1][0] - minima[0][0]
    if steps < STAIR_STEPS_MIN or span_s <= 0 or (steps < SPREAD_STEPS and not _spread(at)):
        return None
    slope = (values[-1] - values[0]) / span_s
    mid = len(values) // 2
    older, newer = values[mid] - values[0], values[-1] - values[mid]
    if slope <= threshold_per_s or newer <= 0 or newer < KEEP_SHARE * older * _ratio(minima, mid):
        return None
    return Rise(slope, values[0], values[-1], steps, span_s)


def _spread(at: Sequence[int]) -> bool:
    """Steps (the windows they first show in) apart as a steady leak's are, none in the
    first windows after the judged start."""
    return at[0] > 1 and all(b - a >= SPREAD_MIN_WINDOWS for a, b in pairwise(at))


def _ratio(minima: Sequence[tuple[float, float]], mid: int) -> float:
    """The newer half's span over the older half's (odd counts make them differ)."""
    older_s = minima[mid][0] - minima[0][0]
    return (minima[-1][0] - minima[mid][0]) / older_s if older_s > 0 else 1.0


def keeps_rate(
    minima: Sequence[tuple[float, float]], threshold_per_s: float, p_value_max: float
) -> Rise | None:
    """A rise whose newer half climbs, with confidence, at least KEEP_SHARE of the older
    half's pace and above the threshold; None when it slows or the noise hides it."""
    n = len(minima)
    if n < 2 * HALF_MIN_WINDOWS:
        return None
    mid = n // 2
    older, newer = _line(minima[:mid]), _line(minima[mid:])
    dof = n - 4
    sigma = math.sqrt((older.sse + newer.sse) / dof) if dof > 0 else math.inf
    margin = (
        NormalDist().inv_cdf(1 - p_value_max) * sigma * math.sqrt(1 / older.sxx + 1 / newer.sxx)
    )
    if older.slope <= threshold_per_s or newer.slope - margin < KEEP_SHARE * older.slope:
        return None
    # Above the threshold as the whole-run verdict asks it (soak.analysis.rises.grows: a
    # significant trend whose slope is over the threshold): the confidence margin is the
    # shape's, on whether the rate is kept, not a second bar on its size (which would
    # leave a leak at its threshold unjudged for ever).
    whole = _line(minima)
    if whole.slope <= threshold_per_s:
        return None
    span_s = minima[-1][0] - minima[0][0]
    first, last = minima[0][1], minima[-1][1]
    return Rise(whole.slope, first, last, 0, span_s)


@dataclass(frozen=True, slots=True)
class _Fit:
    slope: float
    sse: float
    sxx: float


def _line(points: Sequence[tuple[float, float]]) -> _Fit:
    """Least squares of y on x: slope, residual sum of squares and the x spread."""
    n = len(points)
    mx = sum(x for x, _ in points) / n
    my = sum(y for _, y in points) / n
    sxx = sum((x - mx) ** 2 for x, _ in points)
    sxy = sum((x - mx) * (y - my) for x, y in points)
    slope = sxy / sxx if sxx > 0 else 0.0
    sse = sum((y - my - slope * (x - mx)) ** 2 for x, y in points)
    return _Fit(slope, sse, sxx if sxx > 0 else math.inf)


def _num(value: float) -> str:
    return f"{value:,.0f}"
