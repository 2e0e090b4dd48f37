"""A Theil-Sen and Mann-Kendall fit kept up to date as points come and go.

Pure, no I/O. soak.analysis.leaks fits the window minima of a run on every
pass; recomputing the n(n-1)/2 pairwise slopes each time a window closes costs
O(n^2 log n), 78 times more after a week than after an hour. Here a new point
costs O(n) (its n slopes) and so does dropping the oldest (a sliding tail):

- Mann-Kendall's S moves by the new point's count of earlier values below
  minus above it, the tie term by the one count that changed;
- the slope order statistics (the median and Sen's upper bound) come from a
  *band*: the sorted slopes between two values `lo` and `hi`, with only counts
  of the slopes below and above it. A new point's slopes mostly fall outside
  the band and cost a bisect; the wanted ranks move little per point, and when
  one leaves the band it is rebuilt from all pairs (rare: the band holds a
  margin of several points' worth of slopes on each side).

Slopes are computed as (y_later - y_earlier) / (x_later - x_earlier) on every
path, so the band holds the very floats a fit from scratch sorts and the
results are the same, bit for bit. A zero slope is one shared object: a flat
fd or thread count makes only zeros, and a week of them kept as separate
floats would be 2.7 MiB per resource instead of 0.5.
"""

from __future__ import annotations

import math
from bisect import bisect_left, bisect_right, insort
from collections import Counter, deque
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from statistics import NormalDist

Pair = tuple[float, float]  # (x, y)

# Ranks kept in the band on each side of the wanted ones: this many points' slopes
# (a new point moves a rank by at most its slope count / 2), and at least the floor.
_BAND_MARGIN_POINTS = 8
_BAND_MARGIN_FLOOR = 256
ZERO = 0.0  # every zero slope (a tie of two minima) is this object


@dataclass(frozen=True, slots=True)
class Trend:
    slope_per_s: float
    s: int  # Mann-Kendall S: > 0 rising, < 0 falling
    p_value: float
    # Sen's one-sided upper confidence bound on the slope (at 1 - p_value_max).
    slope_upper_per_s: float


NO_TREND = Trend(0.0, 0, 1.0, 0.0)


@lru_cache(maxsize=16)
def _z(p_value_max: float) -> float:
    return NormalDist().inv_cdf(1.0 - p_value_max)


def _tie_term(t: int) -> int:
    return t * (t - 1) * (2 * t + 5)


class SlopeBand:
    """Order statistics of a multiset of slopes: counts outside [lo, hi], sorted inside."""

    def __init__(self) -> None:
        self.valid = False  # no band yet: every rank asks for a rebuild
        self._lo = self._hi = 0.0
        self._below = self._above = 0
        self._inside: list[float] = []

    def reset(
        self, slopes_sorted: list[float], first_rank: int, last_rank: int, margin: int
    ) -> None:
        """All slopes, sorted; the band holds ranks first - margin .. last + margin (and ties)."""
        if not slopes_sorted:
            self.valid = False
            return
        top = len(slopes_sorted) - 1
        self._lo = slopes_sorted[max(0, min(top, first_rank - margin))]
        self._hi = slopes_sorted[max(0, min(top, last_rank + margin))]
        self._below = bisect_left(slopes_sorted, self._lo)
        end = bisect_right(slopes_sorted, self._hi)
        self._above = len(slopes_sorted) - end
        self._inside = slopes_sorted[self._below : end]
        self.valid = True

    def add(self, slopes_sorted: list[float]) -> None:
        if not self.valid:
            return
        i, j = self._split(slopes_sorted)
        self._below += i
        self._above += len(slopes_sorted) - j
        inside = self._inside
        for slope, same in _runs(slopes_sorted, i, j):
            if same == 1:
                insort(inside, slope)
            else:  # one move for a run of ties (a flat count's zeros)
                k = bisect_right(inside, slope)
                inside[k:k] = [slope] * same

    def remove(self, slopes_sorted: list[float]) -> None:
        if not self.valid:
            return
        i, j = self._split(slopes_sorted)
        self._below -= i
        self._above -= len(slopes_sorted) - j
        inside = self._inside
        for slope, same in _runs(slopes_sorted, i, j):
            k = bisect_left(inside, slope)
            del inside[k : k + same]

    def at(self, rank: int) -> float | None:
        """The slope of this rank (0-based), or None when it is outside the band."""
        k = rank - self._below
        return self._inside[k] if self.valid and 0 <= k < len(self._inside) else None

    def _split(self, slopes_sorted: list[float]) -> tuple[int, int]:
        return bisect_left(slopes_sorted, self._lo), bisect_right(slopes_sorted, self._hi)


