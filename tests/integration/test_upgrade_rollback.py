"""Rollback with the real pdns_server (process plan): the old version started again on
the data the new one wrote, its own checks named `rollback: ...`; a down-migration that
fails is reported as the rollback refused, and the new version's results stand."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from soak.upgrade.report import junit_xml, to_json
from soak.upgrade.result import UpgradeResult
from tests.support.skips import not_installed
from tests.support.upgrades import PDNS_PLAN, run_plan

pytestmark = pytest.mark.integration

if (_SKIP := not_installed("pdns-server and sqlite3", ["pdns_server", "sqlite3"])) is not None:
    pytest.skip(_SKIP, allow_module_level=True)

ROLLBACK_CHECKS = [
    {"name": "ready", "kind": "ready_within", "within_s": 10},
    {"name": "www A as before", "kind": "unchanged", "snapshot": "www-a"},
    {
        "name": "zone made by new",
        "kind": "dig",
        "qname": "www.upgraded.test",
        "answers": ["192.0.2.77"],
        "needs": "ready",
    },
]


def run(archive: Path, work: Path, rollback: dict[str, object]) -> UpgradeResult:
    overrides = [f"data.archive={archive}", f"rollback={json.dumps(rollback)}"]
    return run_plan(PDNS_PLAN, overrides, work)[0]


def test_rollback_checks_run_on_the_data_the_new_version_wrote(
    archive: Path, tmp_path: Path
) -> None:
    result = run(archive, tmp_path, {"checks": ROLLBACK_CHECKS})
    names = [c.name for c in result.checks]
    assert names[-4:] == [
        "rollback: ready",
        "rollback: www A as before",
        "rollback: zone made by new",
        "rollback: answers as its ready probe expects: dns example.test/SOA on port dns -> NOERROR",
    ]
    assert [c.status for c in result.checks] == ["pass"] * len(names), result.checks
    assert result.exit_code == 0
    assert result.rollback_ready_s is not None and result.rollback_ready_s > 0
    rollback_steps = [s.text for s in result.steps if s.phase == "rollback"]
    assert rollback_steps[0] == "starting pdns-auth 4.7 on the 4.3.1 schema"
    assert rollback_steps[-1].startswith("stopped")
    props = {p.get("name") for p in ET.fromstring(junit_xml(result)).iter("property")}
    assert "rollback_ready_s" in props
    assert to_json(result)["rollback_ready_s"] == round(result.rollback_ready_s, 3)


def test_a_refused_rollback_is_a_failed_check_and_the_upgrade_results_stand(
    archive: Path, tmp_path: Path
) -> None:
    down = {"command": ["sh", "-c", "echo 'no way back from this schema' >&2; exit 3"]}
    result = run(archive, tmp_path, {"migrate": down, "checks": ROLLBACK_CHECKS})
    by_name = {c.name: c for c in result.checks}
    assert result.exit_code == 1
    cause = by_name["rollback: migrate"]
    assert cause.status == "fail"
    assert "sh exited with 3: no way back from this schema" in cause.got
    assert {by_name[f"rollback: {c['name']}"].status for c in ROLLBACK_CHECKS} == {"skip"}
    # The upgrade's own 18 cases ran and passed.
    upgrade = [c for c in result.checks if not c.name.startswith("rollback: ")]
    assert len(upgrade) == 18 and {c.status for c in upgrade} == {"pass"}
