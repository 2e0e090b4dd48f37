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

A whole-run rise is checked before it is called `growing` (soak.analysis.rises):
`levelling` when the series is flat since its last change of course (start-up growth
ended, a cache is full), `ok` when the floor it keeps falling back to does not rise (GC
teeth longer than a window), `levelling` when the rise slows down part after part, with
its projected plateau (soak.analysis.levelling), or when it fits an approach to a
plateau better than a line (soak.analysis.approach); `levelling` too while a resource is
under its declared cap (`leaks.caps`, soak.analysis.verdicts.toward_cap). Start-up growth
(a rise from the warm-up's end until it stops) is left out once it stops: a `growing`
whole run is then judged by the windows after it (`leaks.startup_max_s` makes a rise
that has not stopped wait, not judged, that long). A run whose
whole slope is still diluted by a flat start is `growing` from a leak's onset (three
windows above everything before a change of course). The verdict's `note` says which.

Every number in a verdict is finite (no NaN): with fewer than two windows the
slope is 0 and the p-value 1, and the verdict says `insufficient`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Hashable, Sequence

from soak.analysis.leakverdict import VERDICTS as VERDICTS
from soak.analysis.leakverdict import WHY_NOT_JUDGED as WHY_NOT_JUDGED
from soak.analysis.leakverdict import LeakVerdict as LeakVerdict
from soak.analysis.leakverdict import leak_points as leak_points
from soak.analysis.levelling import TAIL_CONFIDENCE_FACTOR, TAIL_MAX_SHARE_OF_HEAD, span_text
from soak.analysis.pvalues import mann_kendall_points_needed
from soak.analysis.rises import checked_growth, grows, leak_onset, startup_end
from soak.analysis.trendfit import Trend, TrendFit
from soak.windows import WindowMinima

# The last part judged for `levelling` is this share of the windows (at least
# _TAIL_MIN_WINDOWS of them, and as many again before it).
_TAIL_SHARE = 1 / 3
_TAIL_MIN_WINDOWS = 3
# A fit from scratch is O(n^2) in windows and a new window costs O(n) in a kept
# fit (soak.analysis.trendfit): a week of 10-min windows (1,008) is merged into
# at most this many points (minima of consecutive windows).
MAX_WINDOWS = 400


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


def group_size(windows: int, max_windows: int = MAX_WINDOWS) -> int:
    """Consecutive windows merged into one fitted point: at most max_windows points."""
    return max(1, math.ceil(windows / max_windows)) if max_windows > 0 else 1


def merge_windows(
    minima: Sequence[tuple[float, float]], max_windows: int
) -> list[tuple[float, float]]:
    """Groups of k consecutive windows (k as few as give at most max_windows), each its mean
    time and minimum; the newest windows short of a group wait for it (so the groups, once
    made, stay as they are and a fit can be kept up to date point by point)."""
    k = group_size(len(minima), max_windows)
    if k == 1:
        return list(minima)
    return [_merged(minima[i : i + k]) for i in range(0, len(minima) - k + 1, k)]


def _merged(group: Sequence[tuple[float, float]]) -> tuple[float, float]:
    return (sum(t for t, _ in group) / len(group), min(v for _, v in group))


def theil_sen_slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Median of the pairwise slopes (0 with fewer than two points)."""
    return TrendFit(zip(xs, ys, strict=True)).trend(0.05).slope_per_s


def mann_kendall(ys: Sequence[float]) -> tuple[int, float]:
    """(S, two-sided p-value) of the Mann-Kendall trend test, ties corrected.

    Normal approximation with the continuity correction; ys in time order.
    All values tied (a flat fd count) gives S = 0 and p = 1.
    """
    return TrendFit((float(i), y) for i, y in enumerate(ys)).mann_kendall()


def trend(points: Sequence[tuple[float, float]], p_value_max: float) -> Trend:
    """Theil-Sen slope, Mann-Kendall S and p, and Sen's upper bound on the slope."""
    return TrendFit(points).trend(p_value_max)


def _tail_length(n: int) -> int:
    return max(_TAIL_MIN_WINDOWS, round(n * _TAIL_SHARE))


