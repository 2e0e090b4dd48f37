"""Sliding windows over (time_ns, value) series: the worst window of a ratio or a sum,
a counter's increments, the median sampling gap. Pure functions."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from soak.analysis.rundata import Series


def counter_increments(series: Series) -> Series:
    """Per-sample increases of a counter; after a reset (a restart) the new value is one."""
    return [(t1, v1 - v0 if v1 >= v0 else v1) for (_, v0), (t1, v1) in pairwise(series)]


def worst_window(
    num: Series, den: Series, window_ns: int, *, ratio: bool = True
) -> tuple[float, int] | None:
    """(worst value, window end) of sum(num)/sum(den) (or sum(num)) over complete windows.

    Windows end at every sample and reach back `window_ns`; a window is
    complete when it reaches back to the first sample's own interval. None
    when the series is shorter than one window. Windows with no denominator
    are skipped. num and den are sampled at the same times.
    """
    n = len(num)
    if n < 2:
        return None
    times = [t for t, _ in num]
    step_ns = median_gap(times)
    pre_num, pre_den = _prefix(num), _prefix(den)
    worst: tuple[float, int] | None = None
    lo = 0
    for hi in range(n):
        t_end = times[hi]
        if t_end - window_ns < times[0] - step_ns:
            continue
        while times[lo] <= t_end - window_ns:
            lo += 1
        s_num = pre_num[hi + 1] - pre_num[lo]
        s_den = pre_den[hi + 1] - pre_den[lo]
        if ratio and s_den <= 0:
            continue
        value = s_num / s_den if ratio else s_num
        if worst is None or value > worst[0]:
            worst = (value, t_end)
    return worst


def _prefix(series: Series) -> list[float]:
    out = [0.0]
    for _, v in series:
        out.append(out[-1] + v)
    return out


def median_gap(times: Sequence[int]) -> int:
    gaps = sorted(b - a for a, b in pairwise(times))
    return gaps[len(gaps) // 2] if gaps else 0
