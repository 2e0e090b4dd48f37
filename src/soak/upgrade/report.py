"""The run's results as a terminal table, JUnit XML, JSON, and `upgrade_check` points.

All four are built from one UpgradeResult, so their counts agree. Messages are
already redacted by the runner; nothing here sees a secret value.
"""

from __future__ import annotations

import json
import re
import socket
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from soak.points import Point, event_point
from soak.upgrade.checklist import CheckResult
from soak.upgrade.result import StepRecord, UpgradeResult, run_tags
from soak.words import plural

_XML_ILLEGAL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_WORD = {"pass": "pass", "fail": "FAIL", "skip": "skip", "error": "ERROR"}


def summary_line(result: UpgradeResult) -> str:
    passed, total = result.count("pass"), len(result.checks)
    errors = result.count("error")
    also = f", {errors} {plural(errors, 'error')}" if errors else ""
    return (
        f"{passed} of {total} checks pass "
        f"({result.count('fail')} failed, {result.count('skip')} skipped{also})"
    )


def verdict_word(result: UpgradeResult) -> str:
    if result.interrupted is not None:
        return f"interrupted ({result.interrupted})"
    if result.internal_error is not None:
        return "internal error"
    if result.start_error is not None:
        return "cannot run"
    return "pass" if result.exit_code == 0 else "FAIL"


def matrix_line(results: list[UpgradeResult]) -> str:
    """One line for a matrix: each pair's verdict and counts, then the exit code."""
    pairs = "; ".join(
        f"{r.plan}: {verdict_word(r)}, {r.count('pass')} of {len(r.checks)} pass" for r in results
    )
    return f"matrix: {len(results)} pairs, exit {combined_exit_code(results)}: {pairs}"


def combined_exit_code(results: list[UpgradeResult]) -> int:
    """An interruption wins, then a pair that could not run (2), then a failure (1)."""
    codes = [r.exit_code for r in results]
    interrupted = [c for c in codes if c > 128]
    if interrupted:
        return interrupted[0]
    for code in (3, 2):  # an internal error, then a pair that could not run
        if code in codes:
            return code
    return max(codes, default=0)


def _ms_words(duration_ms: float) -> str:
    return f"{duration_ms / 1000:.2f} s" if duration_ms >= 1000 else f"{duration_ms:.0f} ms"


def table(result: UpgradeResult) -> str:
    """The final table: one row per check, the message under a row that did not pass."""
    rows = [f"{'#':>3}  {'result':<6}  {'time':>8}  check"]
    for i, check in enumerate(result.checks, 1):
        rows.append(
            f"{i:>3}  {_WORD[check.status]:<6}  {_ms_words(check.duration_ms):>8}  {check.name}"
        )
        if check.status != "pass":
            rows.append(f"{'':>23}{check.message}")
            rows += [f"{'':>25}{line}" for line in check.output.splitlines()]
    rows.append(summary_line(result))
    return "\n".join(rows)


# ---------------------------------------------------------------- JUnit


def _xml_text(text: str) -> str:
    return _XML_ILLEGAL_RE.sub("?", text)


def junit_xml(result: UpgradeResult) -> str:
    """One testsuite (the plan), one testcase per check; failures say expected and got."""
    return junit_suites([result])


def junit_suites(results: list[UpgradeResult]) -> str:
    """One testsuite per run (a version matrix: one per old/new pair) in one document."""
    suites = ET.Element(
        "testsuites",
        name="soak upgrade",
        tests=str(sum(len(r.checks) for r in results)),
        failures=str(sum(r.count("fail") for r in results)),
        errors=str(sum(r.count("error") for r in results)),
        skipped=str(sum(r.count("skip") for r in results)),
        time=f"{sum(r.duration_s for r in results):.3f}",
    )
    for result in results:
        _junit_suite(suites, result)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _junit_suite(suites: ET.Element, result: UpgradeResult) -> None:
    total, failures, skipped = len(result.checks), result.count("fail"), result.count("skip")
    time_s = f"{result.duration_s:.3f}"
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=result.plan,
        tests=str(total),
        failures=str(failures),
        errors=str(result.count("error")),
        skipped=str(skipped),
        time=time_s,
        timestamp=result.started_at,
        hostname=socket.gethostname(),
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("run_id", result.run_id),
        ("old_ready_s", _rounded(result.old_ready_s)),
        ("new_ready_s", _rounded(result.new_ready_s)),
        ("rollback_ready_s", _rounded(result.rollback_ready_s)),
        ("swap_lost", result.swap.lost if result.swap else None),
        ("swap_longest_gap_s", _rounded(result.swap.longest_gap_s) if result.swap else None),
        ("interrupted", result.interrupted),
        ("logs_dir", result.logs_dir),
    ):
        if value is None and name.startswith(("swap_", "rollback_", "interrupted", "logs_")):
            continue
        ET.SubElement(props, "property", name=name, value="" if value is None else str(value))
    for ident in result.versions.values():  # which server each version really was
        for name, text in ident.properties():
            ET.SubElement(props, "property", name=name, value=_xml_text(text))
    for check in result.checks:
        _junit_case(suite, result.plan, check)
    out = ET.SubElement(suite, "system-out")
    out.text = _xml_text("\n".join(step_line(s) for s in result.steps))


def junit_classname(plan: str) -> str:
    """The plan's name without dots: CI tools (Jenkins) read the part after the last dot
    as the class and the rest as a package, and versions are full of dots."""
    return "upgrade " + plan.replace(".", "_")


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)


