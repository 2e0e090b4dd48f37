"""Real upgrades: one packaged version's data (and configuration) under the next.

The images (soak-test/pdns-auth:4.4, :4.7, :4.9: Debian bullseye, bookworm, trixie;
soak-test/pdns-recursor:4.8, :5.2; soak-test/unbound:1.13, :1.26;
soak-test/knot-resolver:5.3, :5.7) come from `scripts/build-test-images.sh upgrades`;
`make test-upgrades` builds them and runs these tests. Without them the tests are skipped.
"""

from __future__ import annotations

import json
import secrets
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from soak.upgrade.result import UpgradeResult
from tests.support.skips import docker_skip_reason
from tests.support.upgrades import SCENARIOS, docker_leftovers, run_plan

pytestmark = [pytest.mark.integration, pytest.mark.docker, pytest.mark.upgrades]

IMAGES = (
    "soak-test/pdns-auth:4.4",
    "soak-test/pdns-auth:4.7",
    "soak-test/pdns-auth:4.9",
    "soak-test/pdns-recursor:4.8",
    "soak-test/pdns-recursor:5.2",
    "soak-test/unbound:1.13",
    "soak-test/unbound:1.26",
    "soak-test/knot-resolver:5.3",
    "soak-test/knot-resolver:5.7",
)


@pytest.fixture(autouse=True, scope="module")
def _images() -> None:
    """The versioned images, asked only when a test of this module runs (not when
    `make test` deselects it: `make test-upgrades` builds them first)."""
    if (reason := docker_skip_reason(IMAGES, "make test-upgrades builds it")) is not None:
        pytest.skip(reason)


def run(
    plan_name: str, work: Path, *overrides: str, old: str | None = None
) -> tuple[UpgradeResult, str]:
    run_id = f"t{secrets.token_hex(3)}"
    result, _ = run_plan(SCENARIOS / plan_name, overrides, work, run_id=run_id, matrix_entry=old)
    return result, run_id


def not_passed(result: UpgradeResult) -> dict[str, str]:
    return {c.name: c.message for c in result.checks if c.status != "pass"}


def test_4_4_to_4_7_with_the_shipped_migration_passes(work: Path) -> None:
    result, run_id = run("pdns-auth-4.4-to-4.7.yaml", work)
    assert not_passed(result) == {}
    assert result.exit_code == 0 and len(result.checks) == 25
    # Going back: 4.4.1 on the data 4.7.3 wrote serves it, the new zone included.
    rollback = [c.name for c in result.checks if c.name.startswith("rollback: ")]
    assert "rollback: record the new version PATCHed resolves" in rollback
    assert "rollback: a zone POSTed after going back" in rollback
    assert result.rollback_ready_s is not None
    # Under 500 q/s through the swap: what the load saw is reported.
    assert result.swap is not None and result.swap.completed > 0
    assert result.swap.longest_gap_s > 0
    steps = [f"{s.phase} {s.text}" for s in result.steps]
    assert "old starting pdns-auth 4.4.1" in steps
    assert "new starting pdns-auth 4.7.3" in steps
    assert "rollback starting pdns-auth 4.4.1" in steps
    assert any(s.startswith("migrate container soak-test/pdns-auth:4.7") for s in steps)
    assert docker_leftovers(run_id) == ([], [])


def test_4_4_to_4_7_without_the_migration_fails_with_http_500(work: Path) -> None:
    result, run_id = run("pdns-auth-4.4-to-4.7.yaml", work, "migrate=null")
    failed = {c.name: c.message for c in result.checks if c.status == "fail"}
    assert result.exit_code == 1
    assert set(failed) == {
        "one zone GET",
        "new zone POSTed",
        "no error lines in the log",
        # 4.4 on its own unmigrated data is fine, but the new version made no zone.
        "rollback: zone list readable, with the zone the new version made",
        "rollback: record the new version PATCHed resolves",
    }
    assert "got status 500" in failed["one zone GET"]
    assert "got status 500" in failed["new zone POSTed"]
    assert "no such column: options" in failed["no error lines in the log"]
    # What the old schema still serves: DNS and the zone list.
    passed = {c.name for c in result.checks if c.status == "pass"}
    assert {"www A unchanged (dig)", "zone list unchanged (API)"} <= passed
    assert docker_leftovers(run_id) == ([], [])


