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
from collections import Counter
from collections.abc import Iterable


class WindowMinima:
    """Window minima of one series, fed in time order (times in seconds)."""

    def __init__(self, window_s: float) -> None:
        if window_s <= 0:
            raise ValueError(f"window_s must be positive, got {window_s}")
        self.window_s = window_s
        self._t0: float | None = None
        self._t_last = 0.0
        self._steps: Counter[float] = Counter()  # interval between samples -> count
        self._minima: dict[int, float] = {}

    def add(self, samples: Iterable[tuple[float, float]]) -> None:
        """Samples at or after the last one added, in time order; non-finite ones are ignored."""
        for t, v in samples:
            if not (math.isfinite(t) and math.isfinite(v)):
                continue
            if self._t0 is None:
                self._t0 = self._t_last = t
            elif t < self._t_last:
                raise ValueError(f"sample at {t} s is before the last one ({self._t_last} s)")
            else:
                self._steps[t - self._t_last] += 1
                self._t_last = t
            k = int((t - self._t0) // self.window_s)
            old = self._minima.get(k)
            if old is None or v < old:
                self._minima[k] = v

    def complete(self) -> list[tuple[float, float]]:
        """(window midpoint, minimum) of every complete window, in time order."""
        if self._t0 is None:
            return []
        t0, w = self._t0, self.window_s
        reach_s = self._t_last + _median_of_counts(self._steps) + 1e-9 * w
        return [
            (t0 + (k + 0.5) * w, m)
            for k, m in sorted(self._minima.items())
            if reach_s >= t0 + (k + 1) * w
        ]


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
