"""The `soak` command: thin. It parses the command line and maps every SoakError to
one line on stderr and its exit code; each subcommand is a module of soak.commands."""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import click

from soak.commands.agent import agent_cmd
from soak.commands.audit import audit_cmd
from soak.commands.bench import bench_cmd
from soak.commands.capture import capture_cmd
from soak.commands.compare import compare_cmd
from soak.commands.list import list_cmd
from soak.commands.load import load_cmd
from soak.commands.prune import prune_cmd
from soak.commands.report import report_cmd
from soak.commands.sampler_agent import sampler_agent_cmd
from soak.commands.serve import serve_cmd
from soak.commands.start import start_cmd
from soak.commands.status import status_cmd
from soak.commands.stop import stop_cmd
from soak.commands.token import token_cmd
from soak.commands.upgrade import upgrade_cmd
from soak.commands.validate import validate_cmd
from soak.errors import EXIT_INTERNAL, SoakError

COMMANDS: list[click.Command] = [
    agent_cmd,
    audit_cmd,
    bench_cmd,
    capture_cmd,
    compare_cmd,
    list_cmd,
    load_cmd,
    prune_cmd,
    report_cmd,
    sampler_agent_cmd,
    serve_cmd,
    start_cmd,
    status_cmd,
    stop_cmd,
    token_cmd,
    upgrade_cmd,
    validate_cmd,
]


@click.group(commands=COMMANDS)
@click.version_option(package_name="soak")
def cli() -> None:
    """Soak, load and upgrade tests for DNS servers."""


PRIVATE_UMASK = 0o077  # the data directory's files and directories: 0600 and 0700


def main(argv: list[str] | None = None) -> Any:
    # What soak writes (state, points, reports, logs, rendered configs) is its user's only;
    # a target it starts inherits this too.
    os.umask(PRIVATE_UMASK)
    try:
        return cli.main(args=argv, prog_name="soak", standalone_mode=True)
    except SoakError as exc:
        click.echo(f"soak: {exc}", err=True)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        click.echo("soak: interrupted", err=True)
        sys.exit(130)
    except Exception as exc:  # the one place an unexpected error becomes exit 3
        if os.environ.get("SOAK_DEBUG"):
            traceback.print_exc()
        click.echo(f"soak: internal error: {type(exc).__name__}: {exc}", err=True)
        sys.exit(EXIT_INTERNAL)


if __name__ == "__main__":
    main()
