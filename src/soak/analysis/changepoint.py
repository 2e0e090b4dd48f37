"""Where a resource's series last changed course, and the floor of a sawtooth.

Pure functions on the window minima (soak.analysis.leaks), used only to check a
`growing` verdict before it is given (a healthy server's shapes that a whole-run
trend calls growing):

- **The last change point.** Start-up growth ends, a cache reaches its cap: the
  series is two lines, and only the second says what the server does now. A
  split is the one that leaves the least squared error of two least-squares
  lines (each side at least MIN_SEGMENT points); it counts when it beats one line
  by n ln(SSE1 / SSE2) > 8 ln n: the Bayesian information criterion's form, at
  a price well above its 3 ln n (three numbers added: a second slope and
  intercept, the split itself), since window minima are not Gaussian noise and
  the split is the best of many. Binary segmentation
  on the part after each accepted split finds the last one. Prefix sums make a
  scan O(n); a pass looks for splits only when the whole run would be `growing`.
- **The floor of a sawtooth.** A GC'd heap whose teeth are longer than a window
  rises inside each tooth and falls back to where it was: the window minima
  still climb between two collections. The suffix minimum (each point replaced
  by the lowest value from it on) is the floor the series keeps coming back to;
  a leak lifts it, teeth do not. Its last points are the least sure (fewer
  values after them), which is why it only vetoes a `growing`: it never raises one.
- **The troughs of a sawtooth.** Teeth as long as several windows (a Go heap's GC
  cycle stretched by a long run) climb for longer than the suffix minimum can look
  back: while the series keeps falling back to where its teeth start (troughs: a fall
  that gives back a sliver of the climb, a dip in a steady rise, is no collection), the
  current tooth's climb is not judged; the troughs are, and a leak lifts them.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import accumulate, pairwise

Pair = tuple[float, float]

MIN_SEGMENT = 3  # points on each side of a split
# On 200 seeded series (0.2 MiB noise, 10-min windows): a rise of 2 MiB a window for 12
# windows then 8 flat is split within a window of the knee 187 times (105 at BIC's 3);
# a straight line of 30 or 60 windows is never split (37 and 18 times at 3).
_PENALTY_PER_LOG_N = 8.0


class _Sums:
    """Prefix sums of x, y, xx, xy, yy: the least-squares error of any run in O(1)."""

    def __init__(self, points: Sequence[Pair]) -> None:
        xs = [x for x, _ in points]
        ys = [y for _, y in points]
        x0 = xs[0] if xs else 0.0  # centred: the sums stay small, the errors exact enough
        xs = [x - x0 for x in xs]
        self.x = [0.0, *accumulate(xs)]
        self.y = [0.0, *accumulate(ys)]
        self.xx = [0.0, *accumulate(x * x for x in xs)]
        self.xy = [0.0, *accumulate(x * y for x, y in zip(xs, ys, strict=True))]
        self.yy = [0.0, *accumulate(y * y for y in ys)]

    def sse(self, i: int, j: int) -> float:
        """Squared error of the least-squares line through points i..j-1."""
        n = j - i
        sx, sy = self.x[j] - self.x[i], self.y[j] - self.y[i]
        sxx = self.xx[j] - self.xx[i] - sx * sx / n
        sxy = self.xy[j] - self.xy[i] - sx * sy / n
        syy = self.yy[j] - self.yy[i] - sy * sy / n
        fit = sxy * sxy / sxx if sxx > 0 else 0.0
        return max(0.0, syy - fit)


def _best_split(sums: _Sums, start: int, end: int) -> int | None:
    """The accepted split of points start..end-1 (its first index on the right), or None."""
    n = end - start
    if n < 2 * MIN_SEGMENT:
        return None
    one = sums.sse(start, end)
    best, best_k = math.inf, None
    for k in range(start + MIN_SEGMENT, end - MIN_SEGMENT + 1):
        two = sums.sse(start, k) + sums.sse(k, end)
        if two < best:
            best, best_k = two, k
    if best_k is None or one <= 0:
        return None
    # An exact fit of two lines (SSE2 = 0) is a change.
    if best <= 0 or n * math.log(one / best) > _PENALTY_PER_LOG_N * math.log(n):
        return best_k
    return None


def line_sse(points: Sequence[Pair]) -> float:
    """Squared error of the least-squares line through all the points."""
    return _Sums(points).sse(0, len(points))


def two_lines_sse(points: Sequence[Pair]) -> float:
    """Squared error of the best two least-squares lines split anywhere (each at least
    MIN_SEGMENT points): a corner; inf when the points are too few to split."""
    sums, n = _Sums(points), len(points)
    splits = range(MIN_SEGMENT, n - MIN_SEGMENT + 1)
    return min((sums.sse(0, k) + sums.sse(k, n) for k in splits), default=math.inf)


def changes(points: Sequence[Pair]) -> list[int]:
    """Indexes of the first point after each change of course, in order."""
    sums = _Sums(points)
    start, found = 0, []
    while (k := _best_split(sums, start, len(points))) is not None:
        found.append(k)
        start = k
    return found


def last_change(points: Sequence[Pair]) -> int | None:
    """Index of the first point after the series' last change of course, or None."""
    found = changes(points)
    return found[-1] if found else None


def suffix_minima(points: Sequence[Pair]) -> list[Pair]:
    """Each point's value replaced by the lowest value from it on (the floor)."""
    out: list[Pair] = []
    low = math.inf
    for x, y in reversed(points):
        low = min(low, y)
        out.append((x, low))
    out.reverse()
    return out


# A collection gives back at least this share of what its tooth climbed (from the
# tooth's lowest point to the point before the fall): a dip in a steady rise (malloc
# returning an arena, a late sample) gives back a sliver of it, and is no tooth.
FALL_MIN_SHARE_OF_CLIMB = 0.5


def troughs(points: Sequence[Pair], drop_min: float) -> list[Pair] | None:
    """The lowest point of each tooth of a sawtooth whose teeth are longer than a window,
    or None when the series is not (or no longer) one.

    A tooth starts where the series falls by more than `drop_min` from one point to the
    next and gives back at least FALL_MIN_SHARE_OF_CLIMB of its climb since the lowest
    point of the tooth (or start-up) before it (a collection); the part before the first
    fall is start-up, not a tooth. The newest tooth counts while it is at most twice as
    long as the longest before it: a rise that goes on longer has stopped falling back,
    and is judged as a rise."""
    falls = _falls(points, drop_min)
    if not falls:
        return None
    lengths = [falls[0], *(b - a for a, b in pairwise(falls))]
    if len(points) - falls[-1] > 2 * max(lengths):
        return None
    bounds = [*falls, len(points)]
    return [min(points[a:b], key=lambda p: p[1]) for a, b in pairwise(bounds)]


def _falls(points: Sequence[Pair], drop_min: float) -> list[int]:
    """Indexes of the first point of each tooth (see troughs)."""
    falls: list[int] = []
    low = math.inf  # the lowest value since the last fall
    for i in range(1, len(points)):
        before, now = points[i - 1][1], points[i][1]
        low = min(low, before)
        drop = before - now
        if drop > drop_min and drop >= FALL_MIN_SHARE_OF_CLIMB * (before - low):
            falls.append(i)
            low = math.inf
    return falls
