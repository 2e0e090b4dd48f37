"""`soak stop`: stop a run of the service."""

from __future__ import annotations

from pathlib import Path

import click

from soak.commands.options import data_dir_option, server_option, service_client


@click.command("stop")
@click.argument("run_id")
@server_option
@data_dir_option
def stop_cmd(run_id: str, server: str | None, data_dir: Path | None) -> None:
    """Stop a run: its load and target stop, criteria are judged, the report is written."""
    with service_client(server, data_dir) as client:
        result = client.stop(run_id)
    click.echo(f"{run_id}: {'stopping' if result.get('stopping') else result.get('status')}")
