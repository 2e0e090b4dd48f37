"""Sinks into real InfluxDB 1.6 and VictoriaMetrics, read back; an outage in the middle of a run."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from soak.clock import NS_PER_S
from soak.points import Point
from soak.runs.layout import spool_dir
from soak.samplers import TickRunner
from soak.samplers.proc import ProcSampler
from soak.sinks import SinkSet, build_sinks
from soak.sinks.destinations import (
    InfluxV1SinkConfig,
    InfluxV2SinkConfig,
    SinkConfig,
    SpoolConfig,
    SqliteSinkConfig,
)
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.sqlite import SqliteStore
from soak.targets.base import Running
from tests.support.tsdb import InfluxV1, VictoriaMetrics, influxdb_v1, victoria_metrics

pytestmark = pytest.mark.integration

S = NS_PER_S
MS = 1_000_000
RUN = {"soak": "run-1", "scenario": "sinks", "target": "pdns", "version": "4.7.3"}


@pytest.fixture(scope="module")
def influx(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InfluxV1]:
    with influxdb_v1(tmp_path_factory.mktemp("influx")) as server:
        server.create_database("soak")
        yield server


@pytest.fixture(scope="module")
def vm(tmp_path_factory: pytest.TempPathFactory) -> Iterator[VictoriaMetrics]:
    with victoria_metrics(tmp_path_factory.mktemp("vm")) as server:
        yield server


def base_ns() -> int:
    """A recent whole second: inside any retention, distinct per test run."""
    return (time.time_ns() // S - 3600) * S


def tick_points(tick_ns: int, soak: str = "run-1") -> list[Point]:
    run = {**RUN, "soak": soak}
    return [
        Point("process", {"rss_bytes": 1000.0 + tick_ns // S % 1000, "fds": 12}, tick_ns, run),
        Point(
            "api",
            {"latency_ms": 1.25, "status": 200, "ok": True},
            tick_ns,
            {**run, "endpoint": "GET /stats/summary"},
        ),
        Point("dig", {"latency_ms": 0.5, "rcode": 0.0}, tick_ns, {**run, "probe": "a.test/A"}),
    ]


def sinks_for(cfg: SinkConfig, tmp_path: Path, **spool: object) -> SinkSet:
    return build_sinks(
        [cfg, SqliteSinkConfig(kind="sqlite")],
        SpoolConfig.model_validate(spool),
        default_sqlite_path=tmp_path / "points.db",
        run_dir=tmp_path,
        default_spool_dir=spool_dir(tmp_path),
        metrics=ServiceMetrics(CollectorRegistry()),
    )


def test_influx_v1_write_and_influxql_read_back(influx: InfluxV1, tmp_path: Path) -> None:
    t0 = base_ns()
    cfg = InfluxV1SinkConfig(kind="influx_v1", url=influx.url, db="soak", batch_size=2)
    sinks = sinks_for(cfg, tmp_path)
    sinks.write(tick_points(t0) + tick_points(t0 + 60 * S))
    sinks.close()
    (series,) = influx.query(
        "SELECT latency_ms, status, ok FROM api WHERE soak = 'run-1' GROUP BY *", "soak"
    )
    assert series["tags"] == {**RUN, "endpoint": "GET /stats/summary"}
    assert series["values"] == [[t0, 1.25, 200, 1], [t0 + 60 * S, 1.25, 200, 1]]
    (proc,) = influx.query(f"SELECT rss_bytes FROM process WHERE time >= {t0}", "soak")
    assert [v[0] for v in proc["values"]] == [t0, t0 + 60 * S]
    assert sinks.stats()["influx_v1:soak"]["written"] == 6


def test_victoria_metrics_v2_write_and_export(vm: VictoriaMetrics, tmp_path: Path) -> None:
    t0 = base_ns()
    cfg = InfluxV2SinkConfig(kind="influx_v2", url=vm.url, org="o", bucket="b", batch_size=4)
    sinks = sinks_for(cfg, tmp_path)
    sinks.write(tick_points(t0, soak="vm-1") + tick_points(t0 + 60 * S, soak="vm-1"))
    sinks.close()
    (api,) = vm.export('{__name__="api_latency_ms",soak="vm-1"}', series=1)
    labels = {k: v for k, v in api["metric"].items() if k not in ("__name__", "db")}
    assert labels == {**RUN, "soak": "vm-1", "endpoint": "GET /stats/summary"}
    assert api["timestamps"] == [t0 // MS, (t0 + 60 * S) // MS]
    assert api["values"] == [1.25, 1.25]
    (ok,) = vm.export('{__name__="api_ok",soak="vm-1"}', series=1)
    assert ok["values"] == [1, 1]
    assert sinks.stats()["influx_v2:b"] == {
        "written": 6,
        "spooled": 0,
        "replayed": 0,
        "dropped": 0,
        "spool_depth": 0,
        "spool_bytes": 0,
        "down": 0,
    }


def run_through_outage(
    server: VictoriaMetrics | InfluxV1, sinks: SinkSet, soak: str, how: str = "stop"
) -> list[int]:
    """12 ticks; the server is down for ticks 4-7 (stopped, or SIGKILLed with `how="kill"`,
    then started on the same data).

    `process` comes from the real proc sampler (this test's own process), the
    rest from fixed points, through a TickRunner as in a run.
    """
    me = Running("self", "127.0.0.1", {}, os.getpid(), None)
    runner = TickRunner([ProcSampler(lambda: me)], run_tags={**RUN, "soak": soak})
    t0 = base_ns()
    ticks = [t0 + i * S for i in range(12)]
    for i, tick in enumerate(ticks):
        if i == 4:
            server.kill() if how == "kill" else server.stop()
        if i == 8:
            server.start()
        fixed = [p for p in tick_points(tick, soak=soak) if p.measurement != "process"]
        sinks.write(runner.run_tick(tick) + fixed)
    runner.close()
    sinks.flush()
    return ticks


# VictoriaMetrics answers 204 to a write before the samples reach its disk (they sit in
# memory for up to its -inmemoryDataFlushInterval): a SIGKILL right after the last
# writes loses those acknowledged samples. The embedded store keeps them; resending
# them is not done (VictoriaMetrics would keep a resent sample twice unless it runs
# with -dedup.minScrapeInterval). docs/samplers-and-sinks.md says so.
VM_KILL_LOSES_ACKED = pytest.mark.xfail(
    reason="VictoriaMetrics loses acknowledged samples not yet flushed when SIGKILLed",
    strict=False,
)


def through_outage(
    db: VictoriaMetrics | InfluxV1,
    cfg: InfluxV1SinkConfig | InfluxV2SinkConfig,
    tmp_path: Path,
    soak: str,
    how: str,
) -> tuple[dict[str, int], SqliteStore, list[int]]:
    """Ticks through an outage of db into its sink: (the sink's stats, the embedded store,
    the ticks it holds). Every tick was spooled and replayed, and is in the store once."""
    sinks = sinks_for(cfg, tmp_path, retry_interval_s=0)
    ticks = run_through_outage(db, sinks, soak, how)
    stats = sinks.stats()[f"{cfg.kind}:soak"]
    sinks.close()
    assert stats["spooled"] >= 12 and stats["replayed"] == stats["spooled"]
    store = SqliteStore(tmp_path / "points.db")
    stored = [t for t, _ in store.series(soak, "process", "fds")[0][1]]
    assert stored == ticks
    return stats, store, stored


@pytest.mark.parametrize("how", ["stop", pytest.param("kill", marks=VM_KILL_LOSES_ACKED)])
def test_outage_every_point_of_every_tick_once_in_order_vm(
    vm: VictoriaMetrics, tmp_path: Path, how: str
) -> None:
    cfg = InfluxV2SinkConfig(kind="influx_v2", url=vm.url, timeout_s=2.0)
    soak = f"outage-vm-{how}"
    stats, store, stored = through_outage(vm, cfg, tmp_path, soak, how)
    assert stats["dropped"] == 0 and stats["spool_depth"] == 0
    if how == "kill":
        vm.force_flush()  # what it acknowledged before the kill is on disk, or lost
    # every tick of the embedded store, once each, in the TSDB after its restart
    for name in ("process_rss_anon_bytes", "process_threads", "api_ok", "dig_latency_ms"):
        (series,) = vm.export(f'{{__name__="{name}",soak="{soak}"}}', series=1)
        assert series["timestamps"] == [t // MS for t in stored], name
    # the outage itself is in the data: events in every sink (VictoriaMetrics keeps numbers)
    (down,) = vm.export(f'{{__name__="event_value",soak="{soak}",kind="sink_down"}}', series=1)
    assert len(down["values"]) == 1
    kinds = [p.tags["kind"] for p in store.points(soak, "event")]
    assert kinds == ["sink_down", "sink_recovered"]


@pytest.mark.parametrize("how", ["stop", "kill"])
def test_outage_every_point_of_every_tick_once_in_order_influx_v1(
    influx: InfluxV1, tmp_path: Path, how: str
) -> None:
    cfg = InfluxV1SinkConfig(kind="influx_v1", url=influx.url, db="soak", timeout_s=2.0)
    soak = f"outage-v1-{how}"
    _, store, stored = through_outage(influx, cfg, tmp_path, soak, how)
    # every tick of the embedded store, once each, in InfluxDB after its restart
    for measurement in ("process", "api", "dig"):
        (series,) = influx.query(f"SELECT * FROM {measurement} WHERE soak = '{soak}'", "soak")
        assert [v[0] for v in series["values"]] == stored, measurement
    assert [p.tags["kind"] for p in store.points(soak, "event")] == ["sink_down", "sink_recovered"]
