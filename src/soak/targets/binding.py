"""Wiring a run's parts together: helper services' ports into the target, setup calls.

`{service.<name>.port.<port>}` in the target's config (argv, env, files,
command, environment) is replaced by the helper's host port once the helper
has started: a recursor forwarding to its dnsmasq upstream. The target's own
placeholders (`{port.dns}`, `{data_dir}`) are left for the target to fill.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import httpx

from soak.errors import InputError, TargetStartError
from soak.placeholders import fill_services, reveal_json, reveal_map, services_named
from soak.targets.base import Running
from soak.targets.specs import SetupCall, TargetConfig


def _walk(node: Any, services: dict[str, Running], where: str) -> Any:
    if isinstance(node, str):
        return fill_services(node, services, where)
    if isinstance(node, list):
        return [_walk(item, services, f"{where}.{i}") for i, item in enumerate(node)]
    if isinstance(node, dict):
        return {k: _walk(v, services, f"{where}.{k}") for k, v in node.items()}
    return node


def bind_services(cfg: TargetConfig, services: dict[str, Running]) -> TargetConfig:
    """A copy of `cfg` with every `{service.NAME.port.P}` filled; unchanged if none."""
    data = cfg.model_dump(mode="json")
    filled = _walk(data, services, cfg.name)
    if filled == data:
        return cfg
    return type(cfg).model_validate(filled)


def uses_services(cfg: TargetConfig) -> bool:
    return bool(services_named(cfg.model_dump_json()))


def run_setup(
    calls: list[SetupCall],
    running: Running,
    *,
    first_start: bool,
    client: httpx.Client | None = None,
    base_dir: Path | None = None,
) -> list[str]:
    """Send the setup calls to a ready target; one line per call; TargetStartError if one fails."""
    lines = []
    own = client is None
    http = client if client is not None else httpx.Client()
    try:
        for i, call in enumerate(calls):
            if not first_start and not call.every_start:
                continue
            lines.append(_one_call(http, call, running, f"setup.{i}", base_dir))
    finally:
        if own:
            http.close()
    return lines


def _one_call(
    http: httpx.Client, call: SetupCall, running: Running, where: str, base_dir: Path | None
) -> str:
    if call.port not in running.ports:
        raise InputError(f"{where}: the target has no port {call.port!r}")
    host, port = running.address(call.port)
    url = f"http://{host}:{port}{call.path}"
    started_s = time.monotonic()
    try:
        response = http.request(
            call.method,
            url,
            headers=reveal_map(call.headers, base_dir, f"{where}.headers"),
            json=reveal_json(call.body, base_dir, f"{where}.body"),
            timeout=call.timeout_s,
        )
    except httpx.HTTPError as exc:
        raise TargetStartError(f"{where}: {call.method} {call.path}: {exc}") from exc
    took_ms = (time.monotonic() - started_s) * 1000
    if response.status_code not in call.status:
        text = response.text.strip().replace("\n", " ")[:200]
        raise TargetStartError(
            f"{where}: {call.method} {call.path} answered {response.status_code}: {text}"
        )
    return f"{call.method} {call.path}: {response.status_code} in {took_ms:.0f} ms"
