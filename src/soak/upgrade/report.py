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
from soak.upgrade.runner import UpgradeResult

_XML_ILLEGAL_RE = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f]")
_WORD = {"pass": "pass", "fail": "FAIL", "skip": "skip"}


def summary_line(result: UpgradeResult) -> str:
    passed, total = result.count("pass"), len(result.checks)
    return (
        f"{passed} of {total} checks pass "
        f"({result.count('fail')} failed, {result.count('skip')} skipped)"
    )


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
        errors="0",
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
        errors="0",
        skipped=str(skipped),
        time=time_s,
        timestamp=result.started_at,
        hostname=socket.gethostname(),
    )
    props = ET.SubElement(suite, "properties")
    for name, value in (
        ("run_id", result.run_id),
        ("old_ready_s", result.old_ready_s),
        ("new_ready_s", result.new_ready_s),
        ("rollback_ready_s", result.rollback_ready_s),
        ("swap_lost", result.swap.lost if result.swap else None),
        ("swap_longest_gap_s", round(result.swap.longest_gap_s, 4) if result.swap else None),
    ):
        if value is None and name.startswith(("swap_", "rollback_")):
            continue
        ET.SubElement(props, "property", name=name, value="" if value is None else str(value))
    for check in result.checks:
        case = ET.SubElement(
            suite,
            "testcase",
            classname=f"upgrade.{result.plan}",
            name=_xml_text(check.name),
            time=f"{check.duration_ms / 1000:.3f}",
        )
        if check.status == "fail":
            failure = ET.SubElement(
                case, "failure", message=_xml_text(check.message), type=check.kind
            )
            failure.text = _xml_text(f"expected: {check.expected}\ngot: {check.got}")
        elif check.status == "skip":
            ET.SubElement(case, "skipped", message=_xml_text(check.message))
    out = ET.SubElement(suite, "system-out")
    out.text = _xml_text("\n".join(f"{s.phase}: {s.text}" for s in result.steps))


# ---------------------------------------------------------------- JSON


def to_json(result: UpgradeResult) -> dict[str, Any]:
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
        "total": len(result.checks),
        "old_ready_s": result.old_ready_s,
        "new_ready_s": result.new_ready_s,
        "rollback_ready_s": result.rollback_ready_s,
        "start_error": result.start_error,
        "swap": result.swap.to_json() if result.swap is not None else None,
        "run_dir": str(result.run_dir) if result.keep else None,
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
                **({"differences": c.details} if c.details is not None else {}),
            }
            for c in result.checks
        ],
        "steps": [
            {"phase": s.phase, "text": s.text, "ok": s.ok, "duration_ms": round(s.duration_ms, 3)}
            for s in result.steps
        ],
    }


def write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def write_json(path: Path, result: UpgradeResult) -> None:
    write_text(path, json.dumps(to_json(result), indent=2) + "\n")


# ---------------------------------------------------------------- points


def check_points(result: UpgradeResult, *, target: str, version: str, time_ns: int) -> list[Point]:
    """`upgrade_check` points (DESIGN.md), one per check, at the end of the run."""
    run_tags = {
        "soak": result.run_id,
        "scenario": result.plan,
        "target": target,
        "version": version,
        "plan": result.plan,
    }
    return [
        Point(
            "upgrade_check",
            {
                "ok": c.status == "pass",
                "duration_ms": float(c.duration_ms),
                "message": "" if c.status == "pass" else c.message,
            },
            time_ns,
            {**run_tags, "check": c.name},
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
        tags = {
            "soak": result.run_id,
            "scenario": result.plan,
            "target": target,
            "version": version,
            "plan": result.plan,
        }
        message = f"{side} version ready after {ready_s:.2f} s"
        points.append(event_point("ready", message, time_ns, ready_s).with_tags(tags))
    return points