def test_the_matrix_to_4_9_gives_one_junit_testsuite_per_pair(work: Path) -> None:
    """`soak upgrade PLAN --old 4.4 --old 4.7`: 4.4.1 -> 4.9 with the migration, 4.7.3 ->
    4.9 without one (trixie ships none after 4.7)."""
    junit, report = work / "junit.xml", work / "report.json"
    proc = subprocess.run(
        [sys.executable, "-m", "soak.cli", "upgrade", str(SCENARIOS / "pdns-auth-to-4.9.yaml"),
         "--old", "4.4", "--old", "4.7", "--junit", str(junit), "--json", str(report),
         "--work-dir", str(work)],
        capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr
    suites = [
        (s.get("name"), s.get("tests"), s.get("failures"), s.get("skipped"))
        for s in ET.parse(junit).getroot().iter("testsuite")
    ]
    assert suites == [
        ("pdns-auth-to-4.9[old 4.4]", "18", "0", "0"),
        ("pdns-auth-to-4.9[old 4.7]", "18", "0", "0"),
    ]
    runs = json.loads(report.read_text())["runs"]
    steps = [[f"{s['phase']} {s['text']}" for s in run["steps"]] for run in runs]
    assert "old starting pdns-auth 4.4.1" in steps[0] and "new starting pdns-auth 4.9" in steps[0]
    assert any(s.startswith("migrate container soak-test/pdns-auth:4.9") for s in steps[0])
    assert "old starting pdns-auth 4.7.3" in steps[1]
    assert not any(s.startswith("migrate ") for s in steps[1])
    for run in runs:
        assert docker_leftovers(run["run_id"]) == ([], [])


def test_recursor_4_8_to_5_2_with_the_config_converted_to_yaml(work: Path) -> None:
    result, run_id = run("pdns-recursor-4.8-to-5.2.yaml", work)
    assert not_passed(result) == {}
    assert result.exit_code == 0 and len(result.checks) == 15  # 14 checks, the probe's answer
    steps = [f"{s.phase} {s.text}" for s in result.steps]
    assert any(s.startswith("migrate container soak-test/pdns-recursor:5.2") for s in steps)
    assert docker_leftovers(run_id) == ([], [])


def test_recursor_5_2_refuses_the_old_style_config_without_the_conversion(work: Path) -> None:
    result, run_id = run("pdns-recursor-4.8-to-5.2.yaml", work, "migrate=null")
    # The new version refusing the old data is the upgrade failing: a failed check.
    assert result.exit_code == 1 and result.start_error is None
    cause = result.checks[0]
    assert (cause.name, cause.status) == ("new version starts", "fail")
    assert cause.got.startswith("new version (pdns-recursor 5.2) cannot start")
    # its log lines once, in the case's body, not in the one-line message
    assert "Old-style settings syntax not enabled by default anymore" in cause.output
    assert "Old-style" not in cause.message
    assert docker_leftovers(run_id) == ([], [])


def test_unbound_1_13_to_1_26_accepts_the_config_and_answers_the_same(work: Path) -> None:
    result, run_id = run("unbound-to-1.26.yaml", work, old="1.13")
    assert not_passed(result) == {}
    assert result.plan == "unbound-to-1.26[old 1.13]" and len(result.checks) == 8
    # which servers ran, as they say themselves (the plan's server_version: unbound -V)
    reported = {side: ident.reported or "" for side, ident in result.versions.items()}
    assert reported["old"].startswith("1.13.") and reported["new"].startswith("1.26."), reported
    assert all(ident.image_id for ident in result.versions.values())
    by_name = {c.name: c for c in result.checks}
    assert by_name["the configuration accepted by the new unbound-checkconf"].got == "exit 0"
    assert by_name["statistics through unbound-control"].got.startswith(
        "exit 0: total.num.queries="
    )
    assert docker_leftovers(run_id) == ([], [])


def test_knot_resolver_5_3_to_5_7_on_the_old_cache_directory(work: Path) -> None:
    result, run_id = run("knot-resolver-to-5.7.yaml", work, old="5.3")
    assert not_passed(result) == {}
    assert result.plan == "knot-resolver-to-5.7[old 5.3]" and len(result.checks) == 9
    stats = next(c for c in result.checks if c.name == "statistics on the control socket")
    assert stats.got.startswith("exit 0: ")
    assert docker_leftovers(run_id) == ([], [])