def _runs(values_sorted: list[float], start: int, end: int) -> list[tuple[float, int]]:
    """(value, how many) of each run of equal values in values_sorted[start:end]."""
    runs: list[tuple[float, int]] = []
    k = start
    while k < end:
        value = values_sorted[k]
        nxt = k + 1
        if nxt < end and values_sorted[nxt] == value:
            nxt = bisect_right(values_sorted, value, nxt, end)
        runs.append((value, nxt - k))
        k = nxt
    return runs


class TrendFit:
    """Theil-Sen slope, Mann-Kendall S and p, and Sen's bound of points in x order.

    `append` adds a point after the others, `pop_first` drops the oldest.
    """

    def __init__(self, points: Iterable[Pair] = ()) -> None:
        self._points: deque[Pair] = deque()
        self._ys_sorted: list[float] = []
        self._ties: Counter[float] = Counter()
        self._tie_sum = 0  # sum of _tie_term over the tied values
        self._s = 0
        self._slopes = 0  # pairs with distinct x
        self._band = SlopeBand()
        for point in points:
            self.append(point)

    def __len__(self) -> int:
        return len(self._points)

    def append(self, point: Pair) -> None:
        x, y = point
        ys = self._ys_sorted
        self._s += bisect_left(ys, y) - (len(ys) - bisect_right(ys, y))
        insort(ys, y)
        self._count_tie(y, +1)
        if self._band.valid:
            new = sorted([(y - yi) / (x - xi) or ZERO for xi, yi in self._points if xi != x])
            self._slopes += len(new)
            self._band.add(new)
        else:  # the first trend() makes the band from all pairs at once
            self._slopes += sum(1 for xi, _ in self._points if xi != x)
        self._points.append(point)

    def pop_first(self) -> Pair:
        x0, y0 = point = self._points.popleft()
        ys = self._ys_sorted
        del ys[bisect_left(ys, y0)]
        self._s -= (len(ys) - bisect_right(ys, y0)) - bisect_left(ys, y0)
        self._count_tie(y0, -1)
        if self._band.valid:
            gone = sorted([(yj - y0) / (xj - x0) or ZERO for xj, yj in self._points if xj != x0])
            self._slopes -= len(gone)
            self._band.remove(gone)
        else:
            self._slopes -= sum(1 for xj, _ in self._points if xj != x0)
        return point

    def mann_kendall(self) -> tuple[int, float]:
        """(S, two-sided p-value), ties corrected."""
        return self._s, self._p_value(self._var_s())

    def trend(self, p_value_max: float) -> Trend:
        count, var_s = self._slopes, self._var_s()
        p = self._p_value(var_s)
        if count == 0:
            return Trend(0.0, self._s, p, 0.0)
        # Sen (1968): the bound is the slope ranked z * sd(S) / 2 above the median.
        upper = min(
            count - 1, math.ceil((count + _z(p_value_max) * math.sqrt(max(0.0, var_s))) / 2)
        )
        mid = count // 2
        wanted = (mid, upper) if count % 2 else (mid - 1, mid, upper)
        found = [self._band.at(rank) for rank in wanted]
        if any(v is None for v in found):
            self._rebuild_band(min(wanted), max(wanted))
            found = [self._band.at(rank) for rank in wanted]
        values = [v for v in found if v is not None]
        median = values[0] if count % 2 else (values[0] + values[1]) / 2.0
        return Trend(median, self._s, p, values[-1])

    def _var_s(self) -> float:
        n = len(self._points)
        return (n * (n - 1) * (2 * n + 5) - self._tie_sum) / 18.0

    def _p_value(self, var_s: float) -> float:
        """Two-sided, normal approximation with the continuity correction."""
        s = self._s
        if var_s <= 0 or s == 0:
            return 1.0
        z = (s - 1 if s > 0 else s + 1) / math.sqrt(var_s)
        return min(1.0, math.erfc(abs(z) / math.sqrt(2.0)))

    def _count_tie(self, y: float, step: int) -> None:
        before = self._ties[y]
        after = before + step
        self._tie_sum += _tie_term(after) - _tie_term(before)
        if after:
            self._ties[y] = after
        else:
            del self._ties[y]

    def _rebuild_band(self, first_rank: int, last_rank: int) -> None:
        points = list(self._points)
        slopes: list[float] = []
        for i, (xi, yi) in enumerate(points):
            slopes += [(yj - yi) / (xj - xi) or ZERO for xj, yj in points[i + 1 :] if xj != xi]
        slopes.sort()
        margin = max(_BAND_MARGIN_FLOOR, _BAND_MARGIN_POINTS * len(points))
        self._band.reset(slopes, first_rank, last_rank, margin)
