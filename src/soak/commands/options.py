"""What the commands of the service share: --data-dir, --server, and the client they make."""

from __future__ import annotations

from pathlib import Path

import click

from soak.runs.layout import default_root
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


def data_dir_or_default(value: Path | None) -> Path:
    return value if value is not None else default_root()


def service_client(server: str | None, data_dir: Path | None) -> Client:
    return connect(server or default_server(), data_dir_or_default(data_dir))
