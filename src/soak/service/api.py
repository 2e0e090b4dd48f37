"""The control API (Starlette): submit, list, inspect, stop runs and fetch their reports.

Everything but /healthz needs `Authorization: Bearer <token>`: the service's own token
(an admin's) or a team's (service.tokens). A run belongs to the team whose token
submitted it; a team's token lists, reads and stops its team's runs only (another's is
403 and absent from the list), an admin's all. /metrics takes any valid token.
A scenario is posted as YAML or JSON; an invalid one is 422 with one error per
field path, the same lines `soak validate` prints.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from soak.config import InvalidModel, Scenario, parse_yaml, scenario_from_data
from soak.errors import InputError, not_utf8
from soak.preflight import check_scenario
from soak.results.reportinput import REPORT_MEDIA, report_text
from soak.runs.capture_dnstap import resolve_from_run
from soak.runs.timeline import scaled_scenario
from soak.service.auth import bearer
from soak.service.manager import RunManager, UnknownRun
from soak.service.tokens import SERVICE_TEAM, Principal, TokenStore
from soak.units import parse_duration_s
from soak.upgrade.insoak import swap_plans

Handler = Callable[[Request], Awaitable[Response]]


def parse_scenario(body: bytes, base_dir: str | None, duration: str | None) -> Scenario:
    """A scenario from a YAML or JSON body, read by the loader of `soak validate`
    (soak.config), so its errors are the same lines; raises InputError."""
    if base_dir and not Path(base_dir).is_absolute():
        raise InputError("base_dir must be an absolute path")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"body: {not_utf8(exc)}") from None
    base = Path(base_dir) if base_dir else Path.cwd()
    scenario = scenario_from_data(parse_yaml(text, "body"), "body", base)
    if duration:
        try:
            total_s = parse_duration_s(duration)
        except ValueError as exc:
            raise InputError(f"duration: {exc}") from exc
        scenario = scaled_scenario(scenario, total_s)
    swap_plans(scenario)  # the `upgrade:` section, as the gate reads it, as it will run
    return scenario


def input_errors(exc: InputError) -> list[dict[str, str]]:
    """A 422's errors: one per field of a scenario that does not fit its model (the
    lines `soak validate` prints, split at the path), else the one line."""
    if isinstance(exc, InvalidModel):
        return [{"path": path, "message": message} for path, message in exc.fields]
    return [{"path": "(body)", "message": str(exc)}]


class Forbidden(Exception):
    """A run of another team."""


def principal_of(header: str | None, service_token: str, tokens: TokenStore) -> Principal | None:
    """Who sends `header`: the service's own token (an admin), a team's token that is not
    revoked, else None."""
    given = bearer(header)
    if given is None:
        return None
    if secrets.compare_digest(given.encode(), service_token.encode()):
        return Principal(team=SERVICE_TEAM, admin=True, token_id="service")
    return tokens.lookup(given)


def create_app(manager: RunManager, token: str) -> Starlette:
    tokens = TokenStore(manager.data_dir.root)

    def authed(handler: Handler) -> Handler:
        async def wrapped(request: Request) -> Response:
            header = request.headers.get("authorization")
            principal = await run_in_threadpool(principal_of, header, token, tokens)
            if principal is None:
                return JSONResponse(
                    {"error": "missing, wrong or revoked bearer token"},
                    status_code=401,
                    headers={"WWW-Authenticate": "Bearer"},
                )
            request.state.principal = principal
            try:
                return await handler(request)
            except UnknownRun as exc:
                return JSONResponse({"error": str(exc)}, status_code=404)
            except Forbidden as exc:
                return JSONResponse({"error": str(exc)}, status_code=403)

        return wrapped

    def owned_run(request: Request) -> str:
        """The path's run id once the run exists (404) and is the principal's (403)."""
        run_id: str = request.path_params["run_id"]
        manager.get_record(run_id)
        principal: Principal = request.state.principal
        if not principal.may_see(tokens.owner(run_id)):
            raise Forbidden(f"run {run_id!r} is not team {principal.team!r}'s")
        return run_id

    async def healthz(request: Request) -> Response:
        return JSONResponse({"ok": True, "runs_active": len(manager.active_ids())})

    async def metrics(request: Request) -> Response:
        return Response(generate_latest(manager.registry), media_type=CONTENT_TYPE_LATEST)

    async def submit(request: Request) -> Response:
        body = await request.body()
        q = request.query_params
        try:
            scenario = parse_scenario(body, q.get("base_dir"), q.get("duration"))
            scenario = resolve_from_run(scenario, manager.data_dir)  # a run's capture
            # Every file it names read and parsed, its rates weighed: before a record.
            # The secrets are read here, by the service: an unset one says whose it is.
            await run_in_threadpool(partial(check_scenario, scenario, reader="soak serve"))
        except InputError as exc:
            return JSONResponse({"errors": input_errors(exc)}, status_code=422)
        record = await run_in_threadpool(manager.submit, scenario)
        await run_in_threadpool(tokens.set_owner, record.id, request.state.principal)
        return JSONResponse(
            {"id": record.id, "status": record.status, "url": f"/runs/{record.id}"},
            status_code=201,
        )

    async def list_runs(request: Request) -> Response:
        principal: Principal = request.state.principal
        runs = await run_in_threadpool(manager.list_status)
        owners = await run_in_threadpool(tokens.owners)
        for run in runs:
            run["team"] = owners.get(run["id"])
        return JSONResponse({"runs": [r for r in runs if principal.may_see(r["team"])]})

    async def get_run(request: Request) -> Response:
        run_id = await run_in_threadpool(owned_run, request)
        # ?size=1: the run's bytes in its store (a count of its samples; `soak status`)
        with_size = request.query_params.get("size") == "1"
        status = await run_in_threadpool(lambda: manager.status(run_id, with_size=with_size))
        return JSONResponse({**status, "team": await run_in_threadpool(tokens.owner, run_id)})

    async def stop_run(request: Request) -> Response:
        run_id = await run_in_threadpool(owned_run, request)
        record = await run_in_threadpool(manager.stop, run_id)
        body: dict[str, Any] = {"id": record.id, "status": record.status}
        body["stopping"] = record.active
        return JSONResponse(body, status_code=202 if record.active else 200)

    async def report(request: Request) -> Response:
        fmt = request.query_params.get("format", "html")
        if fmt not in REPORT_MEDIA:
            return JSONResponse({"error": "format is one of html, json, md"}, status_code=422)
        run_id = await run_in_threadpool(owned_run, request)
        record = await run_in_threadpool(manager.get_record, run_id)
        text = await run_in_threadpool(report_text, manager.data_dir, manager.state, record, fmt)
        return PlainTextResponse(text, media_type=REPORT_MEDIA[fmt])

    routes = [
        Route("/healthz", healthz, methods=["GET"]),
        Route("/metrics", authed(metrics), methods=["GET"]),
        Route("/runs", authed(submit), methods=["POST"]),
        Route("/runs", authed(list_runs), methods=["GET"]),
        Route("/runs/{run_id}", authed(get_run), methods=["GET"]),
        Route("/runs/{run_id}/stop", authed(stop_run), methods=["POST"]),
        Route("/runs/{run_id}/report", authed(report), methods=["GET"]),
    ]
    return Starlette(routes=routes)
