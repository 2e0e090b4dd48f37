"""A real soak of the hardened pdns-server image (read_only, cap_drop ALL, a fresh named
volume, ports on 127.0.0.1): it is sampled through the container's host PID, and the
run's container and its fresh volume are gone when the run ends."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from soak.sinks.sqlite import SqliteStore
from tests.e2e.soakrun import ROOT, soak_passes
from tests.support.ledger import assert_figures_agree
from tests.support.skips import docker_engine_fixture

pytestmark = [pytest.mark.e2e, pytest.mark.docker]

SCENARIO = ROOT / "scenarios" / "pdns-auth-docker.yaml"
IMAGE = "soak-test/pdns-auth"


engine = docker_engine_fixture([IMAGE])


def test_docker_soak_samples_the_container_and_leaves_nothing(engine: Any, tmp_path: Path) -> None:
    data = tmp_path / "data"
    status = soak_passes(
        SCENARIO, data, "30s",
        "--set", "samplers.interval_s=1",
        # Latency limits are for a quiet machine; the tests share two busy cores.
        "--set", "criteria.p99_ms_max={all: 1000}",
        "--set", "criteria.leaks_ok=false",
    )  # fmt: skip
    run_id = status["id"]
    assert_figures_agree(data, run_id)

    store = SqliteStore(data / "points.db")
    try:
        rss = store.series(run_id, "process", "rss_anon_bytes")
        assert rss and all(v > 0 for _, v in rss[0][1])
        assert store.series(run_id, "api", "latency_ms")
    finally:
        store.close()

    label = f"soak.run={run_id}"
    assert engine.containers.list(all=True, filters={"label": label}, ignore_removed=True) == []
    assert engine.volumes.list(filters={"label": label}) == []
