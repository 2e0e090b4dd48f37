"""The pdns-server schema upgrade in docker: the local image on a fresh named volume."""

from __future__ import annotations

import secrets
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.upgrade.config import load_plan
from soak.upgrade.runner import UpgradeResult, UpgradeRunner

pytestmark = [pytest.mark.integration, pytest.mark.docker]

REPO = Path(__file__).resolve().parents[2]
PLAN = REPO / "scenarios" / "pdns-auth-upgrade-docker.yaml"
IMAGE = "soak-test/pdns-auth:latest"


def _engine_and_image() -> str | None:
    """Why the docker tests cannot run here, or None when they can."""
    try:
        import docker

        client = docker.from_env(timeout=10)
        client.ping()
    except Exception as exc:  # no engine, no socket, no permission: all mean "skip"
        return f"no Docker engine: {exc}"
    try:
        client.images.get(IMAGE)
    except docker.errors.ImageNotFound:
        return f"image {IMAGE} is absent (make docker-ready builds it)"
    return None


_SKIP = _engine_and_image()
if _SKIP is not None:
    pytest.skip(_SKIP, allow_module_level=True)


@pytest.fixture
def work() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="sud-"))
    yield path
    subprocess.run(["rm", "-rf", str(path)], check=False)


def run(archive: Path, work: Path, run_id: str, *overrides: str) -> UpgradeResult:
    plan = load_plan(PLAN, [f"data.archive={archive}", *overrides])
    runner = UpgradeRunner(plan, run_dir=work / "run", run_id=run_id, env={})
    return runner.run()


def leftovers(run_id: str) -> tuple[list[str], list[str]]:
    """Containers and volumes of the run (by name or label) still present."""
    import docker

    client = docker.from_env(timeout=30)
    containers = [
        c.name
        for c in client.containers.list(all=True)
        if run_id in (c.name or "") or run_id in str(c.labels.get("soak.run", ""))
    ]
    volumes = [v.name for v in client.volumes.list() if run_id in (v.name or "")]
    return containers, volumes


def test_docker_plan_passes_and_leaves_nothing(archive: Path, work: Path) -> None:
    run_id = f"t{secrets.token_hex(3)}"
    result = run(archive, work, run_id)
    failed = [(c.name, c.message) for c in result.checks if c.status != "pass"]
    assert failed == []
    assert len(result.checks) == 18 and result.exit_code == 0
    steps = [f"{s.phase} {s.text}" for s in result.steps]
    assert any(s.startswith("migrate container soak-test/pdns-auth") for s in steps)
    assert leftovers(run_id) == ([], [])
    assert not (work / "run").exists()


def test_a_root_owned_volume_stops_the_old_version(archive: Path, work: Path) -> None:
    """The seed's bug: a server that runs as its own user on root-owned data."""
    run_id = f"t{secrets.token_hex(3)}"
    result = run(archive, work, run_id, "data.owner=null")
    assert result.exit_code == 2
    assert result.start_error is not None
    assert "old version" in result.start_error
    assert "attempt to write a readonly database" in result.start_error
    assert leftovers(run_id) == ([], [])
