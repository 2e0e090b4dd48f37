"""The `http` sampler: timed calls to the target's API, one `api` point per endpoint."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import httpx

from soak.errors import InputError
from soak.placeholders import reveal
from soak.points import Point, event_point
from soak.probes import http_request
from soak.samplers.base import ItemsSampler
from soak.samplers.selection import HttpCallConfig
from soak.targets.base import Running


def endpoint_name(call: HttpCallConfig) -> str:
    return call.endpoint or f"{call.method.upper()} {call.path}"


def call_headers(
    call: HttpCallConfig, environ: dict[str, str], base_dir: Path | None = None
) -> dict[str, str]:
    """The call's headers with its token and their secrets (`{env.NAME}`, `{file:PATH}`)
    revealed (read once, when the sampler is built; kept in memory only)."""
    where = f"samplers.http {endpoint_name(call)}"
    headers = {
        k: reveal(v, base_dir, f"{where}.headers.{k}", environ) for k, v in call.headers.items()
    }
    if call.token_env is not None:
        token = environ.get(call.token_env)
        if token is None:
            raise InputError(
                f"samplers.http {endpoint_name(call)}: environment variable {call.token_env}"
                " is not set"
            )
        is_bearer = call.token_header.lower() == "authorization"
        headers[call.token_header] = f"Bearer {token}" if is_bearer else token
    return headers


_Call = tuple[HttpCallConfig, str, dict[str, str]]


class HttpSampler(ItemsSampler[_Call]):
    def __init__(
        self,
        calls: list[HttpCallConfig],
        target: Callable[[], Running | None],
        *,
        client: httpx.Client | None = None,
        environ: dict[str, str] | None = None,
        name: str = "http",
        base_dir: Path | None = None,
    ) -> None:
        self.name = name
        env = dict(os.environ) if environ is None else environ
        # (call, its endpoint name, its headers with the token)
        self.items = [(c, endpoint_name(c), call_headers(c, env, base_dir)) for c in calls]
        self.target = target
        self.client = client

    def ask(self, running: Running, item: _Call, tick_time_ns: int) -> list[Point]:
        call, endpoint, headers = item
        if call.port not in running.ports:
            raise RuntimeError(f"{endpoint}: the target has no port named {call.port!r}")
        host, port = running.address(call.port)
        host = f"[{host}]" if ":" in host else host
        result = http_request(
            call.method.upper(),
            f"http://{host}:{port}{call.path}",
            headers=headers,
            timeout_s=call.timeout_s,
            client=self.client,
        )
        ok = result.status == call.status
        fields = {
            "latency_ms": result.latency_ms,
            "status": float(result.status or 0),  # 0: no response
            "bytes": float(result.bytes),
            "ok": 1.0 if ok else 0.0,
        }
        points = [Point("api", dict(fields), tick_time_ns, {"endpoint": endpoint})]
        if result.error is not None:
            message = f"{endpoint}: {result.error}"
            points.append(event_point("api_error", message, tick_time_ns))
        return points
