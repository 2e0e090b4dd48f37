"""A run's events: the one path every plan's events take.

A soak's phases, faults, gaps and alerts and an upgrade's steps (old started, data
migrated, new started, each check, the clean-up, ...) are each one `EventRecord`,
into the run's record (a soak: the state store, read by its status and report; an
upgrade: its result) and, as an `event` point with the run's tags, its sinks (Grafana's
annotations): one reader reads them all (docs/architecture.md "Time series").
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from soak.points import Point, event_point


@dataclass(frozen=True)
class EventRecord:
    run_id: str
    time_ns: int
    kind: str
    message: str
    value: float

    def point(self, run_tags: dict[str, str]) -> Point:
        return event_point(self.kind, self.message, self.time_ns, self.value).with_tags(run_tags)


class RunEvents:
    """`record` keeps an event in the run's record; `write` takes its point to the sinks."""

    def __init__(
        self,
        run_id: str,
        run_tags: dict[str, str],
        *,
        record: Callable[[EventRecord], None],
        write: Callable[[list[Point]], None],
    ) -> None:
        self.run_id = run_id
        self.run_tags = run_tags
        self._record = record
        self._write = write

    def add(
        self, kind: str, message: str, value: float = 0.0, time_ns: int | None = None
    ) -> EventRecord:
        t_ns = time_ns if time_ns is not None else time.time_ns()
        event = EventRecord(self.run_id, t_ns, kind, message, float(value))
        self._record(event)
        self._write([event.point(self.run_tags)])
        return event

    def recorded(self, kind: str, message: str, value: float, time_ns: int) -> EventRecord:
        """An event whose `event` point another part has already written to the sinks (a
        sink's outage, an alert told to a receiver): into the run's record only, so that
        it is not in the sinks twice."""
        event = EventRecord(self.run_id, time_ns, kind, message, float(value))
        self._record(event)
        return event
