"""Real runs for the audit's mutation tests: a run's directory corrupted one thing at a
time (tests/e2e/test_audit_mutations.py, test_audit_server_witnesses.py)."""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from soak.results.reportinput import local_audit
from soak.runs.layout import DataDir
from tests.support.soaks import foreground

RATE = 300


def result_of(data: Path, run_id: str) -> tuple[Path, dict[str, Any]]:
    (path,) = (data / "runs").glob(f"{run_id}*/result.json")
    return path, json.loads(path.read_text())


def corrupted(run: tuple[Path, str], change: Callable[[Path, str], None]) -> list[str]:
    """The audit of the run with one change, the run put back as it was after (its state
    names its own run directory: the run is changed in place, not copied)."""
    data, run_id = run
    saved = {path: path.read_bytes() for path in (data / "points.db", result_of(data, run_id)[0])}
    try:
        change(data, run_id)
        return local_audit(DataDir(data), run_id)
    finally:
        for path, content in saved.items():
            path.write_bytes(content)


def with_db(change: Callable[[sqlite3.Connection, str], None]) -> Callable[[Path, str], None]:
    def apply(data: Path, run_id: str) -> None:
        db = sqlite3.connect(data / "points.db")
        try:
            change(db, run_id)
            db.commit()
        finally:
            db.close()

    return apply


def audited_run(
    name: str,
    target: dict[str, Any],
    qname: str,
    samplers: dict[str, Any],
    **scenario_extra: Any,
) -> Iterator[tuple[Path, str]]:
    """A process `target` answering `qname`, loaded at RATE for 12 s with 1-s ticks and
    `samplers` (and `scenario_extra`'s sections, `load` merged), run in the foreground
    and audited clean: (data dir, run id); its directory removed afterwards."""
    data = Path(tempfile.mkdtemp(prefix="sw-"))
    load = {"rate_qps": RATE, "mix": [{"name": "www", "queries": [f"{qname} A"]}]}
    load.update(scenario_extra.pop("load", {}))
    scenario = {
        "name": name,
        "target": {
            "runtime": "process",
            "ready": {"probes": [{"kind": "dns", "name": qname}]},
            **target,
        },
        "phases": [{"name": "steady", "duration_s": "12s"}],
        "samplers": {"interval_s": 1, **samplers},
        "load": load,
        "criteria": {"leaks_ok": False, "p99_ms_max": {"all": 1000}},
        **scenario_extra,
    }
    path = data / f"{name}.json"
    path.write_text(json.dumps(scenario))
    try:
        run_id = foreground(path, data / "d")["id"]
        assert local_audit(DataDir(data / "d"), run_id) == []
        yield data / "d", run_id
    finally:
        shutil.rmtree(data, ignore_errors=True)


SERVER_QUERIES = (
    "field = 'server_queries' AND series_id IN"
    " (SELECT id FROM series WHERE soak = ? AND measurement = 'runtime')"
)


def assert_server_count_witnessed(run: tuple[Path, str], changed: str) -> None:
    """The server counted the run's load, and its count changed in the store (`changed`,
    an SQL expression of `num`) is named by the audit."""
    data, run_id = run
    db = sqlite3.connect(data / "points.db")
    try:
        sql = f"SELECT MAX(num) FROM samples WHERE {SERVER_QUERIES}"
        counted = db.execute(sql, (run_id,)).fetchone()[0]
    finally:
        db.close()
    assert counted is not None and counted > RATE * 5  # the server counted the load

    def change(db: sqlite3.Connection, run_id: str) -> None:
        db.execute(f"UPDATE samples SET num = {changed} WHERE {SERVER_QUERIES}", (run_id,))

    found = corrupted(run, with_db(change))
    assert any(line.startswith("the server counted") for line in found), found
