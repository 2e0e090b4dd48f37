"""Faults under a real run (in-process service, real target processes): the data
directory's disk filling up, a target that exits at once, one the kernel OOM-kills.
Each fault is an event of the run, the run ends, and nothing is left running."""

from __future__ import annotations

import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from soak.procfs import pid_alive
from soak.sinks.sqlite import SqliteStore
from tests.support.api import AUTH, api_client, wait_status

pytestmark = pytest.mark.integration

MEMORY_CGROUPS = Path("/sys/fs/cgroup/memory")


def submit(client: TestClient, target: dict[str, Any], duration_s: int = 600) -> str:
    scenario = {
        "name": "fault",
        "target": {"runtime": "process", **target},
        "phases": [{"name": "steady", "duration_s": duration_s}],
        "samplers": {"interval_s": 1},
    }
    r = client.post("/runs", json=scenario, headers=AUTH)
    assert r.status_code == 201, r.text
    run_id: str = r.json()["id"]
    return run_id


def ended(status: dict[str, Any]) -> bool:
    return status["status"] not in ("pending", "running")


@contextmanager
def small_tmpfs(path: Path, size: str) -> Iterator[Path]:
    path.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def test_disk_full_ends_the_run_as_error_and_stops_the_target(tmp_path: Path) -> None:
    with small_tmpfs(tmp_path / "disk", "8m") as disk, api_client(disk / "data") as client:
        run_id = submit(client, {"argv": ["sleep", "600"]})
        running = wait_status(client, run_id, lambda s: s.get("latest", {}).get("process"), 60)
        target_pid = running["target_pid"]
        # Everything that is left, taken by something else.
        subprocess.run(
            ["dd", "if=/dev/zero", f"of={disk / 'filler'}", "bs=64k"], capture_output=True
        )
        final = wait_status(client, run_id, ended, 30)
        assert final["status"] == "error"
        assert "No space left" in final["message"] or "full" in final["message"]
        errors = [e for e in final["events"] if e["kind"] == "error"]
        assert errors and "data directory cannot be written" in errors[0]["message"]
        assert not pid_alive(target_pid)
        # What was stored before the disk filled is still there, each tick once.
        store = SqliteStore(disk / "data" / "points.db")
        try:
            ((_, points),) = store.series(run_id, "process", "rss_bytes")
        finally:
            store.close()
        times = [t for t, _ in points]
        assert times and len(times) == len(set(times))


def test_a_target_that_exits_at_once_is_an_event_and_fails_the_run(tmp_path: Path) -> None:
    with api_client(tmp_path / "data") as client:
        run_id = submit(client, {"argv": ["sh", "-c", "exit 3"]})
        final = wait_status(client, run_id, ended, 30)
    assert final["status"] in ("failed", "error")
    assert "code 3" in final["message"], final["message"]
    kinds = [e["kind"] for e in final["events"]]
    assert "exited" in kinds or "error" in kinds, kinds


@contextmanager
def memory_cgroup(limit_bytes: int) -> Iterator[Path]:
    cgroup = MEMORY_CGROUPS / f"soak-test-{uuid.uuid4().hex[:8]}"
    try:
        cgroup.mkdir()
        (cgroup / "memory.limit_in_bytes").write_text(str(limit_bytes))
        memsw = cgroup / "memory.memsw.limit_in_bytes"
        if memsw.exists():
            memsw.write_text(str(limit_bytes))  # no swapping out of the limit
    except OSError as exc:
        pytest.skip(f"no cgroup v1 memory controller to limit a target with: {exc}")
    try:
        yield cgroup
    finally:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                cgroup.rmdir()
                break
            except OSError:
                time.sleep(0.2)  # its last process is still being reaped


def test_an_oom_killed_target_is_an_event_and_its_ticks_are_kept(tmp_path: Path) -> None:
    # The target joins a 64 MiB memory cgroup, runs 3 s, then allocates 10 MiB/s (slow
    # enough for 1-s ticks to see it grow) until the kernel's OOM killer ends it (SIGKILL).
    grow = (
        "import time; time.sleep(3); b = []\n"
        "while True: b.append(bytearray(1 << 20)); time.sleep(0.1)"
    )
    with memory_cgroup(64 * 1024**2) as cgroup, api_client(tmp_path / "data") as client:
        script = f'echo $$ > {cgroup}/cgroup.procs && exec {sys.executable} -c "$0"'
        run_id = submit(client, {"argv": ["sh", "-c", script, grow]})
        final = wait_status(client, run_id, ended, 60)
        oom = dict(
            line.split() for line in (cgroup / "memory.oom_control").read_text().splitlines()
        )
    assert int(oom["oom_kill"]) >= 1, oom  # the kernel ended it, not the script
    assert final["status"] == "failed"
    exited = [e for e in final["events"] if e["kind"] == "exited"]
    assert exited and "signal 9" in exited[0]["message"], final["events"]
    assert "signal 9" in final["message"]
    store = SqliteStore(tmp_path / "data" / "points.db")
    try:
        found = store.series(run_id, "process", "rss_anon_bytes")
    finally:
        store.close()
    ((_, points),) = found
    assert len(points) >= 2  # ticks while it lived, kept
    assert max(v for _, v in points) > 4 * 1024**2  # its growth was seen
    assert not pid_alive(int(final["target_pid"]))
