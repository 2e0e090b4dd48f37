"""Growth that reaches its limit soon: an alert at once, whatever else waits.

A rise that, at its pace, fills the target's memory (its container's limit,
`limits.memory_bytes`, or the machine's memory) or its fd limit within
`leaks.horizon_s` is `growing` as soon as its trend is significant, whether or not
start-up growth may still be going on: waiting for it to stop costs the machine.

The pace is read from short windows (a fifth of the leak window, at least three
samples each): their minima remove a GC's teeth as the leak windows do, and there are
five of them by the time one leak window has closed. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from soak.analysis.pvalues import mann_kendall_points_needed
from soak.analysis.trendfit import TrendFit

# Short windows per leak window: the limit's pace is known after one leak window.
SHORT_WINDOWS_PER_WINDOW = 5


@dataclass(frozen=True, slots=True)
class Reach:
    slope_per_s: float  # the short windows' Theil-Sen slope (units per s)
    limit: float
    to_limit_s: float  # from the last short window, at that slope (0: already there)


def short_window_s(window_s: float, sample_interval_s: float) -> float:
    return max(window_s / SHORT_WINDOWS_PER_WINDOW, 3 * sample_interval_s)


def reaching(
    minima: Sequence[tuple[float, float]], limit: float, horizon_s: float, p_value_max: float
) -> Reach | None:
    """The rise of the last short windows, when significant and due to reach `limit`
    within `horizon_s`; None otherwise. Only the newest windows count (as many as the
    trend test needs, and up to twice that): start-up growth that has stopped is past."""
    need = mann_kendall_points_needed(p_value_max)
    if limit <= 0 or len(minima) < need:
        return None
    recent = minima[-2 * need :]
    t = TrendFit(recent).trend(p_value_max)
    if t.s <= 0 or t.p_value >= p_value_max or t.slope_per_s <= 0:
        return None
    to_limit_s = max(0.0, (limit - recent[-1][1]) / t.slope_per_s)
    if to_limit_s > horizon_s:
        return None
    return Reach(t.slope_per_s, limit, to_limit_s)
