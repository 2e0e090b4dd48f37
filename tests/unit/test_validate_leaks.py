"""`soak validate` says in one line when a scenario's judged phases cannot give its leak
criteria a verdict at its settings (too few windows, shorter than the start-up wait): a
warning, exit 0, since such a run is valid but ends NOT JUDGED."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.unit.test_bad_input import base_scenario, validate_exit


def validated(tmp_path: Path, capsys: pytest.CaptureFixture[str], **sections: Any) -> list[str]:
    """The stderr lines of `soak validate` of the base scenario with `sections` set."""
    code, out, err = validate_exit(tmp_path, capsys, {**base_scenario(), **sections})
    assert code == 0, err
    assert "is valid" in out
    return err


PHASES = [
    {"name": "warm", "duration_s": "20s", "warmup": True},
    {"name": "steady", "duration_s": "10s"},
]


def test_too_few_windows_for_its_leak_criteria_is_said_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # 10 judged seconds (the warm-up's 20 are not judged) against 6 windows of 10 min.
    (line,) = validated(tmp_path, capsys, phases=PHASES)
    assert line.startswith("soak validate: warning: "), line
    assert "the judged phases last 10 s" in line
    assert "fewer than 6 windows of leaks.window_s (6 x 600 s = 3600 s" in line
    assert "NOT JUDGED (exit 1) unless criteria.not_judged: pass" in line


def test_fewer_windows_than_the_trend_test_needs_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """min_windows 3 at 3-s windows over 10 judged seconds: 3 windows, and Mann-Kendall
    needs 5 to reach p < 0.05 at all."""
    leaks = {"window_s": "3s", "min_windows": 3, "startup_max_s": 0}
    (line,) = validated(tmp_path, capsys, phases=PHASES, leaks=leaks)
    assert "fewer than 5 windows" in line and "the trend test at p < 0.05 needs 5" in line


def test_shorter_than_the_start_up_wait_is_said(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    leaks = {"window_s": "1s", "min_windows": 3}  # 10 windows; the wait is 24 of them
    (line,) = validated(tmp_path, capsys, phases=PHASES, leaks=leaks)
    assert "shorter than the leak start-up wait (24 s, leaks.startup_max_s)" in line


@pytest.mark.parametrize(
    "sections",
    [
        {"leaks": {"window_s": "1s", "min_windows": 3, "startup_max_s": 0}},
        {"leaks": {"window_s": "1s", "min_windows": 3, "startup_max_s": "8s"}},
        {"criteria": {"leaks_ok": False}},  # no leak criteria to reach
    ],
)
def test_a_scenario_whose_leaks_can_be_judged_gets_no_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], sections: dict[str, Any]
) -> None:
    assert validated(tmp_path, capsys, phases=PHASES, **sections) == []
