"""The CLI's side of the control API: one httpx client with the bearer token."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import httpx

from soak.config import Scenario
from soak.errors import InputError, SoakError

DEFAULT_SERVER = "http://127.0.0.1:8089"
SERVER_ENV = "SOAK_SERVER"


class ApiError(SoakError):
    """The service answered with an error (its message is shown as is)."""


def default_server() -> str:
    return os.environ.get(SERVER_ENV, DEFAULT_SERVER)


class Client:
    def __init__(self, server: str, token: str, *, timeout_s: float = 30.0) -> None:
        self.server = server.rstrip("/")
        self._http = httpx.Client(
            base_url=self.server,
            headers={"Authorization": f"Bearer {token}"},
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self._http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise InputError(f"cannot reach the service at {self.server}: {exc}") from exc
        if response.status_code == 401:
            raise InputError(f"{self.server}: the token was refused (set SOAK_TOKEN)")
        if response.status_code in (403, 404):
            raise InputError(_message(response))
        if response.status_code == 422:
            raise InputError(_message(response))
        if response.status_code >= 400:
            raise ApiError(f"{self.server}: HTTP {response.status_code}: {_message(response)}")
        return response

    def submit(self, scenario: Scenario) -> dict[str, Any]:
        body = scenario.model_dump_json().encode()
        params = {"base_dir": str(scenario.base_dir)}
        headers = {"Content-Type": "application/json"}
        result: dict[str, Any] = self._request(
            "POST", "/runs", content=body, params=params, headers=headers
        ).json()
        return result

    def runs(self) -> list[dict[str, Any]]:
        runs: list[dict[str, Any]] = self._request("GET", "/runs").json()["runs"]
        return runs

    def status(self, run_id: str, *, with_size: bool = False) -> dict[str, Any]:
        """`with_size`: with the run's bytes in its store (counted at each request)."""
        params = {"size": "1"} if with_size else None
        result: dict[str, Any] = self._request("GET", f"/runs/{run_id}", params=params).json()
        return result

    def stop(self, run_id: str) -> dict[str, Any]:
        result: dict[str, Any] = self._request("POST", f"/runs/{run_id}/stop").json()
        return result

    def report(self, run_id: str, fmt: str) -> str:
        return self._request("GET", f"/runs/{run_id}/report", params={"format": fmt}).text


def _message(response: httpx.Response) -> str:
    try:
        data = response.json()
    except ValueError:
        return response.text.strip()[:300]
    if isinstance(data, dict) and "errors" in data:
        return "; ".join(
            str(e.get("message"))
            if e.get("path") == "(body)"
            else f"{e.get('path')}: {e.get('message')}"
            for e in data["errors"]
        )
    if isinstance(data, dict) and "error" in data:
        return str(data["error"])
    return str(data)[:300]


def token_for(data_dir: Path) -> str:
    from soak.service.auth import client_token

    return client_token(data_dir)


def connect(server: str, data_dir: Path) -> Client:
    """A client with the token; a service that does not answer is said first, since
    without it a missing token is not the problem."""
    try:
        token = token_for(data_dir)
    except InputError:
        check_reachable(server)
        raise
    return Client(server, token)


def check_reachable(server: str, *, timeout_s: float = 5.0) -> None:
    """InputError "cannot reach the service at URL" unless GET /healthz gets an answer."""
    url = server.rstrip("/")
    try:
        httpx.get(f"{url}/healthz", timeout=timeout_s)
    except httpx.HTTPError as exc:
        raise InputError(f"cannot reach the service at {url}: {exc}") from exc
