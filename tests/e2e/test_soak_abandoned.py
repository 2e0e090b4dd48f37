"""A SIGKILLed `soak start --foreground` is `abandoned` at once in `soak status` and
`soak list` (its owner, pid and start time, is gone), with exit code 4; the next start
on the data directory stops what it left and the run stays `abandoned`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.soakrun import run_soak, scenario_in_foreground, upstream_rest
from tests.support.waiting import wait_for

pytestmark = pytest.mark.e2e

EXIT_ABANDONED = 4

SCENARIO = """
name: abandoned
target:
  runtime: process
  name: upstream
  argv: [dnsmasq, --no-daemon, "--port={port.dns}", --listen-address=127.0.0.1,
         --bind-interfaces, --no-resolv, --no-hosts, "--address=/#/192.0.2.1", --user=root]
""" + upstream_rest(20, "10m")


def runs(data: Path) -> list[dict[str, Any]]:
    listed = run_soak("list", "--json", "--data-dir", str(data))
    return json.loads(listed.stdout) if listed.returncode == 0 else []


def running(data: Path) -> dict[str, Any] | None:
    return next((r for r in runs(data) if r["status"] == "running"), None)


def test_a_sigkilled_foreground_run_is_abandoned_at_once(tmp_path: Path) -> None:
    fg, data = scenario_in_foreground(tmp_path, "abandoned", SCENARIO)
    try:
        run = wait_for(lambda: running(data), 90.0, "the run `running` in soak list")
        alive = run_soak("status", run["id"], "--json", "--data-dir", str(data))
        assert alive.returncode == 0 and json.loads(alive.stdout)["status"] == "running"
    finally:
        fg.kill()  # SIGKILL: no chance to record its end
        fg.wait(30)
    # Its owner is reaped: the very next read tells it, no later sweep needed.
    seen = run_soak("status", run["id"], "--json", "--data-dir", str(data))
    assert seen.returncode == EXIT_ABANDONED, seen.stderr
    status = json.loads(seen.stdout)
    assert status["status"] == "abandoned" and status["remaining_s"] is None, status
    assert "rate_target_qps" not in status  # no stale rate of a run nobody drives
    assert seen.stderr.strip() == (
        f"soak: run {run['id']} abandoned: the foreground command that ran it is gone"
    )
    assert [r["status"] for r in runs(data)] == ["abandoned"]
    text = run_soak("list", "--data-dir", str(data)).stdout
    assert " abandoned " in text, text
    report = run_soak("report", run["id"], "--format", "md", "--data-dir", str(data))
    assert report.returncode == 0 and "ABANDONED after" in report.stdout, report.stdout[:2000]
    assert "PASSED" not in report.stdout
    active = run_soak("status", "--data-dir", str(data))
    assert active.returncode == 0 and "no active runs (1 ended" in active.stdout
    # The next start on the data directory stops what it left; the run stays abandoned.
    # (2 s judge no leak window: the run passes only where not-judged criteria may)
    again = run_soak(
        "start", str(tmp_path / "abandoned.yaml"), "--foreground", "--duration", "2s",
        "--data-dir", str(data),
        "--set", "criteria.not_judged=pass",
    )  # fmt: skip
    assert again.returncode == 0, again.stderr[-2000:]
    after = run_soak("status", run["id"], "--json", "--data-dir", str(data))
    assert after.returncode == EXIT_ABANDONED, after.stderr
    events = json.loads(after.stdout)["events"]
    assert any(e["kind"] == "stop" and "abandoned" in e["message"] for e in events), events
