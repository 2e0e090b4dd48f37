"""Upgrade plans in tests: the shipped pdns-server plan, one in-process run of a plan,
and what a docker run left behind."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from soak.plans.upgrade import UpgradeRun
from soak.runs.runid import new_run_id
from soak.upgrade.config import load_plan
from soak.upgrade.result import UpgradeResult
from tests.support.skips import not_installed

REPO = Path(__file__).resolve().parents[2]
SCENARIOS = REPO / "scenarios"
PDNS_PLAN = SCENARIOS / "pdns-auth-upgrade.yaml"
PDNS_MIGRATION = Path("/usr/share/pdns-backend-sqlite3/schema/4.3.1_to_4.7.0_schema.sqlite3.sql")


def pdns_skip_reason() -> str | None:
    """Why the pdns-server plan cannot run here (pdns_server and its gsqlite3 migrations)."""
    what = "pdns-server with the gsqlite3 backend"
    return not_installed(what, ["pdns_server"], [PDNS_MIGRATION])


def run_plan(
    path: Path,
    overrides: Sequence[str],
    work: Path,
    *,
    run_id: str | None = None,
    keep: bool = False,
    matrix_entry: str | None = None,
) -> tuple[UpgradeResult, list[str]]:
    """The plan with `--set` overrides, run in `work/run`; the result and the steps shown.

    The run's id is new (as a command's is): a stop finds a target's processes by their run
    id and target name, so two runs under one id would stop each other's."""
    plan = load_plan(path, list(overrides), matrix_entry=matrix_entry)
    lines: list[str] = []
    runner = UpgradeRun(
        plan,
        run_dir=work / "run",
        run_id=run_id or new_run_id("t"),
        keep=keep,
        env={},
        show=lambda phase, text: lines.append(f"{phase} {text}"),
    )
    return runner.run(), lines


def docker_leftovers(run_id: str) -> tuple[list[str], list[str]]:
    """Containers and volumes of the run (by name or label) still present."""
    import docker

    client = docker.from_env(timeout=30)
    try:
        containers = [
            c.name
            for c in client.containers.list(all=True, ignore_removed=True)
            if run_id in (c.name or "") or run_id in str(c.labels.get("soak.run", ""))
        ]
        volumes = [v.name for v in client.volumes.list() if run_id in (v.name or "")]
    finally:
        client.close()
    return containers, volumes
