"""The audit catches what it exists for: a real run's directory, corrupted one thing at a
time, and each corruption named by `soak audit` (the schedule, the server's own count,
result.json and each window's invariants are its witnesses; soak.report.witnesses).

One short soak of unbound (scenarios/unbound-cache.yaml: its own query count sampled
through its remote control) at 300 q/s; each test copies its data directory and changes
one thing in the copy: a window dropped, a window doubled, a second taken out of the store
and result.json alike, a window's due, a class's row, the server's count, the engine's
socket counters (and the store's sent changed while they stay). Other servers' own
counts, each a real run: tests/e2e/test_audit_server_witnesses.py.
"""

from __future__ import annotations

import json
import shutil
import sqlite3
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from soak.histogram import LatencyHistogram
from soak.names import LAT_HIST_FIELD
from soak.results.reportinput import local_audit
from soak.runs.layout import DataDir
from tests.support.audit_runs import RATE, corrupted, result_of, with_db
from tests.support.soaks import ROOT, foreground

pytestmark = pytest.mark.e2e

SCENARIO = ROOT / "scenarios" / "unbound-cache.yaml"


@pytest.fixture(scope="module")
def run() -> Iterator[tuple[Path, str]]:
    """One real run, audited clean; its data directory (short: the control socket)."""
    data = Path(tempfile.mkdtemp(prefix="su-"))
    try:
        run_id = foreground(
            SCENARIO, data / "d",
            "--set", "phases.0.duration_s=5s", "--set", "phases.1.duration_s=20s",
            "--set", "samplers.interval_s=1s", "--set", f"load.rate_qps={RATE}",
            "--set", "criteria.p99_ms_max={all: 1000}",
        )["id"]  # fmt: skip
        assert local_audit(DataDir(data / "d"), run_id) == []
        yield data / "d", run_id
    finally:
        shutil.rmtree(data, ignore_errors=True)


def load_rows(db: sqlite3.Connection, run_id: str, cls: str = "all") -> list[int]:
    """The times of the run's `load` windows of one class."""
    ids = [
        sid
        for sid, tags in db.execute(
            "SELECT id, tags FROM series WHERE soak = ? AND measurement = 'load'", (run_id,)
        )
        if json.loads(tags).get("class") == cls and "agent" not in json.loads(tags)
    ]
    (sid,) = ids
    return [sid, *sorted({t for (t,) in db.execute(
        "SELECT DISTINCT time_ns FROM samples WHERE series_id = ?", (sid,))})]  # fmt: skip


