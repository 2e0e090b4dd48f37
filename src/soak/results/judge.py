"""The end of a run: criteria, verdicts, the result file and the reports in its directory.

`judge_and_report` is the end hook the manager registers on every run. The criteria
and the report themselves are the analysis and report modules' work; this module
feeds them the run's store and writes what they return.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Any

from soak.analysis import evaluate_criteria, run_data_from_store
from soak.analysis.criteria import generator_cause
from soak.analysis.judged import Tally, tally
from soak.report.audit import ledger_totals
from soak.results.reportinput import render_all
from soak.runs.ending import Ending, Outcome, RunEnd
from soak.runs.layout import report_path, result_path
from soak.runs.state import RunStatus
from soak.sinks.sqlite import SqliteStore

log = logging.getLogger(__name__)


def as_dict(obj: Any) -> dict[str, Any]:
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return dataclasses.asdict(obj)
    dump = getattr(obj, "model_dump", None)
    if callable(dump):
        result = dump(mode="json")
        assert isinstance(result, dict)
        return result
    return dict(obj)


def judge_and_report(end: RunEnd) -> Outcome:
    """A completed run becomes `passed`, `failed` or `not_judged` by its criteria; other
    endings keep their own status."""
    message = end.message
    status = end.ending.status
    criteria: list[dict[str, Any]] = []
    try:
        criteria = [as_dict(c) for c in evaluate(end)]
    except Exception as exc:  # the run still ends; the fault is an event and the status
        log.exception("run %s: criteria", end.run_id)
        end.event("error", f"criteria could not be evaluated: {exc}", 0.0)
        status, message = RunStatus.ERROR, f"criteria could not be evaluated: {exc}"
    if status is None:
        assert end.ending is Ending.COMPLETED
        status, message = verdict(tally(criteria), end)
    outcome = Outcome(status, message, criteria)
    write_result(end, outcome)
    try:
        write_reports(end, status=status)
    except Exception as exc:
        log.exception("run %s: report", end.run_id)
        end.event("error", f"report could not be written: {exc}", 0.0)
    # Final only now: whoever sees the final status finds the result and the reports.
    end.state.update_run(end.run_id, status=status, message=message, ended_ns=end.ended_ns)
    return outcome


# The first words of a run's message when a criterion was not judged and none failed.
NOT_JUDGED_HEAD = "NOT JUDGED"


def verdict(counted: Tally, end: RunEnd) -> tuple[RunStatus, str]:
    """The status and message of a completed run: passed only when every criterion was
    judged and passed (or the scenario lets the ones not judged pass)."""
    if counted.failed:
        message = counted.counts()
        if "generator" in counted.failed:
            message = f"{generator_cause(end.lost_agents)}; {message}"
        return RunStatus.FAILED, message
    if not counted.not_judged:
        return RunStatus.PASSED, f"completed; {counted.counts()}"
    if end.scenario.criteria.not_judged == "pass":
        return RunStatus.PASSED, f"passed by criteria.not_judged: pass; {counted.counts()}"
    return RunStatus.NOT_JUDGED, f"{NOT_JUDGED_HEAD}: {counted.counts()}"


def evaluate(end: RunEnd) -> list[Any]:
    store = SqliteStore(end.points_path)
    try:
        data = run_data_from_store(
            store,
            end.run_id,
            end.warmup_end_ns,
            run_start_ns=end.origin_ns,
            verdicts=end.verdicts,
            leaks=end.scenario.leaks,
            expect_load=end.scenario.load is not None,
        )
        data.lost_agents = list(end.lost_agents)
        return list(evaluate_criteria(end.scenario.criteria, data))
    finally:
        store.close()


def write_result(end: RunEnd, outcome: Outcome) -> None:
    load_totals = end.load_totals
    if load_totals:
        store = SqliteStore(end.points_path)
        try:
            load_totals = ledger_totals(store, end.run_id, load_totals)
        finally:
            store.close()
    result = {
        "id": end.run_id,
        "status": outcome.status.value,
        "message": outcome.message,
        "passed": outcome.status == RunStatus.PASSED,
        "criteria": outcome.criteria,
        "verdicts": [as_dict(v) for v in end.verdicts],
        "restarts": end.restarts,
        "load_totals": load_totals,
    }
    if end.capture is not None:  # `capture:`: the file a later run replays, its figures
        result["capture"] = end.capture
    end.run_dir.mkdir(parents=True, exist_ok=True)
    result_path(end.run_dir).write_text(json.dumps(result, indent=2, default=str) + "\n")


def write_reports(end: RunEnd, *, status: RunStatus) -> dict[str, Path]:
    """report.html, report.json and report.md of a run into its directory."""
    written = {}
    stored = end.state.get_run(end.run_id)
    assert stored is not None
    record = dataclasses.replace(stored, status=status, ended_ns=end.ended_ns)
    for fmt, text in render_all(end.points_path, end.state, record).items():
        path = report_path(end.run_dir, fmt)
        path.write_text(text)
        written[fmt] = path
    return written
