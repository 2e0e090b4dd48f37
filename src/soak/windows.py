"""The minimum of each fixed window of a series, kept as samples arrive.

The one definition of a leak window (soak.analysis.leaks explains why the
minimum): windows of `window_s` aligned to the first sample; a window counts
once the samples reach its end (within the median sample interval); windows
with no sample are skipped. Fed in time order, a batch at a time, the state is
the minimum per window and a count per distinct sample interval, so reading
the windows after a week costs what it costs after an hour. Pure: no I/O.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import Counter
from collections.abc import Iterable


class Windows(tuple[tuple[float, float], ...]):
    """(midpoint s, minimum) of the closed windows, in time order: a tuple that hashes once.

    WindowMinima gives the same object while its windows stay the same, so a
    cache keyed on it (the leak fit's) costs the same for a week as for an hour.
    """

    def __hash__(self) -> int:
        cached: int | None = self.__dict__.get("hash")
        if cached is None:
            cached = self.__dict__["hash"] = super().__hash__()
        return cached


class WindowMinima:
    """Window minima of one series, fed in time order (times in seconds)."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._t0: float | None = None
        self._t_last = 0.0
        self._steps: Counter[float] = Counter()  # interval between samples -> count
        self._done_k: list[int] = []  # windows before the last sample's, in order
        self._done: list[tuple[float, float]] = []  # their (midpoint, minimum)
        self._k = 0  # the last sample's window, and its minimum so far
        self._k_min = 0.0
        self._changed = 0  # bumped when a closed window's minimum changes
        self._given: tuple[object, Windows] = ((), Windows())  # what complete() last gave

    def add(self, samples: Iterable[tuple[float, float]]) -> None:
        """Samples at or after the last one added, in time order; non-finite ones are ignored."""
        for t, v in samples:
            if not (math.isfinite(t) and math.isfinite(v)):
                continue
            if self._t0 is None:
                self._t0 = self._t_last = t
                self._k, self._k_min = 0, v
                continue
            if t < self._t_last:
                raise ValueError(f"sample at {t} s is before the last one ({self._t_last} s)")
            self._steps[t - self._t_last] += 1
            self._t_last = t
            k = int((t - self._t0) // self.window_s)
            if k == self._k:
                self._k_min = min(self._k_min, v)
            elif k > self._k:
                self._done_k.append(self._k)
                self._done.append(self._window(self._k, self._k_min))
                self._k, self._k_min = k, v
            else:  # rounding put a later sample in an earlier window
                self._lower_done(k, v)

    def complete(self) -> Windows:
        """(window midpoint, minimum) of every complete window, in time order.

        The same object as last time when the complete windows are the same.
        """
        if self._t0 is None:
            return self._given[1]
        t0, w = self._t0, self.window_s
        reach_s = self._t_last + _median_of_counts(self._steps) + 1e-9 * w
        kept = len(self._done)  # windows end in order: the incomplete ones are the last
        while kept and reach_s < t0 + (self._done_k[kept - 1] + 1) * w:
            kept -= 1
        current = kept == len(self._done) and reach_s >= t0 + (self._k + 1) * w
        # The windows are a prefix of the closed ones and the open one, which change only
        # through _lower_done: a prefix is known by its length and its last window.
        count = kept + current
        if count == 0:
            last: tuple[float, float] | None = None
        else:
            last = self._window(self._k, self._k_min) if current else self._done[kept - 1]
        key = (self._changed, count, last)
        if key != self._given[0]:
            self._given = (key, Windows(self._done[:kept] + ([last] if current and last else [])))
        return self._given[1]

    def _window(self, k: int, minimum: float) -> tuple[float, float]:
        assert self._t0 is not None
        return (self._t0 + (k + 0.5) * self.window_s, minimum)

    def _lower_done(self, k: int, v: float) -> None:
        self._changed += 1
        i = bisect_left(self._done_k, k)
        if i < len(self._done_k) and self._done_k[i] == k:
            if v < self._done[i][1]:
                self._done[i] = self._window(k, v)
        else:
            self._done_k.insert(i, k)
            self._done.insert(i, self._window(k, v))


def _median_of_counts(counts: Counter[float]) -> float:
    """The median of the multiset (0 when empty), as statistics.median would give it."""
    n = sum(counts.values())
    if n == 0:
        return 0.0
    mid = n // 2
    wanted = (mid,) if n % 2 else (mid - 1, mid)
    found: list[float] = []
    seen = 0
    for value in sorted(counts):
        seen += counts[value]
        while len(found) < len(wanted) and wanted[len(found)] < seen:
            found.append(value)
    return found[0] if len(found) == 1 else (found[0] + found[1]) / 2.0
