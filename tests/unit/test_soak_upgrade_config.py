"""A soak's `upgrade:` section: `soak validate` accepts a good one and says a bad one in
one line with its YAML path (exit 2); `--duration` scales `at:` with the phases."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.config import scenario_from_data
from soak.config.upgrade import swap_versions
from soak.runs.timeline import scaled_scenario
from soak.upgrade.insoak import swap_plans
from tests.unit.test_bad_input import base_scenario, validate_exit

CHECKS = [
    {"name": "ready", "kind": "ready_within", "within_s": "5s"},
    {"name": "token", "kind": "api", "path": "/api/zones", "headers": {"X-T": "{{token}}"}},
    {"name": "no errors", "kind": "log", "pattern": "ERROR"},
]


def with_upgrade(**swap: Any) -> dict[str, Any]:
    sc = base_scenario()
    sc["phases"] = [
        {"name": "old", "duration_s": "60s"},
        {"name": "new", "duration_s": "60s"},
    ]
    one = {"after": "old", "target": {"version": "2", "argv": ["sleep", "601"]}, "checks": CHECKS}
    sc["upgrade"] = {"vars": {"token": "t"}, "swaps": [{**one, **swap}]}
    return sc


def test_a_swap_after_a_phase_is_valid_and_counted(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = validate_exit(tmp_path, capsys, with_upgrade())
    assert code == 0 and "(2 phases, 120 s, 1 swap)" in out


def test_the_swap_is_placed_and_its_checks_read_by_the_gate_models(tmp_path: Path) -> None:
    sc = scenario_from_data(with_upgrade(), "s", tmp_path)
    (plan,) = swap_plans(sc, env={})
    assert plan.at_s == 60.0 and plan.version == "2"
    assert plan.target.changes() == {"version": "2", "argv": ["sleep", "601"]}
    assert [c.kind for c in plan.checks] == ["ready_within", "api", "log"]


def test_duration_scales_at_with_the_phases(tmp_path: Path) -> None:
    sc = scenario_from_data(with_upgrade(after=None, at="90s"), "s", tmp_path)
    assert scaled_scenario(sc, 12.0).swap_offsets_s() == [9.0]
    sc = scenario_from_data(with_upgrade(), "s", tmp_path)
    assert scaled_scenario(sc, 12.0).swap_offsets_s() == [6.0]


def test_a_rollback_is_placed_after_its_swap_and_scaled(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    back = {"at": "90s", "checks": CHECKS[:1], "migrate": {"command": ["true"]}}
    code, _, err = validate_exit(tmp_path, capsys, with_upgrade(rollback=back))
    assert code == 0, err
    sc = scenario_from_data(with_upgrade(rollback=back), "s", tmp_path)
    (plan,) = swap_plans(sc, env={})
    assert (plan.at_s, plan.rollback_at_s) == (60.0, 90.0) and plan.has_rollback
    assert [c.kind for c in plan.rollback_checks] == ["ready_within"]
    assert plan.rollback_migrate is not None
    assert scaled_scenario(sc, 12.0).move_offsets_s() == [(6.0, 9.0)]


def test_a_swap_after_a_rollback_changes_the_version_the_rollback_left(tmp_path: Path) -> None:
    """swap 1 changes the version swap 0 stopped (its rollback ran it again), not swap 0's."""
    sc = with_upgrade(rollback={"at": "70s", "checks": CHECKS[:1]})
    sc["upgrade"]["swaps"].append(
        {"at": "90s", "target": {"version": "3", "env": {"X": "1"}}, "checks": CHECKS[:1]}
    )
    sc["target"]["version"] = "1"
    scenario = scenario_from_data(sc, "s", tmp_path)
    assert scenario.upgrade is not None
    versions = swap_versions(scenario.upgrade, scenario.target)
    assert [(v.before.version, v.after.version) for v in versions] == [("1", "2"), ("1", "3")]
    assert versions[1].after.argv == versions[0].before.argv


BAD = {
    "no phase": (
        {"after": "nope"},
        "upgrade.swaps.0.after: no phase 'nope' (phases: old, new)",
    ),
    "both": ({"at": "10s"}, "give either `at` (a duration) or `after`"),
    "past the end": (
        {"after": None, "at": "3h"},
        "upgrade.swaps.0: at 10800 s is not before the run's end (120 s)",
    ),
    "a docker field": (
        {"target": {"version": "2", "image": "x:2"}},
        "upgrade.swaps.0.target: image not a field of a process target",
    ),
    "unknown check kind": (
        {"checks": [{"name": "x", "kind": "bogus"}]},
        "upgrade.swaps.0.checks.0: Input tag 'bogus' found using 'kind' does not match",
    ),
    "unset var": (
        {"checks": [{"name": "x", "kind": "log", "pattern": "{{nothing_here}}"}]},
        "upgrade.swaps.0.checks.0: {{nothing_here}} has no value",
    ),
    "a snapshot check": (
        {"checks": [{"name": "x", "kind": "unchanged", "snapshot": "s"}]},
        "upgrade.swaps.0.checks.0.kind: unchanged compares with the gate's snapshot",
    ),
    "no checks": ({"checks": []}, "upgrade.swaps.0.checks: List should have at least 1 item"),
    "a new binary that is not there": (
        {"target": {"version": "2", "argv": ["/nonexistent/refdns", "-x"]}},
        "upgrade.swaps.0.target: target: binary not found or not executable: /nonexistent/refdns",
    ),
    "a process target's migration in a container": (
        {"migrate": {"container": {"image": "x:2", "command": ["true"], "mount": "/d"}}},
        "upgrade.swaps.0.migrate.container: a process target migrates on the host",
    ),
    "a rollback without a moment": (
        {"rollback": {"checks": CHECKS[:1]}},
        "give either `at` (a duration) or `after`",
    ),
    "a rollback before its swap": (
        {"rollback": {"at": "30s", "checks": CHECKS[:1]}},
        "upgrade.swaps.0.rollback: at 30 s is not after its swap",
    ),
    "a rollback at the run's end": (
        {"rollback": {"after": "new", "checks": CHECKS[:1]}},
        "upgrade.swaps.0.rollback: at 120 s is not before the run's end (120 s)",
    ),
    "a rollback's check of the snapshot": (
        {"rollback": {"at": "90s", "checks": [{"name": "x", "kind": "corpus"}]}},
        "upgrade.swaps.0.rollback.checks.0",
    ),
}


@pytest.mark.parametrize("name", sorted(BAD))
def test_a_bad_upgrade_section_is_one_line_exit_2(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    swap, said = BAD[name]
    code, _, err = validate_exit(tmp_path, capsys, with_upgrade(**swap))
    assert code == 2
    assert len(err) == 1, err
    assert said in err[0], err
