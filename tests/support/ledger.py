"""One check for every e2e soak run: a run's load figures agree with its ledger.

`assert_figures_agree(data_dir, run_id)` reads what a user would read (the run's
report.json and result.json) and the run's store, and fails with every figure
that disagrees (soak.report.audit), plus the run's own `accounting` events.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from soak.report.audit import ACCOUNTING_EVENT, audit, ledger_sums
from soak.results.reportinput import scheduled_phases
from soak.runs.layout import DataDir
from soak.runs.state import StateStore
from soak.sinks.sqlite import SqliteStore


def load_series_rows(db: Path, aggregate: str, field: str) -> list[tuple[str, float]] | None:
    """(tags as JSON, aggregate of `field`) per `load` series of a store still being
    written (read-only), e.g. aggregate "SUM(v.num)" of field "sent"; None while the
    store or its tables are not made yet."""
    try:
        con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    except sqlite3.OperationalError:  # the store not made yet
        return None
    try:
        return con.execute(
            f"SELECT s.tags, {aggregate} FROM samples v JOIN series s ON s.id = v.series_id "
            "WHERE s.measurement = 'load' AND v.field = ? GROUP BY s.id",
            (field,),
        ).fetchall()
    except sqlite3.OperationalError:  # its tables not made yet
        return None
    finally:
        con.close()


def assert_figures_agree(
    data_dir: Path, run_id: str, *, points: Path | None = None, kept_up: bool = True
) -> dict[str, float]:
    """The run's report and result agree with its ledger; its windows keep their
    invariants; with `kept_up`, everything due was sent. Returns the ledger's sums."""
    dd = DataDir(data_dir)
    run_dir = dd.run_dir(run_id)
    report: dict[str, Any] = json.loads((run_dir / "report.json").read_text())
    result: dict[str, Any] = json.loads((run_dir / "result.json").read_text())
    state = StateStore(dd.state_db)
    try:
        events = [e for e in state.events(run_id) if e.kind == ACCOUNTING_EVENT]
        record = state.get_run(run_id)
    finally:
        state.close()
    # The schedule is a witness: each phase's due is its rate x its seconds.
    schedule = scheduled_phases(record) if record is not None else []
    store = SqliteStore(points or dd.points_db)
    try:
        disagree = audit(store, run_id, report, result.get("load_totals"), schedule)
        sums = ledger_sums(store, run_id)
    finally:
        store.close()
    assert disagree == [], disagree
    assert report.get("accounting", []) == [] and events == [], events
    assert sums.windows > 0, "no load windows stored"
    counts = sums.counts
    assert counts["completed"] <= counts["sent"]
    if counts["due"]:  # one-second windows (the load agents' merged by grid second too)
        assert counts["sent"] <= counts["due"]
        if kept_up:
            assert counts["sent"] == counts["due"], counts
    return counts


def assert_every_query_answered(d: dict[str, Any], queries: int) -> None:
    """A clean load's result (LoadSummary.to_json_dict): `queries` sent and answered,
    none lost, the sockets' own counters (written whole, read whole) the ledger's, and
    no connection error."""
    assert d["sent"] == queries == d["completed"] and d["lost"] == 0, d
    assert d["engine_counters"] == {
        "socket_sent": queries,
        "socket_received": queries,
        "send_failed": 0,
    }, d["engine_counters"]
    assert d["connections"]["errors"] == 0, d["connections"]
