"""The service's control API in-process: a RunManager on a data directory behind a
Starlette test client, and waiting for a run's status."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from starlette.testclient import TestClient

from soak.service.api import create_app
from soak.service.manager import RunManager

TOKEN = "test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@contextmanager
def api_client(data: Path, *, stop_runs: bool = True) -> Iterator[TestClient]:
    """The API on a fresh manager; at the end its runs are stopped (or, without
    `stop_runs`, detached as at a service exit)."""
    manager = RunManager(data)
    manager.start(resume=False)
    try:
        with TestClient(create_app(manager, TOKEN)) as c:
            yield c
    finally:
        manager.shutdown(stop_runs=stop_runs)


def wait_status(
    client: TestClient, run_id: str, until: Callable[[dict[str, Any]], Any], timeout_s: float = 30
) -> dict[str, Any]:
    """The run's status once `until(status)` holds; AssertionError after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    status: dict[str, Any] = {}
    while time.monotonic() < deadline:
        status = client.get(f"/runs/{run_id}", headers=AUTH).json()
        if until(status):
            return status
        time.sleep(0.2)
    raise AssertionError(f"timed out; last status {status}")