def step_line(step: StepRecord) -> str:
    """`+12.345s phase: text (1.23 s)`: when the step began from the run's start, and
    how long it took when it took time."""
    took = f" ({_ms_words(step.duration_ms)})" if step.duration_ms > 0 else ""
    return f"+{step.start_s:.3f}s {step.phase}: {step.text}{took}"


def swap_junit(suite_name: str, checks: list[CheckResult], time_s: float) -> str:
    """A soak's swap: one testsuite, one testcase per check of its checklist."""
    suites = ET.Element("testsuites", name="soak swap")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name=suite_name,
        tests=str(len(checks)),
        failures=str(sum(1 for c in checks if c.status == "fail")),
        errors=str(sum(1 for c in checks if c.status == "error")),
        skipped=str(sum(1 for c in checks if c.status == "skip")),
        time=f"{time_s:.3f}",
        hostname=socket.gethostname(),
    )
    for check in checks:
        _junit_case(suite, suite_name, check)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode")


def _junit_case(suite: ET.Element, plan: str, check: CheckResult) -> None:
    case = ET.SubElement(
        suite,
        "testcase",
        classname=junit_classname(plan),
        name=_xml_text(check.name),
        time=f"{check.duration_ms / 1000:.3f}",
    )
    body = f"expected: {check.expected}\ngot: {check.got}"
    if check.output:
        body += "\n" + check.output
    if check.status in ("fail", "error"):
        tag = "failure" if check.status == "fail" else "error"
        element = ET.SubElement(case, tag, message=_xml_text(check.message), type=check.kind)
        element.text = _xml_text(body)
    elif check.status == "skip":
        ET.SubElement(case, "skipped", message=_xml_text(check.message))


# ---------------------------------------------------------------- JSON


def to_json(result: UpgradeResult) -> dict[str, Any]:
    """One run (one old/new pair)."""
    return {
        "plan": result.plan,
        "run_id": result.run_id,
        "started_at": result.started_at,
        "duration_s": round(result.duration_s, 3),
        "ok": result.exit_code == 0,
        "exit_code": result.exit_code,
        "passed": result.count("pass"),
        "failed": result.count("fail"),
        "skipped": result.count("skip"),
        "errors": result.count("error"),
        "total": len(result.checks),
        "old_ready_s": _rounded(result.old_ready_s),
        "new_ready_s": _rounded(result.new_ready_s),
        "rollback_ready_s": _rounded(result.rollback_ready_s),
        "start_error": result.start_error,
        "interrupted": result.interrupted,
        "internal_error": result.internal_error,
        "swap": result.swap.to_json() if result.swap is not None else None,
        "run_dir": str(result.run_dir) if result.keep else None,
        "logs_dir": str(result.logs_dir) if result.logs_dir is not None else None,
        "versions": {side: ident.to_json() for side, ident in result.versions.items()},
        "checks": [
            {
                "name": c.name,
                "kind": c.kind,
                "status": c.status,
                "duration_ms": round(c.duration_ms, 3),
                "attempts": c.attempts,
                "expected": c.expected,
                "got": c.got,
                "message": "" if c.status == "pass" else c.message,
                "output": c.output,
                **({"differences": c.details} if c.details is not None else {}),
            }
            for c in result.checks
        ],
        "steps": [
            {
                "phase": s.phase,
                "text": s.text,
                "ok": s.ok,
                "start_s": round(s.start_s, 3),
                "duration_ms": round(s.duration_ms, 3),
            }
            for s in result.steps
        ],
    }


def report_json(results: list[UpgradeResult], matrix: bool) -> dict[str, Any]:
    """The one shape of `--json`, one pair or several: the totals, then each run."""
    code = combined_exit_code(results)
    return {
        "matrix": matrix,
        "exit_code": code,
        "ok": code == 0,
        "interrupted": next((r.interrupted for r in results if r.interrupted), None),
        **{
            key: sum(r.count(status) for r in results)
            for key, status in (
                ("passed", "pass"),
                ("failed", "fail"),
                ("skipped", "skip"),
                ("errors", "error"),
            )
        },
        "total": sum(len(r.checks) for r in results),
        "runs": [to_json(r) for r in results],
    }


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_json(path: Path, results: list[UpgradeResult], matrix: bool) -> None:
    write_text(path, json.dumps(report_json(results, matrix), indent=2) + "\n")


# ---------------------------------------------------------------- points


def check_points(result: UpgradeResult, *, target: str, version: str, time_ns: int) -> list[Point]:
    """`upgrade_check` points (docs/architecture.md "Time series"), one per check, at the
    end of the run."""
    tags = run_tags(result.plan, result.run_id, target, version)
    return [
        Point(
            "upgrade_check",
            {
                "ok": c.status == "pass",
                "duration_ms": float(c.duration_ms),
                "message": "" if c.status == "pass" else c.message,
            },
            time_ns,
            {**tags, "check": c.name},
        )
        for c in result.checks
    ]


def ready_points(
    result: UpgradeResult, *, versions: dict[str, tuple[str, str]], time_ns: int
) -> list[Point]:
    """`event` points of kind `ready` (value: start to ready, s), one per version that got
    ready; `versions` maps old/new to (target name, version)."""
    points = []
    for side, ready_s in (("old", result.old_ready_s), ("new", result.new_ready_s)):
        if ready_s is None or side not in versions:
            continue
        target, version = versions[side]
        tags = run_tags(result.plan, result.run_id, target, version)
        message = f"{side} version ready after {ready_s:.2f} s"
        points.append(event_point("ready", message, time_ns, ready_s).with_tags(tags))
    return points
