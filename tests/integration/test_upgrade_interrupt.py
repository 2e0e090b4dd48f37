"""Cancelling `soak upgrade` as a CI system does: a real SIGINT or SIGTERM at each step.

After each, nothing the run made is left (`docker ps -a`, `docker volume ls` by the
run's label and name, the work directory, the server processes), the exit code is
128 + the signal, and the JUnit and JSON hold every planned case with the
interruption as its own error case. A run killed outright (SIGKILL) leaves its
containers, volume and directory; the next `soak upgrade` removes them.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker.errors
import pytest
import yaml

from tests.support.procs import cmdlines
from tests.support.skips import docker_skip_reason

# soak-test/unbound:1.26 is a versioned image: built by `make test-upgrades`, run there.
pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.upgrades]

REPO = Path(__file__).resolve().parents[2]
IMAGE = "soak-test/unbound:1.26"
MOUNT = "/var/lib/soak-unbound"
RUN_TIMEOUT_S = 180

# The step (a line the run prints as it starts or ends) at which the signal is sent,
# and the phase the run is then in.
STEPS = {
    "old start": "old       starting",  # the container being created and started
    "populate": "old       ready",  # a populate command (sleep) in the old container
    "migrate": "old       stopped",  # the one-shot migration container running
    "new start": "new       starting",
    "checks": "new       ready",  # a check command (sleep) in the new container
    "rollback start": "rollback  starting",
}


# Steps whose work is a `sleep` in a container: the container's name ends so.
SLEEPING = {"populate": "-old-unbound", "migrate": "-migrate", "checks": "-new-unbound"}


def sleeping(engine: Any, run_id: str, suffix: str) -> bool:
    """A `sleep` runs in the run's container whose name ends with `suffix`."""
    for container in engine.containers.list(
        filters={"label": f"soak.upgrade={run_id}"}, ignore_removed=True
    ):
        if (container.name or "").endswith(suffix):
            with contextlib.suppress(docker.errors.APIError):  # it may be just going
                processes = container.top().get("Processes") or []
                return any("sleep" in " ".join(map(str, row)) for row in processes)
    return False


