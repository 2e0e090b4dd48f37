"""The checklist flow (needs, retry) and the reports built from one result (no sockets)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from soak.points import Point
from soak.targets.base import Running
from soak.upgrade.actions import Version
from soak.upgrade.checklist import CheckContext, CheckResult, run_checks
from soak.upgrade.config import Check
from soak.upgrade.report import (
    check_points,
    junit_xml,
    matrix_line,
    report_json,
    summary_line,
    table,
    to_json,
)
from soak.upgrade.result import StepRecord, UpgradeResult
from soak.upgrade.snapshot import Snapshot
from soak.upgrade.template import Values

CHECKS: TypeAdapter[list[Check]] = TypeAdapter(list[Check])


def context(tmp_path: Path, ready_after_s: float | None = 0.5) -> CheckContext:
    log = tmp_path / "new.log"
    log.write_text("starting\nready\n")
    running = Running("t", "127.0.0.1", {}, pid=None, log_path=log, ready_after_s=ready_after_s)
    version = Version("new", running, tmp_path)
    return CheckContext(Values({}, {}), version, Snapshot.of([]), tmp_path)


def checks(*items: dict[str, Any]) -> list[Check]:
    return CHECKS.validate_python(list(items))


def test_a_check_whose_prerequisite_failed_is_skipped(tmp_path: Path) -> None:
    plan_checks = checks(
        {"name": "ready", "kind": "ready_within", "within_s": 0.1},
        {"name": "log", "kind": "log", "pattern": "panic", "needs": "ready"},
        {"name": "file", "kind": "file", "path": "{data_dir}/new.log", "needs": ["log"]},
        {"name": "independent", "kind": "log", "pattern": "panic"},
    )
    seen: list[tuple[int, str]] = []
    results = run_checks(plan_checks, context(tmp_path), lambda i, r: seen.append((i, r.status)))
    assert [r.status for r in results] == ["fail", "skip", "skip", "pass"]
    assert results[1].message == "needs 'ready' (fail)"
    assert results[2].message == "needs 'log' (skip)"
    assert seen == [(0, "fail"), (1, "skip"), (2, "skip"), (3, "pass")]


def test_placeholders_reach_file_checks(tmp_path: Path) -> None:
    plan_checks = checks(
        {"name": "file", "kind": "file", "path": "{data_dir}/new.log", "mode": "0644"}
    )
    (tmp_path / "new.log").touch()
    (tmp_path / "new.log").chmod(0o644)
    assert run_checks(plan_checks, context(tmp_path))[0].status == "pass"


def test_retry_until_the_deadline_then_pass(tmp_path: Path) -> None:
    ctx = context(tmp_path)
    log = ctx.version.running.log_path
    assert log is not None
    plan_checks = checks(
        {
            "name": "later",
            "kind": "log",
            "pattern": "migrated",
            "present": True,
            "retry": "30s",
            "retry_interval_s": 0.01,
        }
    )
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:  # the server writes the line while we wait
        sleeps.append(seconds)
        if len(sleeps) == 3:
            with open(log, "a") as fh:
                fh.write("schema migrated\n")

    result = run_checks(plan_checks, ctx, sleep=sleep)[0]
    assert result.status == "pass" and result.attempts == 4
    assert sleeps == [0.01, 0.01, 0.01]


def test_without_retry_one_attempt(tmp_path: Path) -> None:
    plan_checks = checks({"name": "x", "kind": "log", "pattern": "never", "present": True})
    result = run_checks(plan_checks, context(tmp_path), sleep=lambda s: None)[0]
    assert (result.status, result.attempts) == ("fail", 1)


def sample_result() -> UpgradeResult:
    result = UpgradeResult("pdns", "run-1", Path("/tmp/x"), False, "2026-12-02T13:00:00+00:00")
    result.duration_s = 4.2
    result.checks = [
        CheckResult("ready", "ready_within", "pass", 0.1, "ready within 10 s", "0.10 s", 1),
        CheckResult(
            "zone GET",
            "api",
            "fail",
            23.0,
            "status 200",
            "status 500: Internal Server Error <&>\x01",
            1,
        ),
        CheckResult("records", "api", "skip", 0.0, got="needs 'zone GET' (fail)"),
    ]
    return result


def test_junit_parses_back_and_counts_like_the_table() -> None:
    result = sample_result()
    root = ET.fromstring(junit_xml(result))
    suite = root.find("testsuite")
    assert suite is not None
    assert (suite.get("tests"), suite.get("failures"), suite.get("skipped")) == ("3", "1", "1")
    cases = suite.findall("testcase")
    assert [c.get("name") for c in cases] == ["ready", "zone GET", "records"]
    failure = cases[1].find("failure")
    assert failure is not None
    assert failure.get("message") == (
        "expected status 200; got status 500: Internal Server Error <&>?"
    )
    assert cases[2].find("skipped") is not None and cases[0].find("failure") is None
    text = table(result)
    assert text.endswith("1 of 3 checks pass (1 failed, 1 skipped)")
    assert summary_line(result) in text
    assert "status 500: Internal Server Error" in text


def test_json_and_points() -> None:
    result = sample_result()
    data = to_json(result)
    assert (data["passed"], data["failed"], data["skipped"], data["total"]) == (1, 1, 1, 3)
    assert data["exit_code"] == 1 and data["ok"] is False
    assert data["checks"][1]["message"].startswith("expected status 200; got status 500")
    points = check_points(result, target="pdns", version="4.7", time_ns=5)
    assert [p.tags["check"] for p in points] == ["ready", "zone GET", "records"]
    first: Point = points[0]
    assert first.measurement == "upgrade_check" and first.fields["ok"] is True
    assert {"soak", "scenario", "target", "version", "plan"} <= set(first.tags)
    assert points[1].fields["ok"] is False and "500" in str(points[1].fields["message"])


def test_exit_codes() -> None:
    result = sample_result()
    assert result.exit_code == 1
    result.checks = result.checks[:1]
    assert result.exit_code == 0
    result.start_error = "new version cannot start"
    assert result.exit_code == 2
    result.internal_error = "APIError: 409"
    assert result.exit_code == 3
    result.interrupted = "SIGTERM"  # a cancel wins: CI shows it as cancelled
    assert result.exit_code == 143


def test_junit_for_a_pipeline_classname_errors_rounding_steps() -> None:
    result = sample_result()
    result.plan = "unbound-to-1.26[old 1.13]"
    result.new_ready_s = 1.234567
    error = CheckResult("interrupted", "interrupt", "error", 0.0, "the run to end", "SIGTERM")
    error.output = "last log lines:\n" + "x" * 3000
    result.checks.insert(0, error)
    result.steps = [StepRecord("old", "stopped in 0.52 s", True, 520.0, 12.3456)]
    suite = ET.fromstring(junit_xml(result)).find("testsuite")
    assert suite is not None and suite.get("errors") == "1"
    case = suite.find("testcase")
    assert case is not None and case.get("classname") == "upgrade unbound-to-1_26[old 1_13]"
    element = case.find("error")
    assert element is not None and element.get("message") == "SIGTERM"  # short: the reason
    assert (element.text or "").count("x" * 3000) == 1  # the long output once, in the body
    props = {p.get("name"): p.get("value") for p in suite.iter("property")}
    assert props["new_ready_s"] == "1.235"
    out = suite.find("system-out")
    assert out is not None and out.text == "+12.346s old: stopped in 0.52 s (520 ms)"
    assert table(result).endswith("(1 failed, 1 skipped, 1 error)")


def test_one_json_shape_and_the_matrix_line() -> None:
    one, two = sample_result(), sample_result()
    two.plan, two.checks = "pdns[old 2]", two.checks[:1]
    single = report_json([one], matrix=False)
    assert set(single) == set(report_json([one, two], matrix=True))
    assert (single["matrix"], single["exit_code"], len(single["runs"])) == (False, 1, 1)
    both = report_json([one, two], matrix=True)
    assert (both["passed"], both["failed"], both["total"], both["exit_code"]) == (2, 1, 4, 1)
    assert matrix_line([one, two]) == (
        "matrix: 2 pairs, exit 1: pdns: FAIL, 1 of 3 pass; pdns[old 2]: pass, 1 of 1 pass"
    )
