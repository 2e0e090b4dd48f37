"""Service mode: a target that daemonizes is named and stopped; a service sweeps what a
dead run left, and keeps what it (or another service) will resume. Real processes."""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker.errors
import pytest

from soak.procfs import pid_alive, start_ticks
from soak.service.manager import RunManager
from soak.sinks.sqlite import SqliteStore
from soak.targets.tree import MARK_ENV, Mark, marked
from tests.support.api import AUTH, api_client, wait_status
from tests.support.refdns import refdns_binary
from tests.support.skips import docker_engine_fixture

pytestmark = pytest.mark.integration

DEAD_OWNER = 2**22 + 7  # above pid_max's default: no such process


def ended(status: dict[str, Any]) -> bool:
    return status["status"] not in ("pending", "running")


def test_a_service_run_whose_target_daemonizes_says_so_and_leaves_nothing(
    tmp_path: Path,
) -> None:
    argv = [
        "dnsmasq", "--port={port.dns}", "--listen-address=127.0.0.1", "--bind-interfaces",
        "--no-resolv", "--no-hosts", "--pid-file={data_dir}/dnsmasq.pid", "--user=root",
    ]  # fmt: skip
    scenario = {
        "name": "daemon",
        "target": {"runtime": "process", "name": "upstream", "argv": argv,
                   "ports": {"dns": {"protocol": "both"}}},
        "phases": [{"name": "steady", "duration_s": 60}],
    }  # fmt: skip
    with api_client(tmp_path / "data") as client:
        r = client.post("/runs", json=scenario, headers=AUTH)
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        final = wait_status(client, run_id, ended, 30)
    # Found before it was ready ("upstream: dnsmasq forked ...") or, when it answered
    # before its parent exited, at the first tick ("target dnsmasq forked ..."): an error.
    assert final["status"] == "error", final["message"]
    message = final["message"]
    assert "dnsmasq forked into the background (pid " in message, message
    assert "run it in the foreground (--no-daemon)" in message
    pid = int(message.split("(pid ", 1)[1].split(")", 1)[0])
    assert not pid_alive(pid)
    assert [p for p, m in marked().items() if m.run_id == run_id] == []


@contextmanager
def marked_sleep(mark: Mark) -> Iterator[int]:
    """A process carrying `mark`, in a session of its own (as a daemon would be)."""
    proc = subprocess.Popen(
        ["sleep", "300"], env={**os.environ, MARK_ENV: mark.text()}, start_new_session=True
    )
    try:
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


def test_serve_sweeps_dead_runs_processes_and_keeps_another_services(tmp_path: Path) -> None:
    data = tmp_path / "data"
    mine = Mark("svc-gone-1", "upstream", DEAD_OWNER, None, str(data))
    theirs = Mark("svc-gone-2", "upstream", DEAD_OWNER, None, str(tmp_path / "theirs"))
    with marked_sleep(mine) as left, marked_sleep(theirs) as kept:
        manager = RunManager(data)
        manager.start(resume=True)
        try:
            (line,) = [ln for ln in manager.leftovers if ln.startswith("removed")]
        finally:
            manager.shutdown()
        assert "upstream of run svc-gone-1" in line, line
        assert f"pid {left}" in line and "svc-gone-2" not in line
        # Killed (a zombie until the test reaps it): no longer a live process.
        assert not pid_alive(left)
        assert pid_alive(kept)  # another data directory's service will resume it


engine = docker_engine_fixture(["soak-test/base:bookworm"])


@pytest.mark.docker
def test_a_foreground_start_removes_a_dead_runs_container_in_one_line(
    engine: Any, tmp_path: Path
) -> None:
    run_id = f"t-gone-{uuid.uuid4().hex[:8]}"
    labels = {
        "soak.run": run_id,
        "soak.target": "t",
        "soak.owner": f"{socket.gethostname()}:{DEAD_OWNER}",
    }
    container = engine.containers.create("soak-test/base:bookworm", ["sleep", "60"], labels=labels)
    try:
        manager = RunManager(tmp_path / "data")
        manager.start(resume=False)  # what `soak start --foreground` does first
        manager.shutdown()
        (line,) = [ln for ln in manager.leftovers if ln.startswith("removed")]
        assert "container(s)/volume(s)" in line, line
        assert (
            engine.containers.list(
                all=True, filters={"label": f"soak.run={run_id}"}, ignore_removed=True
            )
            == []
        )
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


