"""The end of a run: criteria, verdicts, the result file and the reports in its directory.

The criteria and the report themselves are the analysis and report modules'
work; this module feeds them the run's store and writes what they return.
"""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soak.service.status import REPORT_FORMATS, RESULT_FILE

if TYPE_CHECKING:
    from soak.service.run import Outcome, Run

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


def judge_and_report(run: Run, status: str, message: str, *, ended_ns: int) -> Outcome:
    """`completed` becomes `passed` or `failed` by the criteria; other statuses stay."""
    from soak.service.run import Outcome

    criteria: list[dict[str, Any]] = []
    try:
        criteria = [as_dict(c) for c in evaluate(run)]
    except Exception as exc:  # the run still ends; the fault is an event and the status
        log.exception("run %s: criteria", run.id)
        run.event("error", f"criteria could not be evaluated: {exc}", 0.0)
        status, message = "error", f"criteria could not be evaluated: {exc}"
    failed = [c for c in criteria if not c.get("ok", False)]
    if status == "completed":
        status = "failed" if failed else "passed"
        if failed:
            message = f"{len(failed)} criterion(s) failed: " + ", ".join(
                str(c.get("name", "?")) for c in failed
            )
            if any(c.get("name") == "generator" for c in failed):
                message = f"generator-bound; {message}"
        else:
            message = "completed; all criteria pass"
    outcome = Outcome(status, message, criteria)
    write_result(run, outcome)
    try:
        write_reports(run, run.run_dir, status=status, ended_ns=ended_ns)
    except Exception as exc:
        log.exception("run %s: report", run.id)
        run.event("error", f"report could not be written: {exc}", 0.0)
    # Final only now: whoever sees the final status finds the result and the reports.
    run.ctx.state.update_run(run.id, status=status, message=message, ended_ns=ended_ns)
    return outcome


def evaluate(run: Run) -> list[Any]:
    from soak.analysis import evaluate_criteria, run_data_from_store
    from soak.sinks.sqlite import SqliteStore

    store = SqliteStore(run.points_path)
    try:
        data = run_data_from_store(
            store,
            run.id,
            run.warmup_end_ns,
            run_start_ns=run.origin_ns,
            verdicts=run.verdicts,
            leaks=run.scenario.leaks,
            expect_load=run.scenario.load is not None,
        )
        return list(evaluate_criteria(run.scenario.criteria, data))
    finally:
        store.close()


def write_result(run: Run, outcome: Outcome) -> None:
    result = {
        "id": run.id,
        "status": outcome.status,
        "message": outcome.message,
        "passed": outcome.status == "passed",
        "criteria": outcome.criteria,
        "verdicts": [as_dict(v) for v in run.verdicts],
        "restarts": run.restarts,
        "load_totals": run.load_totals,
    }
    run.run_dir.mkdir(parents=True, exist_ok=True)
    (run.run_dir / RESULT_FILE).write_text(json.dumps(result, indent=2, default=str) + "\n")


def write_reports(run: Run, run_dir: Path, *, status: str, ended_ns: int) -> dict[str, Path]:
    """report.html, report.json and report.md of a run into its directory."""
    from soak.service.reportinput import render_all

    written = {}
    stored = run.ctx.state.get_run(run.id)
    assert stored is not None
    record = dataclasses.replace(stored, status=status, ended_ns=ended_ns)
    for fmt, text in render_all(run.points_path, run.ctx.state, record).items():
        path = run_dir / REPORT_FORMATS[fmt]
        path.write_text(text)
        written[fmt] = path
    return written
