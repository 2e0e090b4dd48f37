"""`soak load --replay FILE`: a capture replayed as the load, by the registered plan
`replay` (soak.plans.replay)."""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from soak.commands.capture import duration_flag
from soak.errors import InputError
from soak.traffic.replay_config import ReplayConfig


def replay_config(
    fields: dict[str, Any], protocol: str | None, zones: tuple[str, ...]
) -> ReplayConfig:
    data = {k: v for k, v in fields.items() if v is not None}
    if protocol is not None:
        data["transport"] = protocol
    if zones:
        data["rewrite"] = {"zones": list(zones)}
    try:
        return ReplayConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"]) or "replay"
        raise InputError(f"--replay: {where}: {err['msg']}") from None


def replay_cmd(
    server: tuple[str, int],
    fields: dict[str, Any],
    protocol: str | None,
    zones: tuple[str, ...],
    run: tuple[str | None, float | None, int | None],
    as_json: bool,
    workers: int | None = None,
) -> None:
    """Checks everything (the capture included) before the first query; exit 1 if
    nothing was answered. `workers`: processes the clients are split across."""
    duration, timeout, seed = run
    cfg = replay_config(fields, protocol, zones)
    duration_s = None if duration is None else duration_flag(duration)
    if timeout is not None and timeout <= 0:
        raise InputError(f"--timeout must be positive: {timeout:g}")
    if workers is not None and workers < 1:
        raise InputError(f"--workers must be at least 1: {workers}")
    replay_and_print(cfg, server, duration_s, timeout or 2.0, seed or 0, as_json, workers or 1)


def replay_and_print(
    cfg: ReplayConfig,
    server: tuple[str, int],
    duration_s: float | None,
    timeout_s: float,
    seed: int,
    as_json: bool,
    workers: int = 1,
) -> None:
    """The replay plan (soak.plans.replay) run by the engine: its summary printed, exit 1
    if nothing was answered, 130/143 on SIGINT/SIGTERM."""
    from soak.plans.engine import make_plan, run_plan

    plan = make_plan(
        "replay", cfg, server, duration_s, timeout_s, seed, as_json=as_json, workers=workers
    )
    run_plan(plan)
