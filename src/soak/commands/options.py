"""What the commands share: --data-dir, --server, the client they make, `--json -`."""

from __future__ import annotations

import contextlib
import sys
import tempfile
from collections.abc import Iterator
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


STDOUT = Path("-")


@contextlib.contextmanager
def json_on_stdout(path: Path | None) -> Iterator[Path | None]:
    """`--json PATH` as the command writes it; `--json -` is stdout, as the Unix tools
    read it: the command writes a temporary file, its progress lines go to stderr (so
    that stdout is one JSON document), and the document is printed at the end, whatever
    way the command ends (a failed check, an interruption: it is written then too)."""
    if path != STDOUT:
        yield path
        return
    stdout = sys.stdout
    with tempfile.TemporaryDirectory(prefix="soak-json-") as tmp:
        written = Path(tmp) / "result.json"
        try:
            with contextlib.redirect_stdout(sys.stderr):
                yield written
        finally:
            if written.exists():
                stdout.write(written.read_text(encoding="utf-8"))
                stdout.flush()
