"""The pdns-server schema upgrade in docker: the local image on a fresh named volume."""

from __future__ import annotations

import secrets
from pathlib import Path

import pytest

from soak.upgrade.result import UpgradeResult
from tests.support.skips import docker_skip_reason
from tests.support.upgrades import SCENARIOS, docker_leftovers, run_plan

pytestmark = [pytest.mark.integration, pytest.mark.docker]

PLAN = SCENARIOS / "pdns-auth-upgrade-docker.yaml"
IMAGE = "soak-test/pdns-auth:latest"

if (_SKIP := docker_skip_reason([IMAGE], "make docker-ready builds it")) is not None:
    pytest.skip(_SKIP, allow_module_level=True)


def run(archive: Path, work: Path, run_id: str, *overrides: str) -> UpgradeResult:
    return run_plan(PLAN, [f"data.archive={archive}", *overrides], work, run_id=run_id)[0]


def test_docker_plan_passes_and_leaves_nothing(archive: Path, work: Path) -> None:
    run_id = f"t{secrets.token_hex(3)}"
    result = run(archive, work, run_id)
    failed = [(c.name, c.message) for c in result.checks if c.status != "pass"]
    assert failed == []
    assert len(result.checks) == 19 and result.exit_code == 0  # 18 checks, the probe's answer
    steps = [f"{s.phase} {s.text}" for s in result.steps]
    assert any(s.startswith("migrate container soak-test/pdns-auth") for s in steps)
    assert docker_leftovers(run_id) == ([], [])
    assert not (work / "run").exists()


def test_a_root_owned_volume_stops_the_old_version(archive: Path, work: Path) -> None:
    """The seed's bug: a server that runs as its own user on root-owned data."""
    run_id = f"t{secrets.token_hex(3)}"
    result = run(archive, work, run_id, "data.owner=null")
    assert result.exit_code == 2
    assert result.start_error is not None
    assert "old version" in result.start_error
    assert "attempt to write a readonly database" in result.start_error
    assert docker_leftovers(run_id) == ([], [])
