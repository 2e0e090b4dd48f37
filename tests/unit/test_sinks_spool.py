import json
from collections.abc import Sequence
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from soak.errors import InputError, SinkError
from soak.points import Point
from soak.runs.layout import spool_dir
from soak.sinks import SinkSet, build_sinks
from soak.sinks.base import SinkWriteError
from soak.sinks.destinations import (
    InfluxV1SinkConfig,
    InfluxV2SinkConfig,
    SpoolConfig,
    SqliteSinkConfig,
)
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.spool import Spool
from soak.sinks.spooling import SpoolingSink
from soak.sinks.sqlite import SqliteStore

RUN = {"soak": "r1", "scenario": "s", "target": "t", "version": "v"}


def pts(start: int, n: int) -> list[Point]:
    return [
        Point("process", {"rss_bytes": float(i)}, i, dict(RUN)) for i in range(start, start + n)
    ]


class Flaky:
    """A sink whose outage the test switches on and off (a fault to inject, not a server)."""

    name = "flaky"

    def __init__(self, batch_size: int = 1000) -> None:
        self.up = True
        self.received: list[Point] = []
        self.batch_size = batch_size
        self.fail_after: int | None = None  # accept this many points, then fail

    def write(self, points: Sequence[Point]) -> None:
        if not self.up:
            raise SinkError("connection refused")
        if self.fail_after is not None:
            self.received.extend(points[: self.fail_after])
            accepted, self.fail_after = self.fail_after, None
            self.up = False
            raise SinkWriteError("broke mid-write", accepted=accepted)
        self.received.extend(points)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


class Clock:
    def __init__(self) -> None:
        self.now_s = 0.0

    def __call__(self) -> float:
        return self.now_s


def spooling(tmp_path: Path, sink: Flaky, max_bytes: int = 10**9, **kw: object) -> SpoolingSink:
    return SpoolingSink(
        sink,
        Spool(tmp_path / "flaky.spool", max_bytes),
        retry_interval_s=5.0,
        **kw,  # type: ignore[arg-type]
    )


def test_outage_spools_and_replays_in_order_none_twice(tmp_path: Path) -> None:
    sink, clock = Flaky(), Clock()
    registry = CollectorRegistry()
    metrics = ServiceMetrics(registry)
    s = spooling(tmp_path, sink, clock=clock, metrics=metrics, run_id="r1", replay_chunk_points=7)
    s.write(pts(0, 10))
    sink.up = False
    s.write(pts(10, 10))
    sink.up = True
    clock.now_s = 1.0  # before the retry interval: still spooled behind the backlog
    s.write(pts(20, 10))
    assert len(sink.received) == 10 and s.stats()["spool_depth"] == 20
    clock.now_s = 6.0
    s.write(pts(30, 10))
    assert [p.time_ns for p in sink.received] == list(range(40))
    assert s.stats() == {
        "written": 20,
        "spooled": 20,
        "replayed": 20,
        "dropped": 0,
        "spool_depth": 0,
        "spool_bytes": 0,
        "down": 0,
    }
    assert [e.kind for e in s.take_events()] == ["sink_down", "sink_recovered"]
    assert registry.get_sample_value("soak_points_replayed_total", {"sink": "flaky"}) == 20
    depth = registry.get_sample_value("soak_spool_depth_points", {"soak": "r1", "sink": "flaky"})
    assert depth == 0


def test_a_write_that_breaks_midway_spools_only_the_rest(tmp_path: Path) -> None:
    sink = Flaky()
    s = spooling(tmp_path, sink)
    sink.fail_after = 4
    s.write(pts(0, 10))
    assert s.stats()["written"] == 4 and s.stats()["spooled"] == 6
    sink.up = True
    s.flush()
    assert [p.time_ns for p in sink.received] == list(range(10))


def test_a_replay_that_breaks_midway_resumes_after_what_went_through(tmp_path: Path) -> None:
    sink, clock = Flaky(), Clock()
    s = spooling(tmp_path, sink, clock=clock)
    sink.up = False
    s.write(pts(0, 10))
    sink.up = True
    sink.fail_after = 3
    s.flush()  # replays 3, then the sink breaks again
    assert s.stats()["spool_depth"] == 7
    sink.up = True
    s.flush()
    assert [p.time_ns for p in sink.received] == list(range(10))


def test_spool_survives_a_restart_of_the_service(tmp_path: Path) -> None:
    sink = Flaky()
    sink.up = False
    spooling(tmp_path, sink).write(pts(0, 5))
    sink.up = True
    again = spooling(tmp_path, sink)  # a new process finds the backlog and replays it first
    assert again.down and again.stats()["spool_depth"] == 5
    again.write(pts(5, 2))
    assert [p.time_ns for p in sink.received] == list(range(7))


def test_a_spool_written_before_the_one_point_shape_is_replayed(tmp_path: Path) -> None:
    """A spool left on disk by an older soak (lines `{"m", "t", "g", "f"}`) still replays,
    in order, before the points written in today's shape."""
    old = [{"m": "process", "t": i, "g": dict(RUN), "f": {"rss_bytes": float(i)}} for i in range(3)]
    path = tmp_path / "flaky.spool"
    path.write_text("".join(json.dumps(line) + "\n" for line in old))
    assert Spool(path, 10**9).append(pts(3, 2)) == 2  # today's shape after the old lines
    sink = Flaky()
    again = spooling(tmp_path, sink)  # a new process finds the backlog and replays it first
    assert again.down and again.stats()["spool_depth"] == 5
    again.write(pts(5, 1))
    assert sink.received == pts(0, 6)


