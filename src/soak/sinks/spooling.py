"""A sink wrapped with its spool: write through while it answers, spool while it does not.

Order is kept: once anything is spooled, new points go behind it in the spool
until the whole backlog is replayed, so the sink receives every point in the
order it was written. Replay is tried at most every `retry_interval_s` and
moves at most `replay_chunk_points` per attempt per chunk, so one call never
holds a tick for long while a large backlog drains.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from soak.errors import SinkError
from soak.points import Point
from soak.sinks.base import Sink, SinkWriteError
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.spool import Spool


@dataclass
class SinkEvent:
    """What the SinkSet turns into an `event` point."""

    kind: str  # sink_down, sink_recovered, spool_full, sink_rejected
    message: str
    value: float = 0.0


# What a sink's points became: its stats() and the service's point counters.
POINT_FATES = ("written", "spooled", "replayed", "dropped")


class SpoolingSink:
    def __init__(
        self,
        sink: Sink,
        spool: Spool,
        *,
        retry_interval_s: float,
        metrics: ServiceMetrics | None = None,
        run_id: str = "",
        replay_chunk_points: int = 5000,
        max_replay_chunks: int = 20,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.sink, self.spool, self.name = sink, spool, sink.name
        self.retry_interval_s = retry_interval_s
        self.metrics = metrics
        self.run_id = run_id  # the `soak` label of its spool gauges
        self.replay_chunk_points = replay_chunk_points
        self.max_replay_chunks = max_replay_chunks
        self.clock = clock
        self.counters = dict.fromkeys(POINT_FATES, 0)
        self.events: list[SinkEvent] = []
        self.down = not spool.empty  # a backlog left by an earlier run is replayed first
        self._full = False
        self._next_retry_s = 0.0
        self._lock = threading.Lock()
        self._update_gauges()

    # ---------------------------------------------------------------- Sink

    def write(self, points: Sequence[Point]) -> None:
        if not points:
            return
        with self._lock:
            if not self.spool.empty and not self._replay(force=False):
                self._to_spool(points)
                return
            self._write_through(points)
            self._update_gauges()

    def flush(self) -> None:
        """Flushes the sink and tries to replay the backlog now."""
        with self._lock:
            if not self.spool.empty:
                self._replay(force=True)
            try:
                self.sink.flush()
            except SinkError as exc:
                self._went_down(str(exc))
            self._update_gauges()

    def close(self) -> None:
        self.flush()
        self.sink.close()

    def replay_due(self) -> None:
        """Replays the backlog if its retry interval has passed (an ended run's spool,
        replayed by the service until the sink takes it)."""
        with self._lock:
            if not self.spool.empty:
                self._replay(force=False)

    def take_events(self) -> list[SinkEvent]:
        with self._lock:
            events, self.events = self.events, []
            return events

    # ---------------------------------------------------------------- inside

    def _write_through(self, points: Sequence[Point]) -> None:
        try:
            self.sink.write(points)
        except SinkError as exc:
            accepted = exc.accepted if isinstance(exc, SinkWriteError) else 0
            self._count("written", accepted)
            rest = points[accepted:]
            if isinstance(exc, SinkWriteError) and exc.rejected:
                self._drop_rejected(rest, str(exc))
                return
            self._went_down(str(exc))
            self._to_spool(rest)
            return
        self._count("written", len(points))
        if self.down:  # down with nothing spooled (all of it dropped): it answers again
            self.events.append(SinkEvent("sink_recovered", f"{self.name} answers again", 0.0))
            self.down, self._full = False, False

    def _replay(self, force: bool) -> bool:
        """Replays the backlog; True once it is empty."""
        if not force and self.clock() < self._next_retry_s:
            return False
        for _ in range(self.max_replay_chunks):
            chunk, ends = self.spool.read_chunk(self.replay_chunk_points)
            if not chunk:
                break
            try:
                self.sink.write(chunk)
            except SinkError as exc:
                accepted = exc.accepted if isinstance(exc, SinkWriteError) else 0
                if accepted:  # those went through: never send them again
                    self.spool.commit(ends[accepted - 1], accepted)
                    self._count("replayed", accepted)
                if isinstance(exc, SinkWriteError) and exc.rejected:
                    # the rest of this batch will never be accepted: dropped, move on
                    self._drop_rejected(chunk[accepted:], str(exc))
                    self.spool.commit(ends[-1], len(chunk) - accepted)
                    continue
                self._went_down(str(exc))
                self._update_gauges()
                return False
            self.spool.commit(ends[-1], len(chunk))
            self._count("replayed", len(chunk))
        if self.spool.empty:
            if self.down:
                self.events.append(
                    SinkEvent(
                        "sink_recovered",
                        f"{self.name} answers again; spool replayed",
                        float(self.counters["replayed"]),
                    )
                )
            self.down, self._full = False, False
            return True
        self._next_retry_s = 0.0  # more backlog and the sink answers: go on next time
        return False

    def _to_spool(self, points: Sequence[Point]) -> None:
        fit = self.spool.append(points)
        self._count("spooled", fit)
        lost = len(points) - fit
        if lost:
            self._count("dropped", lost)
            if not self._full:
                self._full = True
                self.events.append(
                    SinkEvent(
                        "spool_full",
                        f"{self.name}: spool reached {self.spool.max_bytes} bytes;"
                        " new points are dropped until it drains",
                        float(lost),
                    )
                )
        self._update_gauges()

    def _drop_rejected(self, points: Sequence[Point], message: str) -> None:
        self._count("dropped", len(points))
        self.events.append(SinkEvent("sink_rejected", message, float(len(points))))

    def _went_down(self, message: str) -> None:
        self._next_retry_s = self.clock() + self.retry_interval_s
        if not self.down:
            self.down = True
            self.events.append(SinkEvent("sink_down", message))

    def _count(self, what: str, n: int) -> None:
        if n <= 0:
            return
        self.counters[what] += n
        if self.metrics is not None:
            counter = {
                "written": self.metrics.points_written,
                "spooled": self.metrics.points_spooled,
                "replayed": self.metrics.points_replayed,
                "dropped": self.metrics.points_dropped,
            }[what]
            counter.labels(self.name).inc(n)

    def _update_gauges(self) -> None:
        if self.metrics is not None:
            self.metrics.set_spool(self.run_id, self.name, self.spool.depth, self.spool.size_bytes)

    def stats(self) -> dict[str, int]:
        return {
            **self.counters,
            "spool_depth": self.spool.depth,
            "spool_bytes": self.spool.size_bytes,
            "down": int(self.down),
        }
