"""The control API in-process: the token, bad scenarios (422 with field paths), lookups."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from tests.support.api import AUTH, api_client

pytestmark = pytest.mark.integration


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    with api_client(tmp_path / "data", stop_runs=False) as c:
        yield c


def test_health_needs_no_token_metrics_do(client: TestClient) -> None:
    assert client.get("/healthz").json() == {"ok": True, "runs_active": 0}
    assert client.get("/metrics").status_code == 401
    metrics = client.get("/metrics", headers=AUTH)
    assert metrics.status_code == 200
    assert "soak_ticks_total" in metrics.text


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/metrics"),
        ("GET", "/runs"),
        ("POST", "/runs"),
        ("GET", "/runs/x"),
        ("POST", "/runs/x/stop"),
        ("GET", "/runs/x/report"),
    ],
)
def test_everything_else_is_401_without_the_token(
    client: TestClient, method: str, path: str
) -> None:
    assert client.request(method, path).status_code == 401
    wrong = {"Authorization": "Bearer nope"}
    assert client.request(method, path, headers=wrong).status_code == 401


def test_bad_scenario_is_422_with_field_paths(client: TestClient) -> None:
    body = "name: t\ntarget: {runtime: process, argv: []}\nphases: [{name: a}]\nextra: 1\n"
    r = client.post("/runs", content=body, headers=AUTH)
    assert r.status_code == 422
    paths = {e["path"] for e in r.json()["errors"]}
    assert {"target.process.argv", "phases.0.duration_s", "extra"} <= paths
    r = client.post("/runs", content="{not yaml", headers=AUTH)
    assert r.status_code == 422
    assert r.json()["errors"][0]["path"] == "(body)"


def test_bad_bytes_and_bad_files_are_422_before_a_record(
    client: TestClient, tmp_path: Path
) -> None:
    r = client.post("/runs", content=b"name: t\n\xff\n", headers=AUTH)
    assert r.status_code == 422
    assert r.json()["errors"][0]["message"] == "body: not UTF-8 text (byte 0xff at offset 8)"
    (tmp_path / "q.txt").write_text("www.example.test A\nexample.test A extra\n")
    body = (
        "name: t\ntarget: {runtime: process, argv: [sleep, '600'], ports: {dns: {}}}\n"
        "load: {rate_qps: 10, mix: [{name: q, file: q.txt}]}\n"
        "phases: [{name: a, duration_s: 10s}]\n"
    )
    r = client.post("/runs", params={"base_dir": str(tmp_path)}, content=body, headers=AUTH)
    assert r.status_code == 422
    assert "q.txt line 2: malformed query line" in r.json()["errors"][0]["message"]
    assert client.get("/runs", headers=AUTH).json() == {"runs": []}  # no record, no start


def test_unknown_run_is_404_and_list_is_empty(client: TestClient) -> None:
    assert client.get("/runs", headers=AUTH).json() == {"runs": []}
    assert client.get("/runs/nope", headers=AUTH).status_code == 404
    assert client.post("/runs/nope/stop", headers=AUTH).status_code == 404
    assert client.get("/runs/nope/report?format=xml", headers=AUTH).status_code == 422


def test_a_missing_binary_is_422_before_a_record(client: TestClient) -> None:
    body = (
        "name: broken\n"
        "target: {runtime: process, argv: [/nonexistent/server], ports: {dns: {}}}\n"
        "phases: [{name: a, duration_s: 10s}]\n"
    )
    r = client.post("/runs", content=body, headers=AUTH)
    assert r.status_code == 422
    message = r.json()["errors"][0]["message"]
    assert message == "target: binary not found or not executable: /nonexistent/server"
    assert client.get("/runs", headers=AUTH).json() == {"runs": []}


def test_a_target_that_exits_after_the_preflight_ends_as_error(client: TestClient) -> None:
    body = (
        "name: broken\n"
        "target: {runtime: process, argv: [sh, -c, 'echo no config; exit 3'], ports: {dns: {}},"
        " ready: {probes: [{kind: tcp, port: dns}], timeout_s: 20s}}\n"
        "phases: [{name: a, duration_s: 10s}]\n"
    )
    r = client.post("/runs", content=body, headers=AUTH)
    assert r.status_code == 201
    run_id = r.json()["id"]
    status = {}
    deadline_s = time.monotonic() + 60.0  # a loaded machine: wait for the state, not a count
    while time.monotonic() < deadline_s:
        status = client.get(f"/runs/{run_id}", headers=AUTH).json()
        if status["status"] == "error":
            break
        time.sleep(0.1)
    assert status["status"] == "error"
    assert "exit" in status["message"], status["message"]
    assert any(e["kind"] == "error" for e in status["events"])
