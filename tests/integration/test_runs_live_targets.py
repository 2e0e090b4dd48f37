"""The engine's live targets: a target counts as started from before its start until it is
stopped, in the run directory the data directory names for its key."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.procfs import pid_alive
from soak.runs.layout import TargetFiles, targets_dir
from soak.runs.live_targets import LiveTargets
from soak.runs.runid import new_run_id
from soak.targets.specs import TargetConfig

pytestmark = pytest.mark.integration


def process(name: str, argv: list[str]) -> TargetConfig:
    spec = {"runtime": "process", "name": name, "argv": argv, "ready": {"timeout_s": 5}}
    return TypeAdapter(TargetConfig).validate_python(spec)


def test_a_started_target_is_live_until_stopped(tmp_path: Path) -> None:
    live = LiveTargets(run_dir=tmp_path / "run", run_id=new_run_id("t-live"), base_dir=tmp_path)
    live.start("old", process("sleeper", ["sleep", "300"]))
    running = live.wait_ready("old")
    assert live.started() == ["old"] and running.pid is not None and pid_alive(running.pid)
    assert TargetFiles(targets_dir(tmp_path / "run", "old")).log("sleeper").exists()
    info = live.stop("old")
    assert info is not None and info.requested
    assert live.started() == [] and not pid_alive(running.pid)
    assert live.stop("old") is None  # twice: nothing left to stop


def test_a_target_that_cannot_launch_is_not_live(tmp_path: Path) -> None:
    live = LiveTargets(run_dir=tmp_path / "run", run_id=new_run_id("t-live"), base_dir=tmp_path)
    with pytest.raises(TargetStartError):
        live.start("new", process("missing", [str(tmp_path / "no-such-binary")]))
    assert live.started() == []
