"""An ended run's owed spools in the state store: kept across a reopen, replayed by
OwedSpools, and a spool whose sink cannot be built is said once, not every second."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

from soak.config import Scenario
from soak.points import Point
from soak.runs.layout import DataDir, spool_dir
from soak.runs.owed import OwedSpools
from soak.runs.state import RunStatus, StateStore
from soak.sinks.metrics import ServiceMetrics
from soak.sinks.spool import Spool

SINK = "influx_v1:soak"


def scenario() -> Scenario:
    sc = Scenario.model_validate(
        {
            "name": "owed",
            "target": {"runtime": "external", "name": "t", "pid": 1},
            "phases": [{"name": "steady", "duration_s": "2m"}],
            "sinks": [
                {
                    "kind": "influx_v1",
                    "url": "http://127.0.0.1:9",
                    "db": "soak",
                    "username": "u",
                    "password_env": "SOAK_TEST_UNSET_PASSWORD",
                }
            ],
        }
    )
    sc._base_dir = Path("/")
    return sc


def test_an_owed_spool_whose_sink_cannot_be_built_is_said_once_and_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("SOAK_TEST_UNSET_PASSWORD", raising=False)
    data = DataDir(tmp_path / "data").create()
    state = StateStore(data.state_db)
    run_dir = data.run_dir("r1")
    state.create_run("r1", scenario(), run_dir)
    state.update_run("r1", status=RunStatus.STOPPED)
    path = spool_dir(run_dir) / "influx_v1_soak.spool"
    Spool(path, 10**6).append([Point("process", {"fds": 1.0}, 1, {"soak": "r1"})])
    state.set_owed("r1", SINK, path, 1)
    state.close()
    state = StateStore(data.state_db)  # a restart: still owed
    assert [(o.run_id, o.sink, o.points) for o in state.owed()] == [("r1", SINK, 1)]
    owed = OwedSpools(state, data, ServiceMetrics(CollectorRegistry()))
    owed.drain()
    owed.drain()
    errors = [e.message for e in state.events("r1") if e.kind == "error"]
    assert len(errors) == 1 and "SOAK_TEST_UNSET_PASSWORD" in errors[0]
    assert path.exists() and state.owed("r1")[0].points == 1  # nothing lost
    owed.close()
    state.close()
