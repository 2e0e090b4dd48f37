"""Each phase's latency over its merged window histograms reaches the sinks as `latency`
points while the run goes, at the first tick after the phase's windows are all stored,
and is the figure of the run's report (its Phases table): one estimator for both."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from soak.sinks.sqlite import SqliteStore
from tests.support.api import AUTH, api_client, wait_status
from tests.support.servers import unbound
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def scenario(port: int) -> dict[str, Any]:
    return {
        "name": "phase-latency",
        "target": {
            "runtime": "external",
            "name": "unbound",
            "ports": {"dns": {"host": port, "protocol": "both"}},
        },
        "phases": [
            {"name": "warm", "duration_s": 3, "rate_qps": 100, "warmup": True},
            {"name": "steady", "duration_s": 600, "rate_qps": 200},
        ],
        "samplers": {"interval_s": 1},
        "load": {"workers": 1, "mix": [{"name": "hit", "queries": ["www.example.test A"]}]},
    }


def p99s(store: SqliteStore, run_id: str) -> dict[tuple[str, str], float]:
    """(phase, class) -> the p99 of its `latency` point."""
    return {
        (tags["phase"], tags["class"]): float(values[-1][1])
        for tags, values in store.series(run_id, "latency", "lat_p99_ms")
    }


def test_a_phase_latency_is_written_at_its_end_and_is_the_reports(tmp_path: Path) -> None:
    data = tmp_path / "data"
    (tmp_path / "unbound").mkdir()
    with unbound(tmp_path / "unbound") as server, api_client(data) as client:
        run_id = client.post("/runs", json=scenario(server.port), headers=AUTH).json()["id"]
        store = SqliteStore(data / "points.db")
        try:
            # The warm-up's figure while the run goes, long before its end.
            live = wait_for(lambda: p99s(store, run_id), 60.0, "the warm-up's latency point")
            assert set(live) == {("warm", "all"), ("warm", "hit")}
            assert wait_status(client, run_id, lambda s: s["status"] == "running")
            client.post(f"/runs/{run_id}/stop", headers=AUTH)
            ended = wait_status(client, run_id, lambda s: s["status"] == "stopped", 60)
            final = p99s(store, run_id)
        finally:
            store.close()
    report = json.loads(Path(ended["reports"]["json"]).read_text())
    shown = {row["name"]: row["metrics"]["lat_p99_ms"]["p99"] for row in report["phases"]}
    assert {phase: final[(phase, "all")] for phase in ("warm", "steady")} == shown
    assert final[("warm", "all")] == live[("warm", "all")]  # written again, unchanged
