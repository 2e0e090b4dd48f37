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
