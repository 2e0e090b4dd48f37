"""/metrics of a service that runs for months: a run's series (its leak verdict that an
alert fires on) leave when the run ends, without a restart; its outcome stays as a
count with no run id; a live run's scenario labels (its team) are on soak_run_info."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from tests.support.api import AUTH, api_client, wait_status
from tests.support.leaky import leaky_target
from tests.support.waiting import wait_for

pytestmark = pytest.mark.integration


def leaky_scenario() -> dict[str, Any]:
    return {
        "name": "leaky",
        "target": leaky_target("leaky", "--kib-per-s", "1024"),
        "phases": [
            {"name": "warmup", "duration_s": "2s", "warmup": True},
            {"name": "steady", "duration_s": "600s"},
        ],
        "samplers": {"interval_s": 1, "load": False},
        "leaks": {
            "window_s": "2s",
            "min_windows": 4,
            "interval_s": "2s",
            "startup_max_s": 0,
            "thresholds": {"rss_anon_bytes": "100MiB/h"},
        },
        "alerting": {"labels": {"team": "dns-core"}},
    }


def samples(client: TestClient) -> list[tuple[str, dict[str, str], float]]:
    text = client.get("/metrics", headers=AUTH).text
    return [
        (s.name, s.labels, s.value)
        for family in text_string_to_metric_families(text)
        for s in family.samples
    ]


def of_run(client: TestClient, run_id: str) -> list[tuple[str, dict[str, str], float]]:
    return [s for s in samples(client) if s[1].get("soak") == run_id]


def test_a_growing_verdict_leaves_metrics_when_its_run_ends(tmp_path: Path) -> None:
    with api_client(tmp_path / "data") as client:
        run_id = client.post("/runs", json=leaky_scenario(), headers=AUTH).json()["id"]
        growing = ("soak_leak_verdict", {"soak": run_id, "resource": "rss_anon_bytes"})

        def verdict_growing() -> bool:
            return any(
                name == growing[0] and labels == {**growing[1], "verdict": "growing"} and v == 1
                for name, labels, v in samples(client)
            )

        wait_for(verdict_growing, 60.0, "the leak verdict says growing on /metrics")
        live = of_run(client, run_id)
        info = [labels for name, labels, _ in live if name == "soak_run_info"]
        assert info == [{"soak": run_id, "scenario": "leaky", "team": "dns-core"}]
        assert any(name.startswith("soak_sampler_duration_seconds") for name, _, _ in live)
        assert any(name.startswith("soak_spool_depth_points") for name, _, _ in live)
        client.post(f"/runs/{run_id}/stop", headers=AUTH)
        wait_status(client, run_id, lambda s: s["status"] == "stopped")
        # Gone with the run's end (no restart, no expiry), which follows its status.
        wait_for(lambda: of_run(client, run_id) == [], 10.0, "no series of the ended run")
        ended = [(n, lb, v) for n, lb, v in samples(client) if n == "soak_runs_ended_total"]
        assert ended == [("soak_runs_ended_total", {"outcome": "stopped"}, 1.0)]
