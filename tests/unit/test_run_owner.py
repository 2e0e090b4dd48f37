"""Who drives a run: a foreground run whose owner (pid and its start time) is gone is
told `abandoned`; a recycled pid (same number, another start time) is not its owner."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

from soak.config import Scenario
from soak.procfs import start_ticks
from soak.runs.state import RunRecord, RunStatus
from soak.runs.supervise import as_seen, owner

SCENARIO = {
    "name": "owner",
    "target": {"runtime": "external", "name": "t", "ports": {"dns": {"host": 5300}}},
    "phases": [{"name": "steady", "duration_s": "1m"}],
}


def record(target_state: dict[str, object] | None, *, foreground: bool = True) -> RunRecord:
    return RunRecord(
        id="owner-20261206-000000-abcd",
        name="owner",
        scenario=Scenario.model_validate(SCENARIO),
        run_dir=Path("/nonexistent"),
        status=RunStatus.RUNNING,
        phase="steady",
        message="",
        created_ns=1_000,
        started_ns=2_000,
        ended_ns=None,
        origin_ns=2_000,
        last_tick_ns=3_000,
        restarts=0,
        target_state=target_state,
        foreground=foreground,
    )


def test_a_live_owner_keeps_its_run_running() -> None:
    rec = record({"owner": owner()})
    assert as_seen(rec) is rec


def test_a_gone_owner_makes_the_run_abandoned_ended_at_its_last_tick() -> None:
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    gone = {"pid": child.pid, "start_ticks": start_ticks(child.pid)}
    child.wait()
    seen = as_seen(record({"owner": gone}))
    assert seen.status == RunStatus.ABANDONED and seen.ended_ns == 3_000
    assert seen.message == "abandoned: the foreground command that ran it is gone"


def test_a_recycled_pid_is_not_the_owner() -> None:
    recycled = {"pid": os.getpid(), "start_ticks": (start_ticks(os.getpid()) or 0) + 1}
    assert as_seen(record({"owner": recycled})).status == RunStatus.ABANDONED


def test_a_service_run_and_an_ended_run_are_left_as_they_are() -> None:
    gone = {"owner": {"pid": 2**22 + 1, "start_ticks": 1}}  # above pid_max: never alive
    service_run = record(gone, foreground=False)
    assert as_seen(service_run) is service_run
    ended = replace(record(gone), status=RunStatus.PASSED)
    assert as_seen(ended) is ended
    unknown = record(None)  # not started yet: no owner written, not judged gone
    assert as_seen(unknown) is unknown
