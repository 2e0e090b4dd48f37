"""`soak serve` end to end: a submitted soak survives kill -9 of its target and a restart
of the service itself (resumed, with the gap recorded)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.e2e.soakrun import DEMO, QUICK, ROOT, processes_under, run_soak, soak_argv
from tests.support.servers import free_port

pytestmark = pytest.mark.e2e

TOKEN = "e2e-token"


@contextmanager
def service(data: Path, port: int) -> Iterator[subprocess.Popen[bytes]]:
    log = open(data.parent / f"serve-{time.monotonic_ns()}.log", "wb")  # noqa: SIM115
    proc = subprocess.Popen(
        soak_argv("serve", "--listen", f"127.0.0.1:{port}", "--data-dir", str(data)),
        stdout=log, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True,
        env={**os.environ, "SOAK_TOKEN": TOKEN},
    )  # fmt: skip
    try:
        wait_for(lambda: _healthy(port), 20.0, "the service answers /healthz")
        yield proc
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
        log.close()


def _healthy(port: int) -> bool:
    try:
        return httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1.0).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(check: Callable[[], Any], timeout_s: float, what: str) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = check()
        if value:
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting until {what}")


def status(port: int, run_id: str) -> dict[str, Any]:
    r = httpx.get(
        f"http://127.0.0.1:{port}/runs/{run_id}",
        headers={"Authorization": f"Bearer {TOKEN}"},
        timeout=10.0,
    )
    r.raise_for_status()
    result: dict[str, Any] = r.json()
    return result


def kinds(st: dict[str, Any]) -> list[str]:
    return [e["kind"] for e in st["events"]]


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
