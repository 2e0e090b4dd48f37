"""The room a swap leaves after it (soak.upgrade.room): less than its checks may wait is
an error (one line with its YAML path, exit 2, as any bad input), too little for the new
version's own leak verdict a warning (exit 0); the same rule on a plan shortened by
`--duration`."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.config import scenario_from_data
from soak.errors import InputError
from soak.runs.timeline import scaled_scenario
from soak.upgrade.insoak import swap_plans, swap_warnings
from tests.unit.test_bad_input import validate_exit
from tests.unit.test_soak_upgrade_config import CHECKS, with_upgrade

# No leak criterion: these cases are about the checks' room alone.
NO_LEAKS = {"leaks_ok": False}


def scenario(**swap: Any) -> dict[str, Any]:
    sc = with_upgrade(**swap)
    sc["criteria"] = NO_LEAKS
    return sc


@pytest.mark.parametrize(
    ("swap", "line"),
    [
        # 5 s before the end; the api check may wait its default 10 s
        (
            {"after": None, "at": "115s"},
            "scenario: upgrade.swaps.0.at: at 115 s leaves 5 s before the run's end, less"
            " than its checks may wait (10 s, api 'token'); place it earlier or lengthen"
            " the phases after it",
        ),
        # a check's own, longer timeout: a command check of 60 s after 60 s left is fine,
        # of 90 s is not
        (
            {"checks": [*CHECKS, {"name": "c", "kind": "command", "argv": ["true"],
                                  "timeout_s": "90s"}]},
            "scenario: upgrade.swaps.0.after: at 60 s leaves 60 s before the run's end, less"
            " than its checks may wait (90 s, command 'c'); place it earlier or lengthen"
            " the phases after it",
        ),
        # a rollback 4 s before the end
        (
            {"rollback": {"at": "116s", "checks": CHECKS[1:2]}},
            "scenario: upgrade.swaps.0.rollback.at: at 116 s leaves 4 s before the run's"
            " end, less than its checks may wait (10 s, api 'token'); place it earlier or"
            " lengthen the phases after it",
        ),
        # its rollback 3 s after the swap: the swap's checks would have no room
        (
            {"rollback": {"at": "63s", "checks": CHECKS[:1]}},
            "scenario: upgrade.swaps.0.after: at 60 s leaves 3 s before"
            " upgrade.swaps.0.rollback at 63 s, less than its checks may wait (10 s,"
            " api 'token'); place it earlier or lengthen the phases after it",
        ),
    ],
)  # fmt: skip
def test_a_swap_too_close_to_what_follows_is_one_line_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], swap: dict[str, Any], line: str
) -> None:
    code, out, err = validate_exit(tmp_path, capsys, scenario(**swap))
    assert (code, err, out) == (2, [f"soak: {line}"], "")


def test_room_enough_for_the_longest_check_is_valid(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Exactly the longest check's timeout left, and a check that shortens its own."""
    short_api = [CHECKS[0], {**CHECKS[1], "timeout_s": "2s"}, CHECKS[2]]
    for swap in ({"after": None, "at": "110s"}, {"after": None, "at": "117s", "checks": short_api}):
        code, out, err = validate_exit(tmp_path, capsys, scenario(**swap))
        assert code == 0 and "1 swap" in out
        assert [e for e in err if "upgrade.swaps" in e] == []


def test_duration_applies_the_same_rule_to_the_shortened_plan(tmp_path: Path) -> None:
    """The plan of 120 s is valid; shortened to 12 s its swap leaves 6 s, less than the
    api check's 10 s: `soak start --duration 12s` refuses it before anything starts."""
    sc = scenario_from_data(scenario(), "s", tmp_path)
    assert len(swap_plans(sc, env={})) == 1
    with pytest.raises(InputError) as refused:
        swap_plans(scaled_scenario(sc, 12.0), env={})
    assert str(refused.value) == (
        "scenario: upgrade.swaps.0.after: at 6 s leaves 6 s before the run's end, less than"
        " its checks may wait (10 s, api 'token'); place it earlier or lengthen the phases"
        " after it"
    )


def leaky(**leaks: Any) -> dict[str, Any]:
    sc = with_upgrade()
    sc["leaks"] = {"window_s": "5s", "min_windows": 3, "startup_max_s": "30s", **leaks}
    sc["phases"][1]["duration_s"] = "40s"
    return sc


def test_too_little_for_the_new_versions_leak_verdict_is_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """40 s after the swap at 5-s windows and a 30-s start-up wait: a verdict; at 10-s
    windows (the trend test needs 5 of them: 50 s) none, said as a warning, the scenario
    valid."""
    code, _, err = validate_exit(tmp_path, capsys, leaky())
    assert (code, [e for e in err if "upgrade.swaps" in e]) == (0, [])
    code, _, err = validate_exit(tmp_path, capsys, leaky(window_s="10s"))
    said = [e for e in err if "upgrade.swaps" in e]
    assert code == 0 and len(said) == 1, err
    assert said[0].startswith("soak validate: warning: ")
    assert said[0].endswith(
        "upgrade.swaps.0.after: the version it brings in runs 40 s before the run's end,"
        " fewer than 5 windows of leaks.window_s (5 x 10 s = 50 s; leaks.min_windows 3,"
        " the trend test at p < 0.05 needs 5): every leak criterion is not judged: its"
        " segment's leak verdicts are not judged"
    )
    # shorter than the start-up wait
    sc = scenario_from_data(leaky(startup_max_s="50s"), "s", tmp_path)
    (line,) = swap_warnings(sc, swap_plans(sc, env={}))
    assert "shorter than the leak start-up wait (50 s" in line
    # no leak criterion: nothing to warn of
    sc = scenario_from_data({**leaky(window_s="10s"), "criteria": NO_LEAKS}, "s", tmp_path)
    assert swap_warnings(sc, swap_plans(sc, env={})) == []
