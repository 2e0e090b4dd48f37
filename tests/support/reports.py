"""A small run for report tests: its ReportInput with only what a test changes."""

from __future__ import annotations

from typing import Any

from soak.clock import NS_PER_S
from soak.report import PhaseSpan, ReportInput, build_report
from soak.results.grew import report_section
from soak.sinks.sqlite import SqliteStore

S = NS_PER_S
T0 = 1_790_000_000 * S


def tags(run_id: str) -> dict[str, str]:
    return {"soak": run_id, "scenario": "s", "target": "t", "version": "1"}


def report_input(run_id: str, end_s: int, phases: list[PhaseSpan], **kw: Any) -> ReportInput:
    """A run of `end_s` seconds from T0 with `phases`, passed unless `status` says otherwise."""
    fields: dict[str, Any] = {
        "scenario_name": "s",
        "target_name": "t",
        "version": "1",
        "target_desc": "external",
        "status": "passed",
        "startup": {},
        "criteria": [],
        "verdicts": [],
        "host": {"name": "h"},
    }
    fields.update(kw)
    return ReportInput(
        run_id=run_id, started_ns=T0, ended_ns=T0 + end_s * S, phases=phases, **fields
    )


def build(store: SqliteStore, inp: ReportInput) -> dict[str, Any]:
    """The report of `inp` from `store`, which is closed after."""
    try:
        return build_report(store, inp, what_grew=report_section)
    finally:
        store.close()
