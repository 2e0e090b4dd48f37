"""A run's reports: what the report module needs, gathered from the run's record and store.

Reports are written into the run directory at the end of a run; `soak report`
and `GET /runs/{id}/report` serve those files, or build them on demand for a
run that is still going.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from soak.errors import InputError
from soak.service.state import RunRecord, StateStore
from soak.service.status import REPORT_FORMATS, read_result

if TYPE_CHECKING:
    from soak.service.manager import RunManager

REPORT_MEDIA = {
    "html": "text/html; charset=utf-8",
    "json": "application/json",
    "md": "text/markdown; charset=utf-8",
}


def render_all(points_path: Path, state: StateStore, record: RunRecord) -> dict[str, str]:
    """The three renderings of one run's report."""
    from soak.sinks.sqlite import SqliteStore

    report_mod = importlib.import_module("soak.report")
    store = SqliteStore(points_path)
    try:
        report = report_mod.build_report(store, report_input(record, state))
    finally:
        store.close()
    return {
        "html": report_mod.render_html(report),
        "json": report_mod.render_json(report),
        "md": report_mod.render_markdown(report),
    }


def report_input(record: RunRecord, state: StateStore) -> Any:
    report_mod = importlib.import_module("soak.report")
    result = read_result(record.run_dir) or {}
    return report_mod.ReportInput(
        soak_id=record.id,
        scenario=record.scenario,
        status=record.status,
        started_ns=record.origin_ns,
        ended_ns=record.ended_ns,
        events=[
            {"time_ns": e.time_ns, "kind": e.kind, "message": e.message, "value": e.value}
            for e in state.events(record.id)
        ],
        result=result,
    )


def report_text(manager: RunManager, record: RunRecord, fmt: str) -> str:
    """The written report of a finished run, else one built now from what is stored."""
    path = record.run_dir / REPORT_FORMATS[fmt]
    if path.exists():
        return path.read_text()
    from soak.service.run import points_path

    texts = render_all(
        points_path(record.scenario, manager.data_dir, record.run_dir), manager.state, record
    )
    return texts[fmt]


def local_report_text(data_dir: Path, run_id: str, fmt: str) -> str:
    """`soak report RUN --data-dir DIR`: no service needed."""
    from soak.service.run import points_path

    state_path = data_dir / "state.db"
    if not state_path.exists():
        raise InputError(f"no soak state in {data_dir}")
    state = StateStore(state_path)
    try:
        record = state.get_run(run_id)
        if record is None:
            raise InputError(f"no run {run_id!r} in {data_dir}")
        path = record.run_dir / REPORT_FORMATS[fmt]
        if path.exists():
            return path.read_text()
        texts = render_all(points_path(record.scenario, data_dir, record.run_dir), state, record)
        return texts[fmt]
    finally:
        state.close()


def result_json(record: RunRecord) -> str:
    return json.dumps(read_result(record.run_dir) or {}, indent=2)
