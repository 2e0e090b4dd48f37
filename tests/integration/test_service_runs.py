"""A run through the control API in-process: submitted, ticking, reported on demand,
stopped (judged and reported), and seen on /metrics. The target is this test process
itself (an `external` target: sampled, never started or stopped)."""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from soak.service.api import create_app
from soak.service.manager import RunManager
from tests.support.api import AUTH, TOKEN, wait_status
from tests.support.servers import free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def manager(tmp_path: Path) -> Iterator[RunManager]:
    manager = RunManager(tmp_path / "data")
    manager.start(resume=False)
    try:
        yield manager
    finally:
        manager.shutdown(stop_runs=True)


@pytest.fixture
def client(manager: RunManager) -> Iterator[TestClient]:
    with TestClient(create_app(manager, TOKEN)) as c:
        yield c


def test_submit_tick_report_stop(client: TestClient) -> None:
    scenario = {
        "name": "self",
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "phases": [
            {"name": "warmup", "duration_s": 2, "warmup": True},
            {"name": "steady", "duration_s": 600},
        ],
        "samplers": {"interval_s": 1},
        "leaks": {"window_s": 1, "min_windows": 3, "interval_s": 1},
    }
    r = client.post("/runs", json=scenario, headers=AUTH)
    assert r.status_code == 201, r.text
    run_id = r.json()["id"]
    running = wait_status(
        client,
        run_id,
        lambda s: s["status"] == "running" and s.get("latest", {}).get("process"),
    )
    ticks = f'soak_ticks_total{{soak="{run_id}"}}'
    wait_for(
        lambda: ticks in client.get("/metrics", headers=AUTH).text,
        10.0,
        "the run's ticks on /metrics",
    )
    assert running["latest"]["process"]["rss_bytes"] > 0
    assert running["remaining_s"] > 500
    listed = client.get("/runs", headers=AUTH).json()["runs"]
    assert [x["id"] for x in listed] == [run_id]
    # A report of a run still going is built on demand from what is stored.
    report = client.get(f"/runs/{run_id}/report?format=md", headers=AUTH)
    assert report.status_code == 200 and run_id in report.text
    wait_status(client, run_id, lambda s: s["phase"] == "steady")
    stopping = client.post(f"/runs/{run_id}/stop", headers=AUTH)
    assert stopping.status_code == 202 and stopping.json()["stopping"]
    final = wait_status(client, run_id, lambda s: s["status"] == "stopped")
    assert final["remaining_s"] is None  # stopped: nothing remains of it
    assert [e["kind"] for e in final["events"]][-1] == "stop"
    assert set(final["reports"]) == {"html", "json", "md"}
    assert final["criteria"]  # judged on what ran
    assert os.getpid() and Path(f"/proc/{os.getpid()}").exists()  # external: not stopped
    # An ended run leaves /metrics (its series went with its end); its outcome is counted.
    ended = 'soak_runs_ended_total{outcome="stopped"} 1.0'

    def counted() -> str | None:
        text = client.get("/metrics", headers=AUTH).text
        return text if ended in text else None

    metrics = wait_for(counted, 10.0, "the run's outcome counted on /metrics")
    assert f'soak="{run_id}"' not in metrics
    # Stopping a run that has ended changes nothing.
    assert client.post(f"/runs/{run_id}/stop", headers=AUTH).status_code == 200


def test_a_sink_outage_is_in_the_run_events(client: TestClient) -> None:
    dead = free_port()  # nothing listens: every write to this InfluxDB fails and spools
    scenario = {
        "name": "outage",
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "phases": [{"name": "steady", "duration_s": 600}],
        "samplers": {"interval_s": 1},
        "sinks": [{"kind": "influx_v1", "url": f"http://127.0.0.1:{dead}", "db": "soak"}],
        "spool": {"retry_interval_s": 1},
    }
    run_id = client.post("/runs", json=scenario, headers=AUTH).json()["id"]
    down = wait_status(
        client,
        run_id,
        lambda s: (
            any(e["kind"] == "sink_down" for e in s["events"]) and "process" in s.get("latest", {})
        ),
    )
    event = next(e for e in down["events"] if e["kind"] == "sink_down")
    assert event["message"].startswith("influx")
    # The embedded store goes on regardless: samples land.
    assert down["latest"]["process"]["rss_bytes"] > 0
    client.post(f"/runs/{run_id}/stop", headers=AUTH)
    wait_status(client, run_id, lambda s: s["status"] == "stopped")


def test_a_helper_that_dies_is_an_event_and_restarted(client: TestClient) -> None:
    scenario = {
        "name": "helper",
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "services": [
            {
                "runtime": "process",
                "name": "sleeper",
                "argv": ["sleep", "600"],
                "on_exit": "restart",
                "max_restarts": 1,
            },
        ],
        "phases": [{"name": "steady", "duration_s": 600}],
        "samplers": {"interval_s": 1},
    }
    run_id = client.post("/runs", json=scenario, headers=AUTH).json()["id"]
    wait_status(client, run_id, lambda s: s["status"] == "running")
    pids = [int(p.name) for p in Path("/proc").iterdir() if p.name.isdigit()]
    sleeper = next(pid for pid in pids if _cmdline(pid) == "sleep 600" and run_id in _cwd(pid))
    os.kill(sleeper, 9)
    restarted = wait_status(
        client, run_id, lambda s: "service_restarted" in [e["kind"] for e in s["events"]]
    )
    exited = next(e for e in restarted["events"] if e["kind"] == "service_exited")
    assert "sleeper" in exited["message"] and "signal 9" in exited["message"]
    assert restarted["restarts"] == 0  # the target's count is untouched
    client.post(f"/runs/{run_id}/stop", headers=AUTH)
    wait_status(client, run_id, lambda s: s["status"] == "stopped")


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        return ""


def _cwd(pid: int) -> str:
    try:
        return os.readlink(f"/proc/{pid}/cwd")
    except OSError:
        return ""


def test_a_fault_while_ending_ends_the_run_as_error(
    manager: RunManager, client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A fault no real part can be made to show on demand: the end hook (judging) raises.
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("judge is broken")

    monkeypatch.setattr(manager.ctx, "on_end", broken)
    scenario = {
        "name": "fault",
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "phases": [{"name": "steady", "duration_s": 3}],
        "samplers": {"interval_s": 1},
    }
    run_id = client.post("/runs", json=scenario, headers=AUTH).json()["id"]
    final = wait_status(client, run_id, lambda s: s["status"] not in ("pending", "running"))
    assert final["status"] == "error"
    assert "judge is broken" in final["message"]
    kinds = [e["kind"] for e in final["events"]]
    time.sleep(2.0)  # two more tick slots: nothing may happen to an ended run
    assert [
        e["kind"] for e in client.get(f"/runs/{run_id}", headers=AUTH).json()["events"]
    ] == kinds
