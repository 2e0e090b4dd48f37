"""A target and its helper as one lifecycle (real processes): the helper's port bound into
the target's argv, events on the way, state to re-attach from, a helper restart, and
nothing left running after stop()."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from pydantic import TypeAdapter

from soak.errors import TargetStartError
from soak.procfs import pid_alive
from soak.runs.layout import TargetFiles
from soak.runs.runid import new_run_id
from soak.targets.group import TargetGroup
from soak.targets.specs import TargetConfig

pytestmark = pytest.mark.integration

CFG = TypeAdapter(TargetConfig)


def config(data: dict[str, object]) -> TargetConfig:
    return CFG.validate_python({"runtime": "process", **data})


def group(tmp_path: Path, target: TargetConfig, events: list[tuple[str, str]]) -> TargetGroup:
    serve = [sys.executable, "-m", "http.server", "--bind", "127.0.0.1", "{port.p}"]
    helper = config({"name": "up", "argv": serve, "ports": {"p": {}}})
    return TargetGroup(
        target,
        [helper],
        [],
        files=TargetFiles(tmp_path / "run"),
        run_id=new_run_id("t-group"),
        base_dir=tmp_path,
        on_event=lambda kind, message, value: events.append((kind, message)),
    )


def test_helper_then_bound_target_then_everything_stopped(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    target = config({"name": "srv", "argv": ["sleep", "600", "{service.up.port.p}"]})
    g = group(tmp_path, target, events)
    try:
        running = g.start()
        helper = g.helpers["up"].running
        assert helper is not None and helper.pid is not None and running.pid is not None
        argv = Path(f"/proc/{running.pid}/cmdline").read_bytes().split(b"\0")
        assert argv[2] == str(helper.ports["p"]).encode()  # the helper's port, bound
        kinds = [k for k, _ in events if k != "warning"]  # a low fd limit, on some hosts
        assert kinds == ["service_ready", "started", "ready"]
        state = g.state()
        assert state["target"]["pid"] == running.pid
        assert state["services"]["up"]["pid"] == helper.pid
        assert g.poll_target() is None
        old_pid = helper.pid
        g.restart_helper("up")
        again = g.helpers["up"].running
        assert again is not None and again.pid not in (None, old_pid)
        assert not pid_alive(old_pid)
        pids = [running.pid, again.pid]
    finally:
        g.stop()
    assert not any(pid_alive(pid) for pid in pids if pid is not None)
    assert g.target is None and g.helpers == {}
    g.stop()  # twice: nothing to do


def test_a_target_that_cannot_start_leaves_its_helper_for_stop(tmp_path: Path) -> None:
    events: list[tuple[str, str]] = []
    target = config({"name": "srv", "argv": [str(tmp_path / "no-such-binary")]})
    g = group(tmp_path, target, events)
    with pytest.raises(TargetStartError):
        g.start()
    helper = g.helpers["up"].running
    assert helper is not None and helper.pid is not None and pid_alive(helper.pid)
    g.stop()
    assert not pid_alive(helper.pid)
