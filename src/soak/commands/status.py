"""`soak serve`, `soak start`, `soak status`, `soak list`, `soak stop`, `soak report`."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from soak.errors import CheckFailed, InputError, RunError
from soak.runs.layout import DataDir, default_root
from soak.runs.state import ACTIVE, RunStatus
from soak.service.client import Client, connect, default_server

data_dir_option = click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="The service's data directory (default $SOAK_HOME or ~/.local/share/soak).",
)
server_option = click.option(
    "--server", default=None, help="The service's URL (default $SOAK_SERVER or :8089)."
)


# Ctrl-C or SIGTERM of a foreground run, as a shell reports SIGINT.
EXIT_INTERRUPTED = 130


def _data_dir(value: Path | None) -> Path:
    return value if value is not None else default_root()


def _client(server: str | None, data_dir: Path | None) -> Client:
    return connect(server or default_server(), _data_dir(data_dir))


# ---------------------------------------------------------------- serve


@click.command("serve")
@click.option("--listen", default="127.0.0.1:8089", show_default=True, help="host:port")
@data_dir_option
def serve_cmd(listen: str, data_dir: Path | None) -> None:
    """Run the service: scheduler and HTTP control API; resumes running soaks."""
    import uvicorn

    from soak.netsafety import parse_host_port
    from soak.service.api import create_app
    from soak.service.auth import server_token
    from soak.service.manager import RunManager

    host, port = parse_host_port(listen, default_port=8089)
    ddir = _data_dir(data_dir)
    manager = RunManager(ddir)
    token = server_token(ddir)
    resumed = manager.start()
    click.echo(f"soak: serving on http://{host}:{port} (data {ddir})", err=True)
    if manager.leftovers is not None:
        click.echo(f"soak: {manager.leftovers}", err=True)
    for run_id in resumed:
        click.echo(f"soak: resumed {run_id}", err=True)
    config = uvicorn.Config(
        create_app(manager, token), host=host, port=port, log_level="warning", lifespan="off"
    )
    server = uvicorn.Server(config)
    try:
        server.run()
    finally:
        manager.shutdown(stop_runs=False)
    if not server.started:
        raise InputError(f"could not listen on {host}:{port}")


# ---------------------------------------------------------------- start


@click.command("start")
@click.argument("scenario_file", type=click.Path(path_type=Path))
@click.option("--foreground", is_flag=True, help="Run here with a live view instead of submitting.")
@click.option("--duration", default=None, help="Scale every phase so the run lasts this long.")
@click.option("--set", "overrides", multiple=True, help="key.path=value (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--wait",
    is_flag=True,
    help="Submit, then wait for the run's end and exit as --foreground would (0, 1, 2).",
)
@server_option
@data_dir_option
def start_cmd(
    scenario_file: Path,
    foreground: bool,
    duration: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
    wait: bool,
    server: str | None,
    data_dir: Path | None,
) -> None:
    """Submit a soak to the service, or run it here with --foreground."""
    from soak.config import load_scenario
    from soak.preflight import check_scenario
    from soak.runs.timeline import scaled_scenario
    from soak.units import parse_duration_s

    scenario = load_scenario(scenario_file, overrides)
    if duration is not None:
        try:
            total_s = parse_duration_s(duration)
        except ValueError as exc:
            raise InputError(f"--duration: {exc}") from exc
        scenario = scaled_scenario(scenario, total_s)
    # Every file it names, its rates: before anything starts. Secrets by reference are
    # read where the run runs (a service checks its own environment again on POST /runs).
    check_scenario(scenario, secrets=foreground)
    if foreground:
        from soak.service.foreground import run_foreground

        status = run_foreground(scenario, _data_dir(data_dir), as_json=as_json)
        _exit_for(status)
        return
    with _client(server, data_dir) as client:
        result = client.submit(scenario)
        if wait:
            click.echo(f"soak: run {result['id']}: submitted; waiting for its end", err=True)
            result = _wait_for_end(client, result["id"])
    if as_json:
        click.echo(json.dumps(result))
    elif wait:
        click.echo(f"{result['id']}")
        click.echo(f"result: {result.get('status')}: {result.get('message')}")
    else:
        click.echo(result["id"])
    if wait:
        _exit_for(result, said=f"run {result['id']} ended {result.get('status')}")


# How often `start --wait` asks the service; a run's end is seconds to days away.
WAIT_POLL_S = 1.0


def _wait_for_end(client: Client, run_id: str) -> dict[str, Any]:
    """The run's status once it has ended (a final status, its result and reports written)."""
    import time

    while True:
        status = client.status(run_id)
        if status.get("status") not in ACTIVE:
            return status
        time.sleep(WAIT_POLL_S)


def _exit_for(status: dict[str, Any], said: str | None = None) -> None:
    """The exit code of an ended run, the same wherever it is read (`start --foreground`,
    `start --wait`, `status RUN`): passed 0; failed 1; error 2 (a target that exited or
    never got ready, as docs/bad-input.md says); stopped 130, never 0. An active run: 0.
    `said`: the stderr line, when the run's message is printed already."""
    outcome = status.get("status")
    if outcome == RunStatus.PASSED or outcome in ACTIVE:
        return
    if outcome == RunStatus.FAILED:
        raise CheckFailed(said or status.get("message") or "a criterion failed")
    if outcome == RunStatus.STOPPED:
        click.echo(
            f"soak: {said or 'stopped'} before its end (the report covers what ran)", err=True
        )
        sys.exit(EXIT_INTERRUPTED)
    raise RunError(said or status.get("message") or f"run ended as {outcome}")


