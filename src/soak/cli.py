"""The `soak` command: thin. It parses the command line and maps every SoakError to
one line on stderr and its exit code; each subcommand is a module of soak.commands."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from soak.errors import EXIT_INTERNAL, SoakError

# Each subcommand's module and object, imported only when that subcommand runs (or
# `soak --help` lists them): a command pays for its own imports alone, which is most of
# a short run's CPU (`soak load --replay`: docs/benchmarks.md).
COMMANDS: dict[str, str] = {
    "agent": "soak.commands.agent:agent_cmd",
    "audit": "soak.commands.audit:audit_cmd",
    "bench": "soak.commands.bench:bench_cmd",
    "capture": "soak.commands.capture:capture_cmd",
    "compare": "soak.commands.compare:compare_cmd",
    "list": "soak.commands.list:list_cmd",
    "load": "soak.commands.load:load_cmd",
    "prune": "soak.commands.prune:prune_cmd",
    "report": "soak.commands.report:report_cmd",
    "sampler-agent": "soak.commands.sampler_agent:sampler_agent_cmd",
    "serve": "soak.commands.serve:serve_cmd",
    "start": "soak.commands.start:start_cmd",
    "status": "soak.commands.status:status_cmd",
    "stop": "soak.commands.stop:stop_cmd",
    "token": "soak.commands.token:token_cmd",
    "upgrade": "soak.commands.upgrade:upgrade_cmd",
    "validate": "soak.commands.validate:validate_cmd",
}


class LazyGroup(click.Group):
    """The subcommands of COMMANDS, each imported when it is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        where = COMMANDS.get(cmd_name)
        if where is None:
            return None
        module, name = where.split(":")
        command: click.Command = getattr(importlib.import_module(module), name)
        return command


@click.group(cls=LazyGroup)
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
