"""A load loop's cadence (soak.load.cadence) under test: a clock the test sets and an
outbox that keeps what a worker would send its parent."""

from __future__ import annotations

from soak.load.stats import Interval


class Clock:
    """Monotonic nanoseconds that move only when the test sets `now`."""

    def __init__(self, now: int) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


class Outbox:
    """The stats channel of a worker: every Interval it sends, kept in order."""

    def __init__(self) -> None:
        self.sent: list[Interval] = []

    def send(self, obj: object) -> None:
        assert isinstance(obj, Interval)
        self.sent.append(obj)