def drop_window(db: sqlite3.Connection, run_id: str) -> None:
    sid, *times = load_rows(db, run_id)
    db.execute(
        "DELETE FROM samples WHERE series_id = ? AND time_ns = ?", (sid, times[len(times) // 2])
    )


def double_window(db: sqlite3.Connection, run_id: str) -> None:
    sid, *times = load_rows(db, run_id)
    t = times[len(times) // 2]
    db.execute(
        "INSERT INTO samples SELECT series_id, field, time_ns + 500000000, num, txt"
        " FROM samples WHERE series_id = ? AND time_ns = ?",
        (sid, t),
    )


def test_a_dropped_window_is_named(run: tuple[Path, str], tmp_path: Path) -> None:
    found = corrupted(run, with_db(drop_window))
    assert any("schedule" in line for line in found), found
    assert any("result.json" in line for line in found), found


def test_a_doubled_window_is_named(run: tuple[Path, str], tmp_path: Path) -> None:
    found = corrupted(run, with_db(double_window))
    assert any("schedule" in line for line in found), found


def test_a_second_taken_from_the_store_and_result_json_alike_is_named(
    run: tuple[Path, str], tmp_path: Path
) -> None:
    def change(data: Path, run_id: str) -> None:
        with_db(drop_window)(data, run_id)
        path, result = result_of(data, run_id)
        totals = result["load_totals"]
        for name in ("due", "sent", "completed"):
            totals[name] -= RATE
        totals["seconds"] -= 1
        path.write_text(json.dumps(result))

    found = corrupted(run, change)
    # result.json's counts were changed alike (its quantiles may lie outside the phases')
    assert found and all("result.json load_totals" not in line for line in found), found
    assert any("schedule" in line for line in found), found
    assert any(line.startswith("the ledger's sent") for line in found), found  # the sockets


def test_a_windows_due_is_named(run: tuple[Path, str], tmp_path: Path) -> None:
    def change(db: sqlite3.Connection, run_id: str) -> None:
        sid, *times = load_rows(db, run_id)
        db.execute(
            "UPDATE samples SET num = num + 7"
            " WHERE series_id = ? AND field = 'due' AND time_ns = ?",
            (sid, times[3]),
        )

    found = corrupted(run, with_db(change))
    assert any("!= due" in line for line in found), found


def test_a_class_row_is_named(run: tuple[Path, str], tmp_path: Path) -> None:
    def change(db: sqlite3.Connection, run_id: str) -> None:
        sid, *_ = load_rows(db, run_id, "miss")
        db.execute(
            "UPDATE samples SET num = num + 50 WHERE series_id = ? AND field = 'sent'", (sid,)
        )

    found = corrupted(run, with_db(change))
    assert any("classes" in line for line in found), found


def test_the_servers_count_is_a_witness(run: tuple[Path, str], tmp_path: Path) -> None:
    def change(db: sqlite3.Connection, run_id: str) -> None:
        db.execute(
            "UPDATE samples SET num = num / 2 WHERE field = 'server_queries' AND series_id IN"
            " (SELECT id FROM series WHERE soak = ? AND measurement = 'runtime')",
            (run_id,),
        )

    found = corrupted(run, with_db(change))
    assert any(line.startswith("the server counted") for line in found), found


def test_a_histogram_is_named(run: tuple[Path, str], tmp_path: Path) -> None:
    """Every `all` window's latency histogram replaced by one of as many answers at
    900 ms: its counts agree, its quantiles do not with result.json's or its classes'."""

    def change(db: sqlite3.Connection, run_id: str) -> None:
        sid, *_ = load_rows(db, run_id)
        rows = db.execute(
            "SELECT time_ns, txt FROM samples WHERE series_id = ? AND field = ?",
            (sid, LAT_HIST_FIELD),
        ).fetchall()
        assert rows
        for time_ns, text in rows:
            slow = LatencyHistogram()
            slow.record(900_000, LatencyHistogram.decode(text).total)
            db.execute(
                "UPDATE samples SET txt = ? WHERE series_id = ? AND field = ? AND time_ns = ?",
                (slow.encode(), sid, LAT_HIST_FIELD, time_ns),
            )

    found = corrupted(run, with_db(change))
    assert any(line.startswith("result.json p99 ") for line in found), found
    assert any(line.startswith("classes `all` p99 ") for line in found), found


def test_result_jsons_latency_is_held_to_its_phases(run: tuple[Path, str], tmp_path: Path) -> None:
    def change(data: Path, run_id: str) -> None:
        path, result = result_of(data, run_id)
        result["load_totals"]["latency_ms"]["p99"] *= 10
        path.write_text(json.dumps(result))

    found = corrupted(run, change)
    assert any(line.startswith("result.json p99 ") for line in found), found


def test_the_engines_socket_counters_are_a_witness(run: tuple[Path, str], tmp_path: Path) -> None:
    """The run kept its sockets' counts (the compiled UDP loop) and they agree; the
    counters changed in result.json, or the store's sent changed while they stay, are
    named."""
    data, run_id = run
    counters = result_of(data, run_id)[1]["load_totals"]["engine_counters"]
    assert counters["socket_sent"] > RATE * 20
    assert counters["socket_received"] >= result_of(data, run_id)[1]["load_totals"]["completed"]

    def fewer_taken(data: Path, run_id: str) -> None:
        path, result = result_of(data, run_id)
        result["load_totals"]["engine_counters"]["socket_sent"] -= 3
        path.write_text(json.dumps(result))

    found = corrupted(run, fewer_taken)
    assert any(line.startswith("the ledger's sent") for line in found), found

    def fewer_read(data: Path, run_id: str) -> None:
        path, result = result_of(data, run_id)
        result["load_totals"]["engine_counters"]["socket_received"] //= 2
        path.write_text(json.dumps(result))

    found = corrupted(run, fewer_read)
    assert any(line.startswith("the ledger's completed") for line in found), found

    def more_sent_in_the_store(db: sqlite3.Connection, run_id: str) -> None:
        sid, *times = load_rows(db, run_id)
        for field in ("sent", "lost", "due"):  # the window's own invariants still hold
            db.execute(
                "UPDATE samples SET num = num + 5 WHERE series_id = ? AND field = ?"
                " AND time_ns = ?",
                (sid, field, times[-3]),
            )

    found = corrupted(run, with_db(more_sent_in_the_store))
    assert any(line.startswith("the ledger's sent") for line in found), found
