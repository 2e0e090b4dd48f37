"""The replay's ledger (soak.load.replay._loop): its open one-second windows, what is in
flight in each, and the closed ones summed (soak.load.ledger's windows, per class).

A window closes once every query due in it has ended (answered, lost, abandoned) and
the replay has passed its second; it is then summed into the totals and handed whole
to `on_window` (a soak run records it as the run's `load` points). A replay that
raised closes what it left open with close_all (soak.load.replay._run_load).
"""

from __future__ import annotations

import collections
from collections.abc import Callable

from soak.histogram import LatencyHistogram
from soak.load.ledger import ClassWindow, Window, empty_window

MAX_PROBLEMS = 20


class ReplayWindows:
    def __init__(self, classes: int) -> None:
        self.nc = classes
        self.windows: dict[int, Window] = {}
        self.inflight: collections.Counter[int] = collections.Counter()
        # Closed windows are summed as they close (a day's replay keeps no day of
        # windows), their counts and rcodes; `on_window` hands each, latencies and all,
        # to whoever records the ledger.
        self.per_class = [ClassWindow() for _ in range(classes)]
        # Their latencies, per class, in the one bounded histogram (soak.histogram): what
        # `soak load --replay` reports its quantiles from.
        self.hists = [LatencyHistogram() for _ in range(classes)]
        self.closed_below = 0
        self.closed_count = 0
        self.problems: list[str] = []
        self.on_window: Callable[[Window], None] | None = None
        # False where whoever takes the windows sums them itself (a soak run's replay
        # process: the run's process does, and summing here cost the sending loop up to
        # 20 ms a window on a busy machine, its sends waiting meanwhile).
        self.sums = True

    def count(self, second: int, c: int, what: str, n: int = 1) -> None:
        w = self.windows.get(second)
        if w is None:
            w = self.windows[second] = empty_window(second, self.nc)
        cw = w.classes[c]
        setattr(cw, what, getattr(cw, what) + n)

    def ended(self, second: int, c: int, how: str, latency_us: int = 0, rcode: int = 0) -> None:
        """A query in flight ended: completed (its latency and rcode), lost or abandoned."""
        self.inflight[second] -= 1
        cw = self.windows[second].classes[c]
        if how == "completed":
            cw.completed += 1
            cw.lat_us[latency_us] = cw.lat_us.get(latency_us, 0) + 1
            cw.rcodes[rcode] = cw.rcodes.get(rcode, 0) + 1
        elif how == "lost":
            cw.lost += 1
        else:
            cw.abandoned += 1

    def busy(self) -> bool:
        """Whether any query is still in flight."""
        return any(self.inflight.values())

    def close_windows(self, below: int) -> None:
        """Every second before `below` with nothing in flight, in order."""
        for second in sorted(self.windows):
            if second >= below or self.inflight[second] > 0:
                break
            self.closed_window(self.windows.pop(second))
            del self.inflight[second]

    def close_all(self) -> None:
        """Every window left open by a replay that stopped sending and reading (it
        raised): what was in flight ends abandoned, what was due and never sent is
        skipped, so each closes with `completed + lost + abandoned == sent` and
        `sent + skipped == due`, every query in it counted once."""
        for second in sorted(self.windows):
            w = self.windows.pop(second)
            for cw in w.classes:
                cw.abandoned += cw.sent - cw.completed - cw.lost - cw.abandoned
                cw.skipped += cw.due - cw.sent - cw.skipped
            self.closed_window(w)
        self.inflight.clear()

    def closed_window(self, w: Window) -> None:
        """A window's counts summed into the totals, and the window handed on whole.

        Its latencies stay with the window (on_window: a soak run's ledger, in a bounded
        HDR histogram): the totals are read for their counts and rcodes only, and a sum
        of latencies nobody reads grew for hours, a key at a time, as the tail filled
        (three digits: up to 3,700 keys a class)."""
        if self.sums:
            self._sum(w)
        self.closed_count += 1
        self.closed_below = w.second + 1
        if self.on_window is not None:
            self.on_window(w)

    def _sum(self, w: Window) -> None:
        for total, hist, cw in zip(self.per_class, self.hists, w.classes, strict=True):
            hist.record_all(cw.lat_us)
            exact, cw.lat_us = cw.lat_us, {}
            total.add(cw)
            cw.lat_us = exact
        if len(self.problems) < MAX_PROBLEMS:
            self.problems += w.problems()[: MAX_PROBLEMS - len(self.problems)]
