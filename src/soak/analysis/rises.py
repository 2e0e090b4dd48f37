"""Checks of a rise before it is called `growing`, and a leak's onset before the whole
run's slope shows it (docs/analysis.md "A whole-run rise is checked", "A leak's onset").

Pure functions on a resource's fitted window minima (soak.analysis.leaks.LeakFit calls
them only in passes whose whole run rises, so a flat run pays nothing): its last change
of course (soak.analysis.changepoint), its floor (suffix minima, or the troughs of long
teeth), its slowing (soak.analysis.levelling).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from itertools import pairwise

from soak.analysis.approach import approaching
from soak.analysis.changepoint import MIN_SEGMENT, changes, last_change, suffix_minima, troughs
from soak.analysis.levelling import (
    TAIL_CONFIDENCE_FACTOR,
    TAIL_MAX_SHARE_OF_HEAD,
    decelerating,
    slowing_part,
)
from soak.analysis.trendfit import Trend, TrendFit

Pair = tuple[float, float]

# Windows after a change of course before it can be a leak's onset, the later half of
# them rising over the threshold too: a step (RSS raised once to a GC's next heap goal,
# refdns-startup in the corpus) rises over 2-3 windows and stops; a leak goes on. 3
# windows called that step `growing` for a window; 4 cost the corpus's leaks a window
# (median onset -> growing 0.48 -> 0.65 h at 10-min windows, 0.33 h the shortest).
ONSET_MIN_WINDOWS = 4


def grows(t: Trend, threshold_per_hour: float, p_value_max: float) -> bool:
    return t.s > 0 and t.p_value < p_value_max and t.slope_per_s * 3600.0 > threshold_per_hour


def _above(before: Sequence[Pair], after: Sequence[Pair]) -> bool:
    """At least MIN_SEGMENT points after, every one above every point before."""
    return len(after) >= MIN_SEGMENT and min(v for _, v in after) > max(v for _, v in before)


def _onset_p_value(n: int, after: int) -> float:
    """The chance that the last `after` of n windows all lie above the others by noise alone
    (every order alike: 1 / C(n, after)), times the splits a change point chooses from
    (a Bonferroni bound: the split was picked for fitting best)."""
    splits = max(1, n - 2 * MIN_SEGMENT + 1)
    return min(1.0, splits / math.comb(n, after))


def leak_onset(
    points: Sequence[Pair], threshold_per_hour: float, p_value_max: float
) -> tuple[float, float] | None:
    """(slope per s, change time) of a leak's onset that the whole run's slope still
    dilutes: the last change of course is followed by at least MIN_SEGMENT windows, all
    above every window before it (risen past their noise: what an observer of the
    minima needs to tell), with significance (_onset_p_value), rising over the
    threshold, and the part before the change did not. Fits from scratch: only passes
    whose whole run rises (Mann-Kendall S > 0) look."""
    found = last_change(points)
    if found is None or found < MIN_SEGMENT:
        return None
    # The corner's window may sit on either line: the split or the one after it.
    splits = (found, found + 1)
    k = next((k for k in splits if _above(points[:k], points[k:])), None)
    if k is None:
        return None  # not above the level it left: a tooth, a blip
    before, after = points[:k], points[k:]
    if _onset_p_value(len(points), len(after)) >= p_value_max:
        return None
    rise = TrendFit(after).trend(p_value_max)
    if rise.slope_per_s * 3600.0 <= threshold_per_hour or rise.s <= 0:
        return None
    if grows(TrendFit(before).trend(p_value_max), threshold_per_hour, p_value_max):
        return None  # a change of pace of a rise: the whole run's trend judges it
    floor = TrendFit(suffix_minima(after)).trend(p_value_max)
    if floor.slope_per_s * 3600.0 <= threshold_per_hour:
        return None  # the rise falls back (a sawtooth's tooth)
    late = TrendFit(after[len(after) // 2 :]).trend(p_value_max)
    if len(after) < ONSET_MIN_WINDOWS or late.slope_per_s * 3600.0 <= threshold_per_hour:
        return None  # a step that stopped (RSS raised once to a GC's next heap goal)
    return rise.slope_per_s, points[k][0]


def checked_growth(
    points: Sequence[Pair],
    whole: Trend,
    resource: str,
    threshold_per_hour: float,
    min_windows: int,
    p_value_max: float,
) -> tuple[str, float | None, float | None, str, float | None]:
    """Of a run whose whole trend grows, what its last change of course and its floor
    say (soak.analysis.changepoint): (verdict, slope per s or None for the whole run's,
    recent slope per s or None for the tail's, note, change time). Fits from scratch:
    only passes that would alert pay."""
    k = last_change(points)
    at = points[k][0] if k is not None else None
    slope: float | None = None
    note = ""
    if k is not None:
        before = TrendFit(points[:k]).trend(p_value_max)
        # As the `levelling` tail: flat with more confidence than the trend asks, and
        # at most half the rise before it (or the whole run's, after a step up).
        after = TrendFit(points[k:]).trend(p_value_max * TAIL_CONFIDENCE_FACTOR)
        rise_per_s = max(before.slope_per_s, whole.slope_per_s)
        flat = (
            after.slope_upper_per_s * 3600.0 < threshold_per_hour
            and after.slope_per_s <= TAIL_MAX_SHARE_OF_HEAD * rise_per_s
        )
        if flat:
            note = "grew until a change of course, flat since"
            return "levelling", None, after.slope_per_s, note, at
        # Flat, then rising (a leak's onset): the slope is the rise's, not diluted by
        # the flat part. A rise that only changed pace keeps the whole run's slope, and
        # one that slowed (a curve's first piece steeper) is no onset.
        rose = grows(after, threshold_per_hour, p_value_max) and len(points) - k >= min_windows
        steeper = after.slope_per_s > before.slope_per_s
        if rose and steeper and not grows(before, threshold_per_hour, p_value_max):
            slope, note = after.slope_per_s, "growing since a change of course"
    if not floorgrows(points, threshold_per_hour, min_windows, p_value_max):
        note = "the floor it falls back to does not rise (a sawtooth)"
        return "ok", None, None, note, at
    since = slowing_part(points) if slope is None else None  # not a leak's onset
    settling = decelerating(since, threshold_per_hour, p_value_max) if since else None
    if settling is None and slope is None:
        settling = approaching(points, threshold_per_hour, p_value_max)
    if settling is not None:
        return "levelling", None, settling.slope_per_s, settling.note(resource), at
    return "growing", slope, None, note, at


def floorgrows(
    points: Sequence[Pair], threshold_per_hour: float, min_windows: int, p_value_max: float
) -> bool:
    """Does the floor rise: the troughs of a sawtooth whose teeth outlast a window (a
    fall of more than 3 windows' worth of the threshold that gives back half its tooth's
    climb starts a tooth; at least two troughs rising over the threshold); else the
    suffix minima, since their own last change of course (start-up growth under the
    teeth ends) when enough windows follow that change, rising over the threshold.

    The floor vetoes a rise only when its slope is under the threshold: the whole run's
    rise was found significant before this is asked, and a floor since a late change of
    course (a steady leak's pace wavers) has too few windows to be significant itself
    (Mann-Kendall on 4 points never is at p 0.05); not showing that it rises is no
    proof that it does not."""
    if len(points) >= 2:
        step_s = (points[-1][0] - points[0][0]) / (len(points) - 1)
        low = troughs(points, 3 * threshold_per_hour / 3600.0 * step_s)
        if low is not None:
            return len(low) >= 2 and TrendFit(low).trend(p_value_max).slope_per_s * 3600.0 > (
                threshold_per_hour
            )
    floor = suffix_minima(points)
    k = last_change(floor)
    if k is not None and len(floor) - k >= min_windows:
        floor = floor[k:]
    floor_trend = TrendFit(floor).trend(p_value_max)
    return floor_trend.s > 0 and floor_trend.slope_per_s * 3600.0 > threshold_per_hour


def startup_end(
    points: Sequence[Pair], whole: Trend, threshold_per_hour: float, p_value_max: float
) -> int | None:
    """Where start-up growth ends: 0 when the series (its whole trend `whole`) does not
    rise from its first point (nothing to leave out: a flat start, or a flat part before a
    leak's onset); else the first change of course after which it rises no faster than the
    threshold (flat, or falling back: a cache at its cap, a GC); None while it has not
    (start-up growth or a leak from the start: nothing tells them apart until it stops)."""
    if not grows(whole, threshold_per_hour, p_value_max):
        # Flat from the start only when the trend says so with confidence (its upper bound
        # under the threshold): a rise too young to be significant is no flat start, and
        # fixing "none" on it would let that rise skip the wait later.
        return 0 if whole.slope_upper_per_s * 3600.0 < threshold_per_hour else None
    bounds = [0, *changes(points), len(points)]
    for a, b in pairwise(bounds):
        if TrendFit(points[a:b]).trend(p_value_max).slope_per_s * 3600.0 <= threshold_per_hour:
            return a  # 0: the first part was already flat
    return None