def test_size_limit_drops_with_one_event(tmp_path: Path) -> None:
    sink = Flaky()
    sink.up = False
    s = spooling(tmp_path, sink, max_bytes=400)
    s.write(pts(0, 10))
    s.write(pts(10, 10))
    stats = s.stats()
    assert stats["spooled"] + stats["dropped"] == 20
    assert 0 < stats["spooled"] < 10 and stats["spool_bytes"] <= 400
    kinds = [e.kind for e in s.take_events()]
    assert kinds == ["sink_down", "spool_full"]
    sink.up = True
    s.flush()
    assert [p.time_ns for p in sink.received] == list(range(stats["spooled"]))


def test_rejected_points_are_dropped_not_retried(tmp_path: Path) -> None:
    class Rejecting(Flaky):
        def write(self, points: Sequence[Point]) -> None:
            raise SinkWriteError("HTTP 400 bad line", rejected=True)

    s = spooling(tmp_path, Rejecting())
    s.write(pts(0, 3))
    assert s.stats()["dropped"] == 3 and s.stats()["spool_depth"] == 0
    assert [e.kind for e in s.take_events()] == ["sink_rejected"]


def test_sink_set_default_is_sqlite_and_outages_become_event_points(tmp_path: Path) -> None:
    sinks = build_sinks(
        [],
        SpoolConfig(),
        default_sqlite_path=tmp_path / "points.db",
        run_dir=tmp_path,
        default_spool_dir=spool_dir(tmp_path),
    )
    assert isinstance(sinks.store, SqliteStore)
    flaky = Flaky()
    flaky.up = False
    sinks.sinks.append(
        SpoolingSink(flaky, Spool(tmp_path / "spool" / "f.spool", 10**6), retry_interval_s=0.0)
    )
    sinks.write(pts(0, 3))
    store = sinks.store
    events = list(store.points("r1", "event"))
    assert [(e.tags["kind"], e.tags["sink"]) for e in events] == [("sink_down", "flaky")]
    assert [e.tags["kind"] for e in sinks.outages] == ["sink_down"]
    flaky.up = True
    sinks.flush()
    stats = sinks.stats()
    assert stats["flaky"]["replayed"] == 4  # 3 points and the sink_down event
    assert stats["sqlite"]["written"] >= 5 and stats["sqlite"]["spooled"] == 0
    kinds = [e.tags["kind"] for e in store.points("r1", "event")]
    assert kinds == ["sink_down", "sink_recovered"]
    sinks.close()
    assert isinstance(sinks, SinkSet)


def test_a_sink_that_comes_back_after_dropping_everything_recovers(tmp_path: Path) -> None:
    sink = Flaky()
    sink.up = False
    s = spooling(tmp_path, sink, max_bytes=10)
    s.write(pts(0, 3))
    assert s.stats()["dropped"] == 3 and s.stats()["down"] == 1
    sink.up = True
    s.write(pts(3, 2))
    assert s.stats()["down"] == 0 and [p.time_ns for p in sink.received] == [3, 4]
    assert [e.kind for e in s.take_events()] == ["sink_down", "spool_full", "sink_recovered"]


def test_build_sinks_names_spools_and_bad_credentials(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    configs = [
        InfluxV1SinkConfig(kind="influx_v1", url="http://127.0.0.1:1", db="soak"),
        InfluxV1SinkConfig(kind="influx_v1", url="http://127.0.0.1:2", db="soak"),
        SqliteSinkConfig(kind="sqlite", path="other.db"),
    ]
    sinks = build_sinks(
        configs,
        SpoolConfig(dir="sp"),
        default_sqlite_path=tmp_path / "p.db",
        run_dir=tmp_path,
        default_spool_dir=spool_dir(tmp_path),
    )
    assert list(sinks.stats()) == ["influx_v1:soak", "influx_v1:soak#2", "sqlite"]
    assert [s.spool.path.name for s in sinks.sinks] == [
        "influx_v1_soak.spool",
        "influx_v1_soak_2.spool",
        "sqlite.spool",
    ]
    assert all(s.spool.path.parent == tmp_path / "sp" for s in sinks.sinks)
    assert (tmp_path / "other.db").exists()
    sinks.close()
    monkeypatch.delenv("SOAK_TEST_NO_TOKEN", raising=False)
    v2 = InfluxV2SinkConfig(
        kind="influx_v2", url="http://127.0.0.1:1", token_env="SOAK_TEST_NO_TOKEN"
    )
    with pytest.raises(InputError, match="SOAK_TEST_NO_TOKEN"):
        build_sinks(
            [v2],
            SpoolConfig(),
            default_sqlite_path=tmp_path / "p.db",
            run_dir=tmp_path,
            default_spool_dir=spool_dir(tmp_path),
        )


def test_one_holder_replays_an_owed_spool_and_removes_it_only_when_empty(
    tmp_path: Path,
) -> None:
    path = tmp_path / "spool" / "influx.spool"
    first, second = Spool(path, 10**6), Spool(path, 10**6)
    first.append(pts(0, 3))
    assert first.try_lock() and not second.try_lock()  # another process, or this one
    assert not first.remove() and path.exists()  # it holds points: kept
    chunk, ends = first.read_chunk(10)
    first.commit(ends[-1], len(chunk))
    assert first.remove() and not path.exists() and not path.parent.exists()
    assert not Spool(path, 10**6).try_lock()  # nothing left to replay, nothing to lock
