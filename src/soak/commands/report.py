"""`soak report`: a run's report, from the service or a data directory."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from soak.commands.options import data_dir_option, server_option, service_client
from soak.runs.layout import DataDir


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
        from soak.results.reportinput import local_report_text

        text = local_report_text(DataDir(data_dir), run_id, fmt)
    else:
        with service_client(server, data_dir) as client:
            text = client.report(run_id, fmt)
    if output is None:
        sys.stdout.write(text)
        return
    output.write_text(text)
    click.echo(f"{output}", err=True)