# ---------------------------------------------------------------- status, list, stop


def _local_manager_status(data_dir: Path, run_id: str | None) -> Any:
    """--data-dir: read the state store directly (runs done in the foreground)."""
    from soak.runs.state import StateStore
    from soak.runs.status import run_status

    layout = DataDir(data_dir)
    if not layout.state_db.exists():
        raise InputError(f"no soak state in {data_dir}")
    state = StateStore(layout.state_db)
    try:
        if run_id is None:
            return [run_status(r, None, state, brief=True) for r in state.list_runs()]
        record = state.get_run(run_id)
        if record is None:
            raise InputError(f"no run {run_id!r} in {data_dir}")
        points_db = layout.points_path(record.scenario, record.run_dir)
        return run_status(record, None, state, points_db=points_db)
    finally:
        state.close()


@click.command("status")
@click.argument("run_id", required=False)
@click.option("--json", "as_json", is_flag=True)
@server_option
@data_dir_option
def status_cmd(
    run_id: str | None, as_json: bool, server: str | None, data_dir: Path | None
) -> None:
    """A run's status (phase, time, rate, losses, verdicts); every active run without RUN."""
    from soak.service.live import criteria_lines, summary_rows, verdict_lines

    if data_dir is not None and server is None:
        result = _local_manager_status(data_dir, run_id)
    else:
        with _client(server, data_dir) as client:
            result = client.runs() if run_id is None else client.status(run_id)
    if isinstance(result, list):  # the active runs; the others are `soak list`'s
        ended = sum(1 for r in result if r["status"] not in ACTIVE)
        result = [r for r in result if r["status"] in ACTIVE]
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif isinstance(result, list):
        _print_runs(result, none=f"no active runs ({ended} ended: soak list shows them)")
    else:
        for label, text in summary_rows(result):
            click.echo(f"{label:>24}  {text}")
        for line in verdict_lines(result) + criteria_lines(result):
            click.echo(f"{'':>24}  {line}")
        if result.get("message"):
            click.echo(f"{'message':>24}  {result['message']}")
    if isinstance(result, dict):  # one run: the exit code says how it ended
        _exit_for(result, said=f"run {result.get('id')} ended {result.get('status')}")


def _print_runs(runs: list[dict[str, Any]], none: str = "no runs") -> None:
    if not runs:
        click.echo(none)
        return
    for r in runs:
        click.echo(
            f"{r['id']:<44} {r['status']:<8} {r.get('phase') or '-':<12} "
            f"{r.get('started') or '-':<26} {r.get('message') or ''}"
        )


@click.command("list")
@click.option("--json", "as_json", is_flag=True)
@server_option
@data_dir_option
def list_cmd(as_json: bool, server: str | None, data_dir: Path | None) -> None:
    """Every run the service knows, oldest first."""
    if data_dir is not None and server is None:
        runs = _local_manager_status(data_dir, None)
    else:
        with _client(server, data_dir) as client:
            runs = client.runs()
    if as_json:
        click.echo(json.dumps(runs, indent=2))
    else:
        _print_runs(runs)


@click.command("stop")
@click.argument("run_id")
@server_option
@data_dir_option
def stop_cmd(run_id: str, server: str | None, data_dir: Path | None) -> None:
    """Stop a run: its load and target stop, criteria are judged, the report is written."""
    with _client(server, data_dir) as client:
        result = client.stop(run_id)
    click.echo(f"{run_id}: {'stopping' if result.get('stopping') else result.get('status')}")


# ---------------------------------------------------------------- report


@click.command("report")
@click.argument("run_id")
@click.option("--format", "fmt", type=click.Choice(["html", "json", "md"]), default="html")
@click.option("-o", "--output", type=click.Path(path_type=Path), default=None)
@server_option
@data_dir_option
def report_cmd(
    run_id: str, fmt: str, output: Path | None, server: str | None, data_dir: Path | None
) -> None:
    """A run's report from the service, or from --data-dir for foreground runs."""
    if data_dir is not None and server is None:
        from soak.runs.reportinput import local_report_text

        text = local_report_text(DataDir(data_dir), run_id, fmt)
    else:
        with _client(server, data_dir) as client:
            text = client.report(run_id, fmt)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text)
    click.echo(f"{output}", err=True)


# ---------------------------------------------------------------- audit


@click.command("audit")
@click.argument("run_id")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    required=True,
    help="the data directory the run is in",
)
def audit_cmd(run_id: str, data_dir: Path) -> None:
    """Check a run's load figures (phases, classes, agents, criteria, result.json) against
    its ledger of one-second windows; exit 1 and one line per figure that disagrees."""
    from soak.runs.reportinput import local_audit

    found = local_audit(DataDir(data_dir), run_id)
    if found:
        for line in found:
            click.echo(f"disagrees: {line}")
        raise CheckFailed(f"{len(found)} load figure(s) disagree with the run's ledger")
    click.echo(f"{run_id}: every load figure agrees with the run's ledger")