def wait_until(predicate: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline_s = time.monotonic() + timeout_s
    while not predicate():
        assert time.monotonic() < deadline_s, "the step never began"
        time.sleep(0.05)


# How long a step's `sleep` lasts where the signal is to come during it: long enough to be
# seen running (`sleeping`) and interrupted.
STEP_SLEEP_S = 4


def docker_plan(tmp_path: Path, slow: tuple[str, ...] = tuple(SLEEPING)) -> Path:
    """The shipped unbound plan's server, with the `slow` steps' sleeps long enough to be
    interrupted in; the other steps sleep 0 s (they only lead to the step under test)."""
    shipped = yaml.safe_load((REPO / "scenarios" / "unbound-to-1.26.yaml").read_text())
    server = {**shipped["old"], "image": IMAGE, "version": "1.26"}

    def sleep_s(step: str) -> str:
        return str(STEP_SLEEP_S if step in slow else 0)

    plan = {
        "name": "interrupt-me",
        "old": server,
        "new": server,
        "populate": [{"kind": "command", "argv": ["sleep", sleep_s("populate")]}],
        "migrate": {
            "container": {
                "image": IMAGE,
                "entrypoint": ["sleep"],
                "command": [sleep_s("migrate")],
                "mount": MOUNT,
            }
        },
        "checks": [
            {"name": "slow", "kind": "command", "argv": ["sleep", sleep_s("checks")]},
            {
                "name": "www A",
                "kind": "dig",
                "qname": "www.example.test",
                "answers": ["192.0.2.10"],
            },
        ],
        "rollback": {"checks": [{"name": "answers", "kind": "dig", "qname": "www.example.test"}]},
    }
    path = tmp_path / "plan.yaml"
    path.write_text(yaml.safe_dump(plan, sort_keys=False))
    return path


# new: probe case + 2 checks; rollback: probe case + 1 check
PLANNED = 5
WWW = "192.0.2.10"


@pytest.fixture(scope="module")
def engine() -> Iterator[Any]:
    if (reason := docker_skip_reason([IMAGE], "scripts/build-test-images.sh upgrades")) is not None:
        pytest.skip(reason)
    import docker

    client = docker.from_env(timeout=30)
    yield client
    client.close()


def start(plan: Path, work: Path, out: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "soak.cli", "upgrade", str(plan), "--work-dir", str(work),
         "--junit", str(out / "junit.xml"), "--json", str(out / "result.json"), *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip


def wait_for_line(proc: subprocess.Popen[str], prefix: str) -> tuple[str, list[str]]:
    """Reads the run's output until a line starts with `prefix`; (run id, lines)."""
    assert proc.stdout is not None
    lines: list[str] = []
    for line in proc.stdout:
        lines.append(line.rstrip("\n"))
        if line.startswith(prefix):
            return run_id_of(lines), lines
    raise AssertionError(f"the run ended before {prefix!r}: {lines}")


def run_id_of(lines: list[str]) -> str:
    """From the header `soak upgrade NAME (run RUN_ID)`; a line of the leftovers sweep
    (what an earlier, killed run left) may come before it."""
    header = next(line for line in lines if line.startswith("soak upgrade "))
    return header.rsplit("(run ", 1)[1].rstrip(")")


def leftovers(engine: Any, run_id: str) -> tuple[list[str], list[str]]:
    """Containers (all states) and volumes of the run, by label and by name."""
    containers = [
        c.name
        for c in engine.containers.list(all=True, ignore_removed=True)
        if run_id in (c.name or "") or c.labels.get("soak.upgrade") == run_id
    ]
    volumes = [
        v.name
        for v in engine.volumes.list()
        if run_id in (v.name or "") or (v.attrs.get("Labels") or {}).get("soak.upgrade") == run_id
    ]
    return containers, volumes


def processes_mentioning(text: str) -> list[int]:
    return [pid for pid, raw in cmdlines() if text in raw.decode(errors="replace")]


def junit_cases(path: Path) -> dict[str, ET.Element]:
    return {c.get("name", ""): c for c in ET.parse(path).getroot().iter("testcase")}


# SIGINT and SIGTERM take the one path (SignalTrap.handler, then the same clean-up); each
# step is interrupted once, by each signal in turn, so both are seen at a container's
# start and during a step's own work.
SIGNAL_AT = {step: (signal.SIGINT, signal.SIGTERM)[i % 2] for i, step in enumerate(STEPS)}


@pytest.mark.parametrize(
    ("step", "sig"),
    [pytest.param(step, sig, id=f"{step}-{sig.name}") for step, sig in SIGNAL_AT.items()],
)
def test_a_signal_at_each_step_removes_everything_and_reports(
    engine: Any, tmp_path: Path, work: Path, step: str, sig: signal.Signals
) -> None:
    proc = start(docker_plan(tmp_path, slow=(step,)), work, tmp_path)
    run_id, lines = wait_for_line(proc, STEPS[step])
    if step in SLEEPING:  # the step's own work under way, not the moment before it
        wait_until(lambda: sleeping(engine, run_id, SLEEPING[step]))
    proc.send_signal(sig)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    output = "\n".join(lines) + stdout + stderr
    assert proc.returncode == 128 + sig, output
    assert f"interrupted by {sig.name}" in stderr
    assert "Aborted" not in output and "internal error" not in output
    # nothing of the run is left: containers, volume, run directory, processes
    assert leftovers(engine, run_id) == ([], []), output
    assert list(work.iterdir()) == [], output
    assert processes_mentioning(str(work)) == []
    # the reports so far: every planned case, the interruption its own error case
    cases = junit_cases(tmp_path / "junit.xml")
    error = cases["interrupted"].find("error")
    assert error is not None
    assert (error.get("message") or "").startswith(f"{sig.name} during {step}:"), output
    assert len(cases) == PLANNED + 1
    data = json.loads((tmp_path / "result.json").read_text())
    assert (data["interrupted"], data["exit_code"]) == (sig.name, 128 + sig)
    assert data["runs"][0]["total"] == PLANNED + 1


def test_a_killed_run_is_cleaned_up_by_the_next_one(
    engine: Any, tmp_path: Path, work: Path
) -> None:
    plan = docker_plan(tmp_path, slow=("populate",))
    proc = start(plan, work, tmp_path)
    run_id, _ = wait_for_line(proc, STEPS["populate"])
    proc.kill()  # SIGKILL: no clean-up of its own
    proc.wait(timeout=30)
    containers, volumes = leftovers(engine, run_id)
    assert containers and volumes  # what it left: the old container and the volume
    assert len(list(work.iterdir())) == 1  # and its run directory
    # The next run removes them (its own run then ends normally).
    again = subprocess.run(
        [sys.executable, "-m", "soak.cli", "upgrade", str(plan), "--work-dir", str(work),
         "--set", "populate=[]", "--set", "migrate=null"],
        capture_output=True, text=True, cwd=REPO, timeout=RUN_TIMEOUT_S,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")},
    )  # fmt: skip
    assert again.returncode == 0, again.stdout + again.stderr
    assert leftovers(engine, run_id) == ([], [])
    # Any soak command that starts a run sweeps: under `pytest -n` another test's may have
    # removed the containers first, and then this one says nothing of them.
    said = [ln for ln in again.stdout.splitlines() if "removed what dead runs left" in ln]
    assert not said or "container" in said[0], said
    assert list(work.iterdir()) == []


def session_members(sid: int) -> list[int]:
    """Processes of session `sid` (soak started in its own: every process it made)."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = stat.read_text().rsplit(")", 1)[1].split()
            if int(fields[3]) == sid and fields[0] != "Z":
                pids.append(int(stat.parent.name))
    return pids


def test_ctrl_c_to_the_whole_group_during_the_swap_load(
    engine: Any, tmp_path: Path, work: Path
) -> None:
    """A terminal's Ctrl-C reaches every process of the group, the load's workers too:
    exit 130, no worker, container, volume or directory left, no traceback."""
    plan = docker_plan(tmp_path)
    load = "load={rate_qps: 200, mix: [{name: www, queries: [www.example.test A]}]}"
    proc = subprocess.Popen(
        [sys.executable, "-m", "soak.cli", "upgrade", str(plan), "--work-dir", str(work),
         "--set", load, "--junit", str(tmp_path / "junit.xml")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO / "src")}, start_new_session=True,
    )  # fmt: skip
    run_id, lines = wait_for_line(proc, "load      started")
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    output = "\n".join(lines) + stdout + stderr
    assert proc.returncode == 130, output
    assert "Traceback" not in stderr and "internal error" not in stderr, stderr
    wait_until(lambda: session_members(proc.pid) == [], timeout_s=10)
    assert leftovers(engine, run_id) == ([], [])
    assert list(work.iterdir()) == []
    assert junit_cases(tmp_path / "junit.xml")["interrupted"].find("error") is not None


def test_sigterm_with_keep_keeps_the_directory_and_volume_not_the_containers(
    engine: Any, tmp_path: Path, work: Path
) -> None:
    proc = start(docker_plan(tmp_path), work, tmp_path, "--keep")
    run_id, _ = wait_for_line(proc, STEPS["populate"])
    wait_until(lambda: sleeping(engine, run_id, SLEEPING["populate"]))
    proc.send_signal(signal.SIGTERM)
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    try:
        assert proc.returncode == 143, stdout + stderr
        containers, volumes = leftovers(engine, run_id)
        assert containers == [] and volumes == [f"soak-upgrade-{run_id}"]
        kept = list(work.iterdir())
        assert len(kept) == 1 and (kept[0] / "old" / "unbound.conf").is_file()
    finally:
        engine.volumes.get(f"soak-upgrade-{run_id}").remove(force=True)


def test_a_failed_migration_container_quotes_its_stderr(
    engine: Any, tmp_path: Path, work: Path
) -> None:
    script = "echo converting; echo 'boom: schema v9 unknown' >&2; echo converting more; exit 3"
    migrate = (
        f"migrate={{container: {{image: {IMAGE}, entrypoint: [sh, -c], "
        f'command: ["{script}"], mount: {MOUNT}}}}}'
    )
    proc = start(docker_plan(tmp_path), work, tmp_path, "--set", migrate, "--set", "populate=[]")
    stdout, stderr = proc.communicate(timeout=RUN_TIMEOUT_S)
    assert proc.returncode == 1, stdout + stderr
    failure = junit_cases(tmp_path / "junit.xml")["migrate"].find("failure")
    assert failure is not None
    assert failure.get("message", "").endswith("exited with 3: boom: schema v9 unknown")
    assert "stderr: boom: schema v9 unknown\nstdout: converting" in (failure.text or "")
    # the run directory went; the failed run's logs stay beside it (the case has them too)
    (logs,) = work.iterdir()
    assert logs.name.startswith("soak-upgrade-logs-")
    assert "boom: schema v9 unknown" in (logs / "migrate.log").read_text()
