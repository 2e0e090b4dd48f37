"""`soak serve`: the service, its scheduler and HTTP control API."""

from __future__ import annotations

from pathlib import Path

import click

from soak.commands.options import data_dir_option, data_dir_or_default
from soak.errors import InputError


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
    ddir = data_dir_or_default(data_dir)
    manager = RunManager(ddir)
    token = server_token(ddir)
    resumed = manager.start()
    click.echo(f"soak: serving on http://{host}:{port} (data {ddir})", err=True)
    for line in manager.leftovers:
        click.echo(f"soak: {line}", err=True)
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
