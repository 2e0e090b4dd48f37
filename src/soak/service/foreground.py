"""`soak start --foreground`: the whole service machinery in this process, with a live view.

The run has a record in the data directory like a submitted one (so `soak
report RUN --data-dir` finds it); Ctrl-C or SIGTERM stops it cleanly (the
target stops, the criteria are judged, the report is written). Nothing is
left running when this returns or raises.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from pathlib import Path
from typing import Any

import click
from rich.console import Console
from rich.live import Live

from soak.config import Scenario
from soak.interrupt import stop_on_signals
from soak.runs.state import ACTIVE
from soak.service.live import (
    criteria_lines,
    plain_lines,
    progress_line,
    render,
    verdict_lines,
)
from soak.service.manager import RunManager

# Without a terminal (CI, `make demo | tee`), one plain progress line this often.
PLAIN_EVERY_S = 10.0


def run_foreground(
    scenario: Scenario,
    data_dir: Path,
    *,
    as_json: bool = False,
    plain_every_s: float = PLAIN_EVERY_S,
) -> dict[str, Any]:
    manager = RunManager(data_dir)
    manager.start(resume=False)
    for line in manager.leftovers:
        click.echo(f"soak: {line}", err=True)
    stop = threading.Event()
    # A signal here asks the run to end early (judged, reported: exit 130), so it only
    # sets `stop` (soak.interrupt.stop_on_signals); the plans of the other commands abort.
    with stop_on_signals(stop):
        try:
            run = manager.create(scenario, foreground=True)
            console = Console(stderr=True)
            click.echo(f"soak: run {run.id}: starting {scenario.target.name}", err=True)
            manager.launch(run)  # TargetStartError: everything started is stopped, exit 2
            click.echo(
                f"soak: run {run.id}: {scenario.duration_s:.0f} s, ticks every "
                f"{scenario.samplers.interval_s:g} s",
                err=True,
            )
            _watch(manager, run.id, run.finished, stop, console, plain_every_s)
            if stop.is_set() and not run.finished.is_set():
                click.echo("soak: stopping", err=True)
                run.stop()
            run.finished.wait()
            status = manager.status(run.id)
            if status["status"] in ACTIVE and run.outcome is not None:
                # The end could not be recorded (a full disk): this process knows it anyway.
                status.update(status=run.outcome.status, message=run.outcome.message)
        finally:
            manager.shutdown(stop_runs=True)
    sys.stderr.flush()
    _print_result(status, as_json)
    return status


def _watch(
    manager: RunManager,
    run_id: str,
    finished: threading.Event,
    stop: threading.Event,
    console: Console,
    plain_every_s: float,
) -> None:
    if console.is_terminal:
        with Live(render(manager.status(run_id)), console=console, refresh_per_second=2) as live:
            while not (finished.is_set() or stop.is_set()):
                stop.wait(1.0)
                live.update(render(manager.status(run_id)))
        return
    # A log gets plain lines, the first once there is something measured to say.
    next_print = time.monotonic() + plain_every_s
    while not (finished.is_set() or stop.is_set()):
        if time.monotonic() >= next_print:
            line = progress_line(manager.status(run_id))
            if line is not None:
                click.echo(line, err=True)
            next_print += plain_every_s
        stop.wait(min(1.0, plain_every_s))


def _print_result(status: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(status, indent=2))
        return
    out = Console(highlight=False)
    if out.is_terminal:
        out.print(render(status))
    else:  # a log: lines that do not wrap
        for line in plain_lines(status):
            click.echo(line)
    # Plain lines (never wrapped): scripts and CI logs grep them.
    for line in criteria_lines(status):
        click.echo(line)
    if not status.get("criteria"):
        for line in verdict_lines(status):
            click.echo(line)
    click.echo(f"result: {status.get('status')}: {status.get('message')}")
    for fmt, path in (status.get("reports") or {}).items():
        click.echo(f"report ({fmt}): {path}")
    capture = status.get("capture") or {}
    if capture.get("file"):  # what a next run's load.replay.file names
        click.echo(f"capture ({capture.get('queries', 0):,} queries): {capture['file']}")
