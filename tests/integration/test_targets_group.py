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


def lone(
    tmp_path: Path,
    target: TargetConfig,
    events: list[tuple[str, str]],
    load_connections: int | None = None,
) -> TargetGroup:
    """`target` alone, under a load of `load_connections` connections (None: no load)."""
    return TargetGroup(
        target,
        [],
        [],
        files=TargetFiles(tmp_path / "run"),
        run_id=new_run_id("t-group"),
        base_dir=tmp_path,
        on_event=lambda kind, message, value: events.append((kind, message)),
        load_connections=load_connections,
    )


@pytest.mark.parametrize(
    ("connections", "warned"), [(None, False), (0, False), (44, False), (45, True)]
)
def test_open_files_warning_only_below_what_the_load_needs(
    tmp_path: Path, connections: int | None, warned: bool
) -> None:
    """A server started with 300 open files: enough for a UDP load (no connections) and
    for 44 connections beside its own 256 files; 45 are one too many."""
    serve = f"ulimit -n 300 && exec {sys.executable} -m http.server --bind 127.0.0.1 $0"
    target = config({"name": "srv", "argv": ["sh", "-c", serve, "{port.p}"], "ports": {"p": {}}})
    events: list[tuple[str, str]] = []
    g = lone(tmp_path, target, events, connections)
    try:
        running = g.start()
        assert running.fd_limit == 300
    finally:
        g.stop()
    warnings = [m for k, m in events if k == "warning" and "open-files" in m]
    want = ["srv: open-files limit is 300, below the 301 this load needs (45 connections"]
    assert [w[: len(want[0])] for w in warnings] == (want if warned else [])


def test_a_rendered_file_that_holds_a_secret_goes_when_its_target_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOAK_TEST_GROUP_SECRET", "s3cr3t-value")
    files = [
        {"dest": "secret.conf", "content": "token={env.SOAK_TEST_GROUP_SECRET}\n"},
        {"dest": "plain.conf", "content": "dir={run_dir} literal={{run_dir}}\n"},
    ]
    target = config({"name": "srv", "argv": ["sleep", "600"], "files": files})
    events: list[tuple[str, str]] = []
    g = lone(tmp_path, target, events)
    run = tmp_path / "run"
    try:
        g.start()
        assert (run / "secret.conf").read_text() == "token=s3cr3t-value\n"  # the target reads it
        assert (run / "secret.conf").stat().st_mode & 0o077 == 0
    finally:
        g.stop()
    assert not (run / "secret.conf").exists()
    assert (run / "plain.conf").read_text() == f"dir={run.resolve()} literal={{run_dir}}\n"