class LeakFit:
    """The fits of one resource's window minima, kept up to date across passes.

    Three fits: the whole run, the head and the tail (`levelling` compares them).
    A pass that brings a new window (or completes a group of them, past
    MAX_WINDOWS) adds one point to each, O(n); a pass that brings none gives the
    verdict it gave. Windows that are not the previous ones plus new ones (a
    closed window lowered, the group size grown) start the fits afresh.
    """

    def __init__(self) -> None:
        self._given: tuple[object, LeakVerdict] | None = None
        # Start-up growth (soak.analysis.rises.startup_end): None while undecided (the
        # series rises from the warm-up's end and has not stopped yet), then fixed as a
        # warm-up is: 0 (none), or the first window after it.
        self._startup_end: int | None = None
        self._after: LeakFit | None = None  # the fits of the windows after start-up growth
        self._start(0)

    def _start(self, group: int) -> None:
        self._windows: tuple[tuple[float, float], ...] = ()
        self._group = group
        self._points = 0
        self._fitted: list[tuple[float, float]] = []  # the points of the whole fit
        self._whole = TrendFit()
        self._head = TrendFit()
        self._tail = TrendFit()  # the points after the head

    def update(self, windows: Sequence[tuple[float, float]]) -> None:
        """The complete windows' (midpoint s, minimum) in time order, all of them so far."""
        if windows is self._windows:
            return
        windows = windows if isinstance(windows, tuple) else tuple(windows)
        group, seen = group_size(len(windows)), len(self._windows)
        if group != self._group or len(windows) < seen or windows[:seen] != self._windows:
            self._start(group)
        self._windows = windows
        for start in range(self._points * group, len(windows) - group + 1, group):
            self._append(_merged(windows[start : start + group]) if group > 1 else windows[start])
        if self._after is not None and self._startup_end is not None:
            self._after.update(windows[self._startup_end :])

    def verdict(
        self,
        *,
        resource: str,
        threshold_per_hour: float,
        min_windows: int,
        p_value_max: float,
        min_span_s: float = 0.0,
        startup_max_s: float = 0.0,
    ) -> LeakVerdict:
        """`min_span_s`: no verdict (`insufficient`) before the windows span that long.
        `startup_max_s`: a rise from the warm-up's end that has not stopped is not judged
        (`insufficient`) before the windows span that long (0: judged at once)."""
        asked = (
            self._windows,
            resource,
            threshold_per_hour,
            min_windows,
            p_value_max,
            min_span_s,
            startup_max_s,
        )
        if self._given is not None and self._given[0] == asked:
            return self._given[1]
        v = self._verdict(resource, threshold_per_hour, min_windows, p_value_max)
        if v.verdict != "insufficient":
            v = self._past_startup(v, min_windows, p_value_max, startup_max_s)
        if v.verdict != "insufficient" and self._span_s() < min_span_s:
            short = "not judged yet: the windows span less than leaks.min_span_s"
            v = dataclasses.replace(v, verdict="insufficient", note=short, why="span")
        self._given = (asked, v)
        return v

    def _past_startup(
        self, v: LeakVerdict, min_windows: int, p_value_max: float, startup_max_s: float
    ) -> LeakVerdict:
        """A verdict given what start-up growth says: `insufficient` while a rise from the
        warm-up's end has not stopped and may still wait (`startup_max_s`); once start-up
        growth has stopped, a `growing` whole run judged by the windows after it alone (as
        if the warm-up had lasted until then: the start-up's rise is no leak)."""
        if self._startup_end is None:
            end = startup_end(
                self._fitted, self._whole.trend(p_value_max), v.threshold_per_hour, p_value_max
            )
            if end is not None:
                self._startup_end = end * self._group
                if end:
                    self._after = LeakFit()
                    self._after._startup_end = 0  # its own windows start after start-up
                    self._after.update(self._windows[self._startup_end :])
        if self._startup_end is None:
            rising = grows(self._whole.trend(p_value_max), v.threshold_per_hour, p_value_max)
            if not rising or self._span_s() >= startup_max_s:
                return v
            note = (
                "not judged yet: rising since the warm-up's end and not stopped (start-up"
                " growth, or a leak from the start): judged once it stops, or once the"
                f" windows span {span_text(startup_max_s / 3600)} (leaks.startup_max_s)"
            )
            return dataclasses.replace(v, verdict="insufficient", note=note, why="startup")
        if self._after is None or v.verdict != "growing":
            return v
        after = self._after.verdict(
            resource=v.resource,
            threshold_per_hour=v.threshold_per_hour,
            min_windows=min_windows,
            p_value_max=p_value_max,
        )
        at = self._windows[self._startup_end][0]
        since = "start-up growth stopped"
        if after.verdict == "insufficient":
            note = f"grew until {since}; too few windows since to say more"
            return dataclasses.replace(v, verdict="levelling", note=note, change_at_s=at)
        note = f"{since}; since then: {after.note}" if after.note else f"{since}; judged since"
        return dataclasses.replace(after, windows=v.windows, note=note, change_at_s=at)

    def _span_s(self) -> float:
        """From the first window's start to the last one's end (midpoints and their step)."""
        w = self._windows
        if len(w) < 2:
            return 0.0
        step = w[1][0] - w[0][0]
        return w[-1][0] - w[0][0] + step

    def _append(self, point: tuple[float, float]) -> None:
        self._points += 1
        self._fitted.append(point)
        self._whole.append(point)
        self._tail.append(point)
        while len(self._head) < self._points - _tail_length(self._points):
            self._head.append(self._tail.pop_first())

    def _verdict(
        self, resource: str, threshold_per_hour: float, min_windows: int, p_value_max: float
    ) -> LeakVerdict:
        n = self._points
        whole = self._whole.trend(p_value_max)
        slope_per_h = whole.slope_per_s * 3600.0

        def verdict(name: str, recent_per_h: float = 0.0) -> LeakVerdict:
            return LeakVerdict(
                resource, name, slope_per_h, whole.p_value, n, threshold_per_hour, recent_per_h
            )

        def checked(recent_per_h: float) -> LeakVerdict:
            name, slope, recent, note, at = checked_growth(
                self._fitted, whole, resource, threshold_per_hour, min_windows, p_value_max
            )
            return LeakVerdict(
                resource,
                name,
                slope * 3600.0 if slope is not None else slope_per_h,
                whole.p_value,
                n,
                threshold_per_hour,
                recent * 3600.0 if recent is not None else recent_per_h,
                note,
                at,
            )

        if n < min_windows:
            note = f"not judged yet: {n} of {min_windows} windows (leaks.min_windows)"
            return dataclasses.replace(verdict("insufficient"), note=note, why="windows")
        if n < (need := mann_kendall_points_needed(p_value_max)):
            note = f"not judged yet: {n} windows cannot show a trend at p < {p_value_max:g}"
            note += f" (the trend test needs {need})"
            return dataclasses.replace(verdict("insufficient"), note=note, why="power")
        if len(self._head) < _TAIL_MIN_WINDOWS:
            levelled, tail_per_h = False, 0.0
        else:
            levelled, tail_per_h = self._levelled(threshold_per_hour, p_value_max)
        if levelled:
            return verdict("levelling", tail_per_h)
        if grows(whole, threshold_per_hour, p_value_max):
            return checked(tail_per_h)
        if whole.s > 0:
            onset = leak_onset(self._fitted, threshold_per_hour, p_value_max)
            if onset is not None:
                return dataclasses.replace(
                    verdict("growing"),
                    slope_per_hour=onset[0] * 3600.0,
                    note="growing since a change of course",
                    change_at_s=onset[1],
                )
        return verdict("ok", tail_per_h)

    def _levelled(self, threshold_per_hour: float, p_value_max: float) -> tuple[bool, float]:
        """(grew then flattened?, tail slope per hour)."""
        head = self._head.trend(p_value_max)
        # Calling a real leak `levelling` silences its alert: ask the tail for more confidence.
        tail = self._tail.trend(p_value_max * TAIL_CONFIDENCE_FACTOR)
        tail_per_h = tail.slope_per_s * 3600.0
        if not grows(head, threshold_per_hour, p_value_max):
            return False, tail_per_h
        flat = (
            tail.slope_upper_per_s * 3600.0 < threshold_per_hour
            and tail.slope_per_s <= TAIL_MAX_SHARE_OF_HEAD * head.slope_per_s
        )
        return flat, tail_per_h


class LeakFits:
    """A LeakFit per series for a run's periodic passes; the newest `keep` are kept."""

    def __init__(self, keep: int = 64) -> None:
        self._keep = keep
        self._fits: dict[Hashable, LeakFit] = {}

    def fit(self, key: Hashable) -> LeakFit:
        fit = self._fits.pop(key, None) or LeakFit()
        self._fits[key] = fit  # the newest last
        while len(self._fits) > self._keep:
            del self._fits[next(iter(self._fits))]
        return fit


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


def leak_verdict_from_minima(
    windows: Sequence[tuple[float, float]],
    *,
    resource: str,
    threshold_per_hour: float,
    min_windows: int,
    p_value_max: float,
) -> LeakVerdict:
    """The verdict from the complete windows' (midpoint s, minimum), in time order."""
    fit = LeakFit()
    fit.update(windows)
    return fit.verdict(
        resource=resource,
        threshold_per_hour=threshold_per_hour,
        min_windows=min_windows,
        p_value_max=p_value_max,
    )
