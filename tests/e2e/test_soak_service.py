"""`soak serve` end to end: a submitted soak survives kill -9 of its target and a restart
of the service itself (resumed, with the gap recorded)."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from tests.e2e.soakrun import (
    DEMO,
    QUICK,
    TOKEN,
    kinds,
    processes_under,
    run_soak,
    service,
    status,
    wait_for,
)
from tests.support.servers import free_port

pytestmark = pytest.mark.e2e


def test_kill_target_and_restart_service_mid_run(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {"SOAK_TOKEN": TOKEN}
    with service(data, port):
        started = run_soak(
            "start", str(DEMO), "--duration", "50s", *QUICK, "--server", url,
            "--set", "criteria.leaks_ok=false", "--set", "criteria.restarts_max=1",
            # A kill -9 loses the queries in flight and stretches that tick's p99: allowed here.
            "--set", "criteria.lost_ratio_max=0.05", "--set", "criteria.p99_ms_max={}",
            "--set", "target.max_restarts=2",
            env=env,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr
        run_id = started.stdout.strip()
        first = wait_for(
            lambda: (
                (s := status(port, run_id))["status"] == "running"
                and (s["elapsed_s"] or 0) > 8
                and s
            ),
            60.0,
            "the run has run 8 s",
        )
        old_pid = first["target_pid"]
        os.kill(old_pid, signal.SIGKILL)
        after_kill = wait_for(
            lambda: "restarted" in kinds(s := status(port, run_id)) and s, 30.0, "a restart"
        )
        exited = [e for e in after_kill["events"] if e["kind"] == "exited"]
        assert exited and "signal 9" in exited[0]["message"]
        assert after_kill["restarts"] == 1
        new_pid = after_kill["target_pid"]
        assert new_pid != old_pid
    # The service is gone (SIGTERM); the target, in its own session, is not.
    os.kill(new_pid, 0)
    time.sleep(2.0)
    with service(data, port):
        resumed = wait_for(
            lambda: "gap" in kinds(s := status(port, run_id)) and s, 20.0, "the gap event"
        )
        assert resumed["status"] == "running"
        gap = next(e for e in resumed["events"] if e["kind"] == "gap")
        assert gap["value"] >= 2.0
        assert resumed["target_pid"] == new_pid
        final = wait_for(
            lambda: (s := status(port, run_id))["status"] not in ("pending", "running") and s,
            90.0,
            "the run ends",
        )
        assert final["status"] == "passed", (final["message"], final["events"][-5:])
        restart_criterion = next(c for c in final["criteria"] if c["name"] == "restarts")
        assert restart_criterion["value"] == 1
        report = run_soak("report", run_id, "--format", "json", "--server", url, env=env)
        assert report.returncode == 0, report.stderr
        assert json.loads(report.stdout)["run"]["id"] == run_id
        # Ticks went on after the resume: samples on both sides of the gap.
        listed = run_soak("list", "--json", "--server", url, env=env)
        assert [r["id"] for r in json.loads(listed.stdout)] == [run_id]
    assert processes_under(data / "runs" / run_id) == []
