"""A run's versions as segments of its timeline (a soak with an `upgrade:` section).

The ledger's windows are split by version at each swap, by due second: the window of
second k (stamped at the end of its second, origin + (k + 1) s) belongs to the version
that was due to answer at the start of that second. A swap at `at_s` seconds begins in
grid second floor(at_s); that second and every later one belong to the new version, so
the swap's own seconds (the gap while the old stops and the new starts) are the new
version's: its figures include what its arrival cost. Every window is in exactly one
segment, so the segments' counts add up to the run's.

A segment as a span of stamps is (start_ns, end_ns], the convention of
soak.analysis.latency (span_histogram); the first segment is open to the left.

(Not soak.load.segments, which splits a rate among load agents.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from soak.analysis.verdicts import SeriesReader, Value
from soak.clock import NS_PER_S, s_to_ns


@dataclass(frozen=True)
class VersionSpan:
    """One version's seconds of the run."""

    index: int
    version: str
    start_ns: int  # its first due second's start on the run's clock
    end_ns: int  # the next version's first second (or the run's end)
    origin_ns: int

    @property
    def start_s(self) -> float:
        return (self.start_ns - self.origin_ns) / NS_PER_S

    @property
    def end_s(self) -> float:
        return (self.end_ns - self.origin_ns) / NS_PER_S

    def holds(self, stamp_ns: int) -> bool:
        """A window stamped at `stamp_ns` (the end of its second) is this version's."""
        due_ns = stamp_ns - NS_PER_S
        return (self.index == 0 or due_ns >= self.start_ns) and due_ns < self.end_ns


def boundary_ns(origin_ns: int, at_s: float) -> int:
    """The first grid second of the version a swap at `at_s` brings in."""
    return origin_ns + s_to_ns(float(math.floor(at_s)))


def version_spans(
    origin_ns: int, end_ns: int, first_version: str, swaps: Sequence[tuple[float, str]]
) -> list[VersionSpan]:
    """The run's segments: the first version from the origin, then each swap's
    (`(at_s, version)`, in order) from its boundary to the next (the last to `end_ns`)."""
    starts = [origin_ns] + [boundary_ns(origin_ns, at_s) for at_s, _ in swaps]
    versions = [first_version] + [v for _, v in swaps]
    ends = [*starts[1:], end_ns]
    return [
        VersionSpan(i, v, s, e, origin_ns)
        for i, (v, s, e) in enumerate(zip(versions, starts, ends, strict=True))
    ]


def span_of(spans: Sequence[VersionSpan], stamp_ns: int) -> VersionSpan:
    """The segment a window stamped at `stamp_ns` belongs to (a window after the run's
    planned end, a stopped run's last, is the last version's)."""
    for span in spans:
        if span.holds(stamp_ns):
            return span
    return spans[-1]


def stamp_bounds(spans: Sequence[VersionSpan], span: VersionSpan) -> tuple[int | None, int | None]:
    """The segment as (start, end] of window stamps for span_histogram: open on the
    left for the first and on the right for the last."""
    first, last = span.index == 0, span.index == len(spans) - 1
    return (None if first else span.start_ns, None if last else span.end_ns)


class SegmentReader:
    """A store's series up to a segment's end: the leak verdicts of one version fitted
    on its own seconds (its start given by run_verdicts' `since_ns`)."""

    def __init__(self, store: SeriesReader, end_ns: int | None) -> None:
        self.store = store
        self.end_ns = end_ns

    def series(
        self, soak: str, measurement: str, field: str, tags: dict[str, str] | None = None
    ) -> list[tuple[dict[str, str], list[tuple[int, Value]]]]:
        found = self.store.series(soak, measurement, field, tags)
        if self.end_ns is None:
            return found
        return [(t, [(ts, v) for ts, v in s if ts <= self.end_ns]) for t, s in found]

    def window_minima(
        self, soak: str, measurement: str, field: str, since_ns: int, window_s: float
    ) -> tuple[tuple[float, float], ...] | None:
        """The store's windows whose whole span lies before the segment's end (each is
        (midpoint s, minimum))."""
        minima = self.store.window_minima(soak, measurement, field, since_ns, window_s)
        if minima is None or self.end_ns is None:
            return minima
        last_mid_s = self.end_ns / NS_PER_S - window_s / 2
        return tuple(m for m in minima if m[0] <= last_mid_s)
