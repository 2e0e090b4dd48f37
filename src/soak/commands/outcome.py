"""How an ended run becomes the exit code of `soak start` and `soak status`."""

from __future__ import annotations

import sys
from typing import Any

import click

from soak.errors import CheckFailed, RunError
from soak.runs.state import ACTIVE, RunStatus

# Ctrl-C or SIGTERM of a foreground run, as a shell reports SIGINT.
EXIT_INTERRUPTED = 130
# A foreground run whose command died without ending it: nothing judged it, nothing
# drives it. Not 0-3 (nothing passed, failed, was refused or broke inside soak) and not
# a signal's 128+N (which a shell would read as `soak status` itself killed).
EXIT_ABANDONED = 4


def exit_for(status: dict[str, Any], said: str | None = None) -> None:
    """The exit code of an ended run, the same wherever it is read (`start --foreground`,
    `start --wait`, `status RUN`): passed 0; failed 1; not_judged 1 (no failure, but a
    criterion could not be judged: no pass either); error 2 (a target that exited or
    never got ready, as docs/bad-input.md says); stopped 130, never 0; abandoned (its
    foreground command is gone) 4. An active run: 0.
    `said`: the stderr line, when the run's message is printed already."""
    outcome = status.get("status")
    if outcome == RunStatus.PASSED or outcome in ACTIVE:
        return
    if outcome in (RunStatus.FAILED, RunStatus.NOT_JUDGED):
        raise CheckFailed(said or status.get("message") or f"run ended {outcome}")
    if outcome == RunStatus.STOPPED:
        click.echo(
            f"soak: {said or 'stopped'} before its end (the report covers what ran)", err=True
        )
        sys.exit(EXIT_INTERRUPTED)
    if outcome == RunStatus.ABANDONED:
        message = status.get("message") or "abandoned"
        click.echo(f"soak: run {status.get('id')} {message}", err=True)
        sys.exit(EXIT_ABANDONED)
    raise RunError(said or status.get("message") or f"run ended as {outcome}")