@pytest.mark.docker
def test_the_sweep_removes_only_what_a_gone_owner_left_and_names_the_rest(
    engine: Any, tmp_path: Path
) -> None:
    """Labelled as soak labels its containers; only the one whose owner (pid and start
    time) is gone goes: one without an owner label, one whose owner lives, are left and
    named, one line each. A pid that lives with another start time is not the owner."""
    tag = uuid.uuid4().hex[:8]
    host, me = socket.gethostname(), os.getpid()
    other = subprocess.Popen(["sleep", "120"])  # another run's soak process, alive
    owners: dict[str, str | None] = {
        f"t-noowner-{tag}": None,
        f"t-lives-{tag}": f"{host}:{other.pid}:{start_ticks(other.pid)}",
        f"t-gone-{tag}": f"{host}:{DEAD_OWNER}:12345",
        f"t-recycled-{tag}": f"{host}:{me}:{(start_ticks(me) or 0) + 1}",
    }
    made = {}
    for run, owner in owners.items():
        labels = {"soak.run": run, "soak.target": "t"}
        if owner is not None:
            labels["soak.owner"] = owner
        made[run] = engine.containers.create(
            "soak-test/base:bookworm", ["sleep", "60"], labels=labels, name=f"soak-{run}"
        )
    try:
        manager = RunManager(tmp_path / "data")
        manager.start(resume=False)  # what `soak start --foreground` does first
        manager.shutdown()

        def there(run: str) -> bool:
            found = engine.containers.list(
                all=True, filters={"label": f"soak.run={run}"}, ignore_removed=True
            )
            return bool(found)

        assert there(f"t-noowner-{tag}") and there(f"t-lives-{tag}")
        assert not there(f"t-gone-{tag}") and not there(f"t-recycled-{tag}")
        left = [ln for ln in manager.leftovers if tag in ln]
        assert sorted(left) == [
            f"left container soak-t-lives-{tag} (run t-lives-{tag}): its owner lives "
            f"(pid {other.pid})",
            f"left container soak-t-noowner-{tag} (run t-noowner-{tag}): no owner label",
        ], manager.leftovers
    finally:
        other.kill()
        other.wait()
        for container in made.values():
            with contextlib.suppress(docker.errors.NotFound):
                container.remove(force=True)


def test_a_token_by_reference_is_in_no_api_answer(tmp_path: Path, monkeypatch: Any) -> None:
    """The service reads `{env.NAME}` from its own environment; its answers (status,
    events, reports) and the data directory hold the reference only."""
    binary = refdns_binary()
    token = f"tok-{uuid.uuid4().hex}"
    monkeypatch.setenv("SOAK_TEST_API_TOKEN", token)
    auth = {"Authorization": "Bearer {env.SOAK_TEST_API_TOKEN}"}
    scenario = {
        "name": "secret",
        "target": {
            "runtime": "process", "name": "refdns",
            "argv": [str(binary), "-dns=127.0.0.1:{port.dns}", "-api=127.0.0.1:{port.api}",
                     "-data=" + str(tmp_path / "server-data")],
            "env": {"REFDNS_TOKEN": "{env.SOAK_TEST_API_TOKEN}"},
            "ports": {"dns": {"protocol": "both"}, "api": {}},
            "ready": {"probes": [{"kind": "http", "port": "api", "path": "/stats/summary",
                                  "headers": auth}]},
        },
        "phases": [{"name": "steady", "duration_s": 3}],
        "criteria": {"leaks_ok": False},  # 3 s give no leak window: not judged, no pass
        "samplers": {"interval_s": 1, "http": [
            {"endpoint": "GET /stats/summary", "path": "/stats/summary", "port": "api",
             "headers": auth}]},
    }  # fmt: skip
    data = tmp_path / "data"
    with api_client(data) as client:
        r = client.post("/runs", json=scenario, headers=AUTH)
        assert r.status_code == 201, r.text
        run_id = r.json()["id"]
        final = wait_status(client, run_id, ended, 60)
        answers = [r.text, client.get(f"/runs/{run_id}", headers=AUTH).text]
        answers += [client.get("/runs", headers=AUTH).text]
        for fmt in ("json", "md", "html"):
            answers.append(client.get(f"/runs/{run_id}/report?format={fmt}", headers=AUTH).text)
    assert final["status"] == "passed", final["message"]
    store = SqliteStore(data / "points.db")  # the token worked: answered 200
    try:
        calls = store.series(run_id, "api", "status", {"endpoint": "GET /stats/summary"})
    finally:
        store.close()
    assert calls and {v for _, v in calls[0][1]} == {200}, calls
    assert not [a for a in answers if token in a]
    assert [
        str(p) for p in data.rglob("*") if p.is_file() and token.encode() in p.read_bytes()
    ] == []
