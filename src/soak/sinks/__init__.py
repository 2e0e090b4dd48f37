"""soak.sinks: where points go. build_sinks() gives the SinkSet a run writes to."""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path

from soak.points import RUN_TAGS, Point, event_point
from soak.sinks.base import Sink
from soak.sinks.destinations import (
    InfluxV1SinkConfig,
    InfluxV2SinkConfig,
    SinkConfig,
    SpoolConfig,
    SqliteSinkConfig,
)
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.spool import Spool
from soak.sinks.spooling import SpoolingSink
from soak.sinks.sqlite import SqliteStore

__all__ = ["ServiceMetrics", "SinkSet", "SqliteStore", "build_sinks", "spool_dir_of"]

_MAX_KEPT_EVENTS = 1000


class SinkSet:
    """Several sinks at once, each behind its own spool.

    Sink outages become `event` points (kinds sink_down, sink_recovered,
    spool_full, sink_rejected) written with the next batch to every sink, and
    kept in `outages` (the latest 1000) for the caller to show.
    """

    def __init__(
        self,
        sinks: list[SpoolingSink],
        *,
        clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.sinks = sinks
        self.clock_ns = clock_ns
        self.outages: deque[Point] = deque(maxlen=_MAX_KEPT_EVENTS)
        self._run_tags: dict[str, str] = {}

    @property
    def store(self) -> SqliteStore | None:
        """The embedded SQLite store, if one of the sinks is it (reports read it)."""
        for s in self.sinks:
            if isinstance(s.sink, SqliteStore):
                return s.sink
        return None

    def write(self, points: Sequence[Point]) -> None:
        if points:
            self._run_tags = {k: points[0].tags[k] for k in RUN_TAGS if k in points[0].tags}
        for s in self.sinks:
            s.write(points)
        self._emit_events()

    def flush(self) -> None:
        for s in self.sinks:
            s.flush()
        self._emit_events()

    def close(self) -> None:
        self.flush()
        for s in self.sinks:
            s.close()

    def stats(self) -> dict[str, dict[str, int]]:
        """Per sink: written, spooled, replayed, dropped, spool_depth, spool_bytes, down."""
        return {s.name: s.stats() for s in self.sinks}

    def _emit_events(self) -> None:
        """Sink events as points, written to every sink (a down one spools them)."""
        for _ in range(3):  # writing events can itself raise events; bounded
            now_ns = self.clock_ns()
            points = [
                event_point(e.kind, e.message, now_ns, e.value).with_tags(
                    {**self._run_tags, "sink": s.name}
                )
                for s in self.sinks
                for e in s.take_events()
            ]
            if not points:
                return
            self.outages.extend(points)
            for s in self.sinks:
                s.write(points)


def _spool_file_name(sink_name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", sink_name) + ".spool"


def build_sink(cfg: SinkConfig, *, default_sqlite_path: Path, run_dir: Path) -> Sink:
    if isinstance(cfg, SqliteSinkConfig):
        path = Path(cfg.path) if cfg.path else default_sqlite_path
        if not path.is_absolute():
            path = run_dir / path
        return SqliteStore(path)
    if isinstance(cfg, InfluxV1SinkConfig):
        from soak.sinks.influx import InfluxV1Sink

        return InfluxV1Sink(cfg)
    if isinstance(cfg, InfluxV2SinkConfig):
        from soak.sinks.influx import InfluxV2Sink

        return InfluxV2Sink(cfg)
    raise TypeError(f"unknown sink config {cfg!r}")


def spool_dir_of(spool: SpoolConfig, run_dir: Path, default_spool_dir: Path) -> Path:
    """Where a run's spools go: `spool.dir` (relative to `run_dir`), else the default."""
    spool_dir = Path(spool.dir) if spool.dir else default_spool_dir
    return spool_dir if spool_dir.is_absolute() else run_dir / spool_dir


def build_sinks(
    configs: list[SinkConfig],
    spool: SpoolConfig,
    *,
    default_sqlite_path: Path,
    run_dir: Path,
    default_spool_dir: Path,
    metrics: ServiceMetrics | None = None,
    run_id: str = "",
) -> SinkSet:
    """The configured sinks (the embedded SQLite store when none is), each with a spool
    (under `spool.dir`, relative to `run_dir`, else `default_spool_dir`: the run's data
    directory names both)."""
    if not configs:
        configs = [SqliteSinkConfig(kind="sqlite")]
    spool_dir = spool_dir_of(spool, run_dir, default_spool_dir)
    wrapped: list[SpoolingSink] = []
    names: set[str] = set()
    for cfg in configs:
        sink = build_sink(cfg, default_sqlite_path=default_sqlite_path, run_dir=run_dir)
        base, n = sink.name, 2
        while sink.name in names:  # two sinks of one kind: distinct names, distinct spools
            sink.name, n = f"{base}#{n}", n + 1
        names.add(sink.name)
        wrapped.append(
            SpoolingSink(
                sink,
                Spool(spool_dir / _spool_file_name(sink.name), spool.max_bytes),
                retry_interval_s=spool.retry_interval_s,
                metrics=metrics,
                run_id=run_id,
            )
        )
    return SinkSet(wrapped)
