"""The `soak` command: thin. Each subcommand lives beside its code and is imported
only when it runs; every SoakError becomes one line on stderr and its exit code."""

from __future__ import annotations

import importlib
import os
import sys
import traceback
from typing import Any

import click

from soak.errors import EXIT_INTERNAL, SoakError

# command name -> "module:attribute" of a click.Command
COMMANDS = {
    "load": "soak.load_command:load_cmd",
    "agent": "soak.load_command:agent_cmd",
    "sampler-agent": "soak.load_command:sampler_agent_cmd",
    "validate": "soak.validate:validate_cmd",
    "serve": "soak.service.commands:serve_cmd",
    "start": "soak.service.commands:start_cmd",
    "status": "soak.service.commands:status_cmd",
    "list": "soak.service.commands:list_cmd",
    "stop": "soak.service.commands:stop_cmd",
    "report": "soak.service.commands:report_cmd",
    "audit": "soak.service.commands:audit_cmd",
    "prune": "soak.prune:prune_cmd",
    "upgrade": "soak.upgrade.command:upgrade_cmd",
    "bench": "soak.bench.command:bench_cmd",
    "compare": "soak.bench.compare_command:compare_cmd",
}


class LazyGroup(click.Group):
    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        target = COMMANDS.get(cmd_name)
        if target is None:
            return None
        module_name, _, attr = target.partition(":")
        command = getattr(importlib.import_module(module_name), attr)
        assert isinstance(command, click.Command)
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
