"""The pdns-server schema upgrade plan against the real pdns_server, with and without
the migration step."""

from __future__ import annotations

import hashlib
import sqlite3
from pathlib import Path

import pytest

from soak.upgrade.result import UpgradeResult
from tests.support.procs import cmdlines
from tests.support.upgrades import PDNS_PLAN, pdns_skip_reason, run_plan

pytestmark = pytest.mark.integration

if (_SKIP := pdns_skip_reason()) is not None:
    pytest.skip(_SKIP, allow_module_level=True)


def processes_mentioning(text: str) -> list[int]:
    """PIDs whose command line mentions `text` (the run directory): what was left running."""
    return [pid for pid, raw in cmdlines() if text in raw.decode(errors="replace")]


def run(
    archive: Path, work: Path, *overrides: str, keep: bool = False
) -> tuple[UpgradeResult, list[str]]:
    return run_plan(PDNS_PLAN, [f"data.archive={archive}", *overrides], work, keep=keep)


def by_name(result: UpgradeResult) -> dict[str, tuple[str, str]]:
    return {c.name: (c.status, c.message) for c in result.checks}


def test_with_the_migration_every_check_passes(archive: Path, tmp_path: Path) -> None:
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    result, lines = run(archive, tmp_path)
    failed = [(c.name, c.message) for c in result.checks if c.status != "pass"]
    assert failed == []
    assert len(result.checks) == 18 and result.exit_code == 0
    assert result.new_ready_s is not None and result.new_ready_s < 10
    # the archive is only read; nothing of the run is left
    assert hashlib.sha256(archive.read_bytes()).hexdigest() == digest
    assert not (tmp_path / "run").exists()
    assert processes_mentioning(str(tmp_path / "run")) == []
    # the old key came from the archive and is never shown
    assert any("saved api_key" in line for line in lines)
    assert not any("soak-old-api-key" in line for line in lines)


def test_without_the_migration_api_writes_fail_with_500(archive: Path, tmp_path: Path) -> None:
    result, _ = run(archive, tmp_path, "migrate=null", "new.version=4.7 unmigrated")
    checks = by_name(result)
    assert checks["one zone GET"][0] == "fail"
    assert "got status 500" in checks["one zone GET"][1]
    assert checks["new zone POSTed"] == (
        "fail",
        "expected status 201; got status 500: Internal Server Error",
    )
    assert checks["records unchanged (API)"] == ("skip", "needs 'one zone GET' (fail)")
    assert checks["record PATCHed"][0] == "skip"
    assert checks["PATCHed record resolves"][0] == "skip"
    assert checks["no error lines in the log"][0] == "fail"
    assert "no such column: options" in checks["no error lines in the log"][1]
    # what the old schema still does, it does after the "upgrade" too
    for name in ("zone list unchanged (API)", "www A unchanged (dig)", "old API key accepted"):
        assert checks[name][0] == "pass", checks[name]
    assert (result.count("pass"), result.count("fail"), result.count("skip")) == (12, 3, 3)
    assert result.exit_code == 1


def test_keep_leaves_the_migrated_data(archive: Path, tmp_path: Path) -> None:
    result, lines = run(archive, tmp_path, keep=True)
    assert result.exit_code == 0
    db = tmp_path / "run" / "data" / "pdns.sqlite3"
    with sqlite3.connect(db) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(domains)")]
        zones = {row[0] for row in conn.execute("SELECT name FROM domains")}
    assert "options" in columns and "catalog" in columns
    assert zones == {"example.test", "second.test", "upgraded.test"}
    assert (tmp_path / "run" / "migrate.log").exists()
    assert (tmp_path / "run" / "new").is_dir()
    assert any(line.startswith("cleanup kept") for line in lines)
    assert processes_mentioning(str(tmp_path / "run")) == []


def test_a_failing_populate_step_stops_the_run_as_a_plan_that_cannot_run(
    archive: Path, tmp_path: Path
) -> None:
    result, _ = run(archive, tmp_path, "populate.1.status=418")
    first = result.checks[0]
    # the setup broke, not the upgrade: an error case, exit 2
    assert (first.name, first.status) == ("populate 2/5", "error")
    assert "expected status 418; got 200" in first.got
    assert all(c.status == "skip" for c in result.checks[1:])
    assert len(result.checks) == 19 and result.exit_code == 2
    assert not (tmp_path / "run").exists()
    assert processes_mentioning(str(tmp_path / "run")) == []
