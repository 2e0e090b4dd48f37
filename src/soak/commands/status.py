"""`soak status`: a run's status, or every active run's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click

from soak.commands.options import data_dir_option, server_option, service_client
from soak.commands.outcome import exit_for
from soak.errors import InputError
from soak.runs.layout import DataDir
from soak.runs.state import ACTIVE


def local_status(data_dir: Path, run_id: str | None) -> Any:
    """--data-dir: read the state store directly (runs done in the foreground)."""
    from soak.results.status import run_status
    from soak.runs.state import StateStore

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
        return run_status(record, None, state, points_db=points_db, with_size=True)
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
        result = local_status(data_dir, run_id)
    else:
        with service_client(server, data_dir) as client:
            result = client.runs() if run_id is None else client.status(run_id, with_size=True)
    if isinstance(result, list):  # the active runs; the others are `soak list`'s
        ended = sum(1 for r in result if r["status"] not in ACTIVE)
        result = [r for r in result if r["status"] in ACTIVE]
    if as_json:
        click.echo(json.dumps(result, indent=2))
    elif isinstance(result, list):
        print_runs(result, none=f"no active runs ({ended} ended: soak list shows them)")
    else:
        for label, text in summary_rows(result):
            click.echo(f"{label:>24}  {text}")
        for line in verdict_lines(result) + criteria_lines(result):
            click.echo(f"{'':>24}  {line}")
        if result.get("message"):
            click.echo(f"{'message':>24}  {result['message']}")
    if isinstance(result, dict):  # one run: the exit code says how it ended
        exit_for(result, said=f"run {result.get('id')} ended {result.get('status')}")


def print_runs(runs: list[dict[str, Any]], none: str = "no runs") -> None:
    if not runs:
        click.echo(none)
        return
    for r in runs:
        owed = "".join(f" [owed to {s}: {n} points]" for s, n in r.get("owed", {}).items())
        click.echo(
            f"{r['id']:<44} {r['status']:<10} {r.get('phase') or '-':<12} "
            f"{r.get('started') or '-':<26} {r.get('message') or ''}{owed}"
        )
