"""Spools that outlive their run, against a real InfluxDB 1.6: the sink is down when a
run ends, the service restarts, the sink comes back; every point the run wrote
arrives, once, and the spool is removed only once empty."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from soak.sinks.sqlite import SqliteStore
from tests.support.api import AUTH, api_client, wait_status
from tests.support.tsdb import InfluxV1, influxdb_v1
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration

SINK = "influx_v1:soak"


def scenario(influx_url: str) -> dict[str, Any]:
    return {
        "name": "owed",
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "phases": [{"name": "steady", "duration_s": 600}],
        "samplers": {"interval_s": 1},
        "sinks": [{"kind": "influx_v1", "url": influx_url, "db": "soak", "timeout_s": 2}],
        "spool": {"retry_interval_s": 1},
    }


def soak(*args: str) -> str:
    """The `soak` command's stdout (its exit code says how a run ended: not checked)."""
    argv = [sys.executable, "-m", "soak.cli", *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout


def spooled(client: TestClient, series: str) -> float:
    """The value of one series on /metrics (0 while it is absent)."""
    lines = [
        line
        for line in client.get("/metrics", headers=AUTH).text.splitlines()
        if line.startswith(series)
    ]
    return float(lines[0].split()[-1]) if lines else 0.0


def kinds(status: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in status["events"]]


def influx_times(influx: InfluxV1, run_id: str, measurement: str) -> list[int]:
    found = influx.query(f"SELECT * FROM {measurement} WHERE soak = '{run_id}'", "soak")
    return [row[0] for row in found[0]["values"]] if found else []


def series_of(client: TestClient, run_id: str) -> list[str]:
    """The lines of /metrics that name the run."""
    text = client.get("/metrics", headers=AUTH).text
    return [line for line in text.splitlines() if f'soak="{run_id}"' in line]


def test_points_spooled_at_a_runs_end_reach_the_sink_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    with influxdb_v1(tmp_path) as influx:
        influx.create_database("soak")
        with api_client(data) as client:
            r = client.post("/runs", json=scenario(influx.url), headers=AUTH)
            run_id = r.json()["id"]
            wait_status(client, run_id, lambda s: s.get("latest", {}).get("process"))
            assert influx_times(influx, run_id, "process")  # written through while up
            influx.stop()
            wait_status(client, run_id, lambda s: kinds(s).count("sink_down") == 1)
            # A few ticks into the spool, as its run's own gauge says (per run and sink).
            depth = f'soak_spool_depth_points{{sink="{SINK}",soak="{run_id}"}}'
            wait_for(lambda: spooled(client, depth) >= 30, 30.0, "30 points spooled")
            client.post(f"/runs/{run_id}/stop", headers=AUTH)
            ended = wait_status(client, run_id, lambda s: s["status"] == "stopped")
            owed = ended["owed"][SINK]
            assert owed > 0 and "spool_owed" in kinds(ended)
            # Only the owed gauge of the ended run stays on /metrics.
            wait_for(lambda: len(series_of(client, run_id)) == 1, 10.0, "the run's series gone")
            (line,) = series_of(client, run_id)
            assert line.startswith("soak_spool_owed_points{") and line.endswith(f" {owed}.0")
        # The service restarts with the sink still down: the spool is still owed.
        with api_client(data) as client:
            listed = client.get("/runs", headers=AUTH).json()["runs"]
            assert [r["owed"] for r in listed] == [{SINK: owed}]
            spool = next((data / "runs" / run_id / "spool").glob("influx*.spool"))
            assert spool.stat().st_size > 0
            # What the commands show of it, read from the data directory.
            listing = soak("list", "--data-dir", str(data))
            assert f"[owed to {SINK}: {owed} points]" in listing
            shown = soak("status", run_id, "--data-dir", str(data))
            assert f"owed to {SINK}  {owed:,} points" in shown
            influx.start()
            drained = wait_status(client, run_id, lambda s: "spool_drained" in kinds(s))
            assert drained["owed"] == {}
            event = next(e for e in drained["events"] if e["kind"] == "spool_drained")
            assert event["value"] == owed  # each owed point replayed once
            assert not spool.exists()  # removed once empty, not before
            assert series_of(client, run_id) == []
        # InfluxDB holds every point of the run the embedded store holds, in time order.
        store = SqliteStore(data / "points.db")
        for measurement in ("process", "event"):
            stored = [p.time_ns for p in store.points(run_id, measurement)]
            assert influx_times(influx, run_id, measurement) == sorted(set(stored)), measurement
