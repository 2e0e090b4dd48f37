"""`soak list`: every run the service (or a data directory) knows."""

from __future__ import annotations

import json
from pathlib import Path

import click

from soak.commands.options import data_dir_option, server_option, service_client
from soak.commands.status import local_status, print_runs


@click.command("list")
@click.option("--json", "as_json", is_flag=True)
@server_option
@data_dir_option
def list_cmd(as_json: bool, server: str | None, data_dir: Path | None) -> None:
    """Every run the service knows, oldest first."""
    if data_dir is not None and server is None:
        runs = local_status(data_dir, None)
    else:
        with service_client(server, data_dir) as client:
            runs = client.runs()
    if as_json:
        click.echo(json.dumps(runs, indent=2))
    else:
        print_runs(runs)
