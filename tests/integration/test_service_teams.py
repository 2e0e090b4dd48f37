"""Runs that belong to someone: a team's token sees, reads and stops its team's runs
only; an admin's all; a revoked token is refused; /metrics takes a token."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from starlette.testclient import TestClient

from soak.service.tokens import TokenStore
from tests.support.api import AUTH, api_client, wait_status

pytestmark = pytest.mark.integration

# A run that exists at once and ends by itself (its target exits): no process is left.
SCENARIO = (
    "name: {name}\n"
    "target: {{runtime: process, argv: [sh, -c, 'exit 3'], ports: {{dns: {{}}}},"
    " ready: {{probes: [{{kind: tcp, port: dns}}], timeout_s: 20s}}}}\n"
    "phases: [{{name: a, duration_s: 10s}}]\n"
)


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def data(tmp_path: Path) -> Path:
    return tmp_path / "data"


@pytest.fixture
def client(data: Path) -> Iterator[TestClient]:
    with api_client(data, stop_runs=False) as c:
        yield c


def submit(client: TestClient, headers: dict[str, str], name: str) -> str:
    r = client.post("/runs", content=SCENARIO.format(name=name), headers=headers)
    assert r.status_code == 201, r.text
    run_id: str = r.json()["id"]
    wait_status(client, run_id, lambda s: s["status"] == "error", timeout_s=60)
    return run_id


def listed(client: TestClient, headers: dict[str, str]) -> dict[str, str | None]:
    r = client.get("/runs", headers=headers)
    assert r.status_code == 200
    return {run["id"]: run["team"] for run in r.json()["runs"]}


def test_a_team_sees_and_stops_its_own_runs_only(client: TestClient, data: Path) -> None:
    store = TokenStore(data)
    dns = bearer(store.create("dns-core")[1])
    web = bearer(store.create("web")[1])
    admin = bearer(store.create("platform", admin=True)[1])
    mine = submit(client, dns, "mine")
    theirs = submit(client, web, "theirs")
    legacy = submit(client, AUTH, "legacy")  # the service's own token: team admin

    assert listed(client, dns) == {mine: "dns-core"}
    assert listed(client, web) == {theirs: "web"}
    everyone = {mine: "dns-core", theirs: "web", legacy: "admin"}
    assert listed(client, admin) == everyone
    assert listed(client, AUTH) == everyone

    assert client.get(f"/runs/{mine}", headers=dns).json()["team"] == "dns-core"
    for path in (f"/runs/{theirs}", f"/runs/{theirs}/report?format=json"):
        r = client.get(path, headers=dns)
        assert r.status_code == 403, path
        assert r.json() == {"error": f"run {theirs!r} is not team 'dns-core''s"}
    assert client.post(f"/runs/{theirs}/stop", headers=dns).status_code == 403
    assert client.post(f"/runs/{legacy}/stop", headers=web).status_code == 403
    assert client.post(f"/runs/{mine}/stop", headers=dns).status_code == 200
    assert client.get("/runs/nope", headers=dns).status_code == 404  # no such run: 404
    for headers in (admin, AUTH):
        for run_id in everyone:
            assert client.get(f"/runs/{run_id}", headers=headers).status_code == 200


def test_a_revoked_token_is_refused_at_once(client: TestClient, data: Path) -> None:
    store = TokenStore(data)
    token_id, token = store.create("dns-core")
    assert client.get("/runs", headers=bearer(token)).status_code == 200
    store.revoke(token_id)
    r = client.get("/runs", headers=bearer(token))
    assert r.status_code == 401
    assert r.json() == {"error": "missing, wrong or revoked bearer token"}
    assert client.get("/metrics", headers=bearer(token)).status_code == 401
    listing = store.list()
    assert [(t["id"], t["team"], t["admin"]) for t in listing] == [(token_id, "dns-core", False)]
    assert listing[0]["revoked_ns"] is not None
    assert token not in data.joinpath("tokens.db").read_bytes().decode("latin-1")


def test_metrics_take_any_valid_token(client: TestClient, data: Path) -> None:
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=bearer("nope")).status_code == 401
    team = bearer(TokenStore(data).create("web")[1])
    for headers in (team, AUTH):
        r = client.get("/metrics", headers=headers)
        assert r.status_code == 200
        assert "soak_ticks_total" in r.text
