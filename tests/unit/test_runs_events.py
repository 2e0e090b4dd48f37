"""A run's events: one path, into the run's record and its sinks, whatever the plan."""

from __future__ import annotations

from pathlib import Path

from soak.points import Point
from soak.runs.events import EventRecord, RunEvents
from soak.runs.state import StateStore

TAGS = {"soak": "r-1", "scenario": "s", "target": "t", "version": "1"}


def test_an_event_goes_to_the_record_and_to_the_sinks_as_one_point(tmp_path: Path) -> None:
    state = StateStore(tmp_path / "state.db")
    written: list[Point] = []
    events = RunEvents("r-1", TAGS, record=state.record_event, write=written.extend)
    made = events.add("phase", "phase steady (100 q/s)", 1.0, time_ns=5_000)
    assert state.events("r-1") == [made]  # what a run's status and report read
    assert made == EventRecord("r-1", 5_000, "phase", "phase steady (100 q/s)", 1.0)
    [point] = written  # what Grafana's annotations read
    assert (point.measurement, point.time_ns) == ("event", 5_000)
    assert point.tags == {**TAGS, "kind": "phase"}
    assert point.fields == {"message": "phase steady (100 q/s)", "value": 1.0}
    state.close()


def test_a_run_without_a_state_store_keeps_its_events_in_its_result() -> None:
    kept: list[EventRecord] = []
    points: list[Point] = []
    events = RunEvents("u-1", TAGS, record=kept.append, write=points.extend)
    events.add("old", "ready in 0.52 s", 0.52)
    assert [(e.kind, e.message, e.value) for e in kept] == [("old", "ready in 0.52 s", 0.52)]
    assert [p.tags["kind"] for p in points] == ["old"]
    assert kept[0].time_ns == points[0].time_ns > 0


def test_an_event_already_in_the_sinks_goes_to_the_record_only(tmp_path: Path) -> None:
    """A sink's outage or an alert told: its point is written by the part that made it."""
    state = StateStore(tmp_path / "state.db")
    written: list[Point] = []
    events = RunEvents("r-1", TAGS, record=state.record_event, write=written.extend)
    made = events.recorded("sink_down", "influx: refused", 2.0, 7_000)
    assert state.events("r-1") == [made] and written == []
    state.close()


def test_events_before_the_sinks_open_reach_them_when_they_do(tmp_path: Path) -> None:
    """The clean-up a service does before a run starts: its lines reach the run's sinks."""
    from prometheus_client import CollectorRegistry

    from soak.runs.context import RunContext
    from soak.runs.layout import DataDir
    from soak.runs.run import Run
    from soak.sinks.metrics import ServiceMetrics
    from tests.unit.test_plans_soak import never_judged, scenario

    data_dir = DataDir(tmp_path).create()
    state = StateStore(data_dir.state_db)
    record = state.create_run("t-1", scenario(), data_dir.run_dir("t-1"))
    ctx = RunContext(state, data_dir, ServiceMetrics(CollectorRegistry()), on_end=never_judged)
    run = Run(record, ctx)
    run.event("cleanup", "removed a container left by run t-0")
    assert [e.kind for e in state.events("t-1")] == ["cleanup"]
    run.parts.build_sinks()
    assert run.parts.sinks is not None and run.parts.sinks.store is not None
    run.parts.sinks.flush()
    stored = list(run.parts.sinks.store.points("t-1", "event"))
    assert [(p.tags["kind"], p.fields["message"]) for p in stored] == [
        ("cleanup", "removed a container left by run t-0")
    ]
    run.parts.close_sinks()
    state.close()
