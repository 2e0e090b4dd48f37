"""`soak status RUN` shows the run's bytes in the embedded store so far, as the store
tells them (SqliteStore.run_bytes): through the API (`?size=1`) and from the data
directory, for two runs that share one file."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from soak.sinks.sqlite import SqliteStore
from tests.support.api import AUTH, api_client, wait_status

pytestmark = pytest.mark.integration


def scenario(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "target": {"runtime": "external", "name": "pytest", "pid": os.getpid()},
        "phases": [{"name": "steady", "duration_s": 600}],
        "samplers": {"interval_s": 1},
    }


def samples_of(points_db: Path, run_id: str) -> int:
    """The run's samples, counted apart from the store's own reader."""
    with sqlite3.connect(points_db) as db:
        sql = "SELECT COUNT(*) FROM samples v JOIN series s ON s.id = v.series_id WHERE s.soak = ?"
        return int(db.execute(sql, (run_id,)).fetchone()[0])


def test_status_shows_each_runs_bytes_in_the_store(tmp_path: Path) -> None:
    data = tmp_path / "data"
    points_db = data / "points.db"
    with api_client(data) as client:
        ids = [
            client.post("/runs", json=scenario(n), headers=AUTH).json()["id"] for n in ("a", "b")
        ]
        for run_id in ids:
            wait_status(client, run_id, lambda s: s.get("latest", {}).get("process"))
        # Without ?size=1 (a view refreshed every second) nothing is counted.
        assert "store_bytes" not in client.get(f"/runs/{ids[0]}", headers=AUTH).json()
        for run_id in ids:
            client.post(f"/runs/{run_id}/stop", headers=AUTH)
            wait_status(client, run_id, lambda s: s["status"] == "stopped")
        sized = [client.get(f"/runs/{i}?size=1", headers=AUTH).json() for i in ids]
    store = SqliteStore(points_db)
    used = store.used_bytes()
    store.close()
    for run_id, status in zip(ids, sized, strict=True):
        assert status["store_samples"] == samples_of(points_db, run_id) > 0
        assert 0 < status["store_bytes"] < used
        assert status["store_path"] == str(points_db)
    # Two runs of one file: their shares add up to what the file holds.
    assert sum(s["store_bytes"] for s in sized) == pytest.approx(used, abs=2)
    argv = [sys.executable, "-m", "soak.cli", "status", ids[0], "--data-dir", str(data)]
    shown = subprocess.run(argv, capture_output=True, text=True, timeout=120).stdout
    (line,) = [ln for ln in shown.splitlines() if ln.strip().startswith("stored")]
    assert f"({sized[0]['store_samples']:,} samples) in {points_db}" in line, shown
