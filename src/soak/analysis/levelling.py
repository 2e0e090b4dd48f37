"""Why a rise is `levelling` rather than `growing`: it slows down toward a plateau.

Pure functions on the window minima (soak.analysis.leaks asks them only where a pass
would say `growing`): the part of a rise judged for slowing, whether it decelerates
(each third slower than the one before, with confidence), and where it levels off.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from soak.analysis.changepoint import changes
from soak.analysis.trendfit import TrendFit

# Calling a real leak `levelling` silences its alert: a flat tail is asked for more
# confidence than the trend (its Sen bound at 1 - p_value_max / 10).
TAIL_CONFIDENCE_FACTOR = 0.1
# A tail is flat when its slope is confidently under the threshold (Sen's upper bound,
# not the point estimate: a steady leak near the threshold must not pass as `levelling`
# because the short tail's noisy slope dipped under it) and at most this share of the
# first part's slope.
TAIL_MAX_SHARE_OF_HEAD = 0.5


@dataclass(frozen=True, slots=True)
class Settling:
    """A rise that slows down at a steady rate: where it levels off, and when its slope
    falls under the threshold, if the slowing goes on as it did (an exponential approach)."""

    plateau: float  # the projected level, in the resource's units
    current: float  # the last point's value
    slope_per_s: float  # the last third's slope
    under_threshold_in_h: float  # 0 when it already is

    def note(self, resource: str) -> str:
        plateau, now = amount(resource, self.plateau), amount(resource, self.current)
        under = span_text(self.under_threshold_in_h)
        when = (
            f"under the threshold in {under} at this pace of slowing"
            if self.under_threshold_in_h > 0
            else "rising slower than the threshold now"
        )
        return f"decelerating: levels off near {plateau} (now {now}); {when}"


# A rise is decelerating when each third of it rises slower than the one before and
# the last third's slope, at the `levelling` tail's confidence (its upper bound), is at
# most this share of the first third's: a steady leak's thirds rise alike, and the
# upper bound keeps a noisy one from passing.
_SLOWING_MAX_SHARE = 0.5
_SLOWING_MIN_THIRD = 4  # points in each third
# A piece of a curve rises at most this share of the piece before it: a leak's part cut
# in two by its noise has pieces that rise alike (seeded start-up-then-leak series:
# 2 of 200 were `levelling` at "slower than", none at 0.75; tests/unit/test_changepoint.py).
_PIECE_MAX_SHARE = 0.75


def slowing_part(points: Sequence[tuple[float, float]]) -> Sequence[tuple[float, float]] | None:
    """The part of a rise judged for slowing: after its last change of course when that
    part is long enough to tell; else the whole run when it is a curve (every part between
    its changes, two changes at least, rising slower than the one before: a smooth
    concave rise is cut into such pieces); else none (one corner, such as start-up
    growth and then a leak, is judged by the part after it alone)."""
    cuts = changes(points)
    if not cuts or len(points) - cuts[-1] >= 3 * _SLOWING_MIN_THIRD:
        return points[cuts[-1] :] if cuts else points
    if len(cuts) < 2:
        return None
    bounds = [0, *cuts, len(points)]
    slopes = [TrendFit(points[a:b]).trend(0.5).slope_per_s for a, b in pairwise(bounds)]
    slowing = all(0 < later <= _PIECE_MAX_SHARE * earlier for earlier, later in pairwise(slopes))
    return points if slowing else None


def decelerating(
    points: Sequence[tuple[float, float]], threshold_per_hour: float, p_value_max: float
) -> Settling | None:
    """The projected plateau of a concave rise of (s, value) points, or None when the rise
    does not slow down (or is too short to tell: fewer than 3 x _SLOWING_MIN_THIRD)."""
    third = len(points) // 3
    if third < _SLOWING_MIN_THIRD:
        return None
    parts = [points[: len(points) - 2 * third], points[-2 * third : -third], points[-third:]]
    first, middle = (TrendFit(p).trend(p_value_max).slope_per_s for p in parts[:2])
    last = TrendFit(parts[2]).trend(p_value_max * TAIL_CONFIDENCE_FACTOR)
    slowing = (
        first > 0
        and last.slope_per_s <= middle <= first
        and last.slope_upper_per_s <= _SLOWING_MAX_SHARE * first
    )
    if not slowing:
        return None
    now = points[-1][1]
    if last.slope_per_s <= 0:
        return Settling(now, now, 0.0, 0.0)
    # Slope s(t) = last * ratio^((t - mid) / span): from the first third's middle to the
    # last third's, the slope fell by last / first over two thirds' spans.
    span_s = (points[-1][0] - points[0][0]) / 3
    ratio = math.sqrt(last.slope_per_s / first)
    decay_per_s = -math.log(ratio) / span_s
    mid_s = (parts[2][0][0] + parts[2][-1][0]) / 2
    to_end_s = points[-1][0] - mid_s
    slope_now = last.slope_per_s * math.exp(-decay_per_s * to_end_s)
    threshold_per_s = threshold_per_hour / 3600.0
    under_s = max(0.0, math.log(slope_now / threshold_per_s) / decay_per_s)
    return Settling(now + slope_now / decay_per_s, now, last.slope_per_s, under_s / 3600.0)


def amount(resource: str, value: float) -> str:
    """A resource's value in words: bytes in MiB, or GiB from 10 GiB on; a count as it is."""
    if not resource.endswith("_bytes"):
        return f"{value:.4g}"
    if abs(value) >= 10 * 1024**3:
        return f"{value / 1024**3:.3g} GiB"
    return f"{value / 1024**2:.4g} MiB"


def span_text(hours: float) -> str:
    """ "3 d 4 h", "5 h 10 min", "12 min"."""
    minutes = round(hours * 60)
    days, minutes = divmod(minutes, 24 * 60)
    h, m = divmod(minutes, 60)
    if days:
        return f"{days} d {h} h"
    return f"{h} h {m} min" if h else f"{m} min"
