"""`soak start`: submit a soak to the service, or run it here with --foreground."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from soak.commands.options import (
    data_dir_option,
    data_dir_or_default,
    server_option,
    service_client,
)
from soak.commands.outcome import exit_for
from soak.errors import InputError, SoakError
from soak.runs.state import ACTIVE
from soak.service.client import Client

if TYPE_CHECKING:
    from soak.config import Scenario
    from soak.plans.engine import Teardown


@click.command("start")
@click.argument("scenario_file", type=click.Path(path_type=Path))
@click.option("--foreground", is_flag=True, help="Run here with a live view instead of submitting.")
@click.option("--duration", default=None, help="Scale every phase so the run lasts this long.")
@click.option("--set", "overrides", multiple=True, help="key.path=value (repeatable).")
@click.option("--json", "as_json", is_flag=True, help="Print the result as JSON.")
@click.option(
    "--wait",
    is_flag=True,
    help="Submit, then wait for the run's end and exit as --foreground would (0, 1, 2).",
)
@server_option
@data_dir_option
def start_cmd(
    scenario_file: Path,
    foreground: bool,
    duration: str | None,
    overrides: tuple[str, ...],
    as_json: bool,
    wait: bool,
    server: str | None,
    data_dir: Path | None,
) -> None:
    """Submit a soak to the service, or run it here with --foreground."""
    from soak.config import load_scenario
    from soak.runs.timeline import scaled_scenario
    from soak.units import parse_duration_s

    scenario = load_scenario(scenario_file, overrides)
    if duration is not None:
        try:
            total_s = parse_duration_s(duration)
        except ValueError as exc:
            raise InputError(f"--duration: {exc}") from exc
        scenario = scaled_scenario(scenario, total_s)
    if foreground:  # a service finds a run's capture in its own data directory
        from soak.runs.capture_dnstap import resolve_from_run
        from soak.runs.layout import DataDir

        scenario = resolve_from_run(scenario, DataDir(data_dir_or_default(data_dir)))
    if foreground:  # the registered plan `soak`, run here by the engine
        from soak.plans.engine import make_plan, run_plan

        data = data_dir_or_default(data_dir)
        run_plan(make_plan("soak", scenario, data, as_json, scenario_file))
        return
    # Every file it names, its rates: before anything starts. Secrets by reference are
    # read where the run runs (a service checks its own environment again on POST /runs).
    from soak.preflight import check_scenario

    check_scenario(scenario, secrets=False)
    check_swaps(scenario_file, scenario)
    with service_client(server, data_dir) as client:
        result = client.submit(scenario)
        if wait:
            click.echo(f"soak: run {result['id']}: submitted; waiting for its end", err=True)
            result = wait_for_end(client, result["id"])
    if as_json:
        click.echo(json.dumps(result))
    elif wait:
        click.echo(f"{result['id']}")
        click.echo(f"result: {result.get('status')}: {result.get('message')}")
    else:
        click.echo(result["id"])
    if wait:
        exit_for(result, said=f"run {result['id']} ended {result.get('status')}")


class ForegroundSoak:
    """`soak start --foreground`, as a plan. check: every file the scenario names, its
    rates, its secrets, its `upgrade:` section; run: the service's machinery in this
    process (soak.service.foreground), which keeps its own signal handling (a signal
    there ends the run early, judged and reported, rather than aborting it) and stops
    everything it started itself; outcome: the run's status as `exit_for` reads it."""

    stopped_note = ""

    def __init__(
        self, scenario: Scenario, data_dir: Path, as_json: bool, scenario_file: Path | None = None
    ) -> None:
        self.scenario, self.data_dir, self.as_json = scenario, data_dir, as_json
        self.scenario_file = scenario_file or Path(scenario.name)
        self.status: dict[str, Any] = {}

    def check(self) -> None:
        from soak.preflight import check_scenario

        check_scenario(self.scenario, secrets=True)
        check_swaps(self.scenario_file, self.scenario)

    def run(self, started: Teardown) -> None:
        from soak.service.foreground import run_foreground

        self.status = run_foreground(self.scenario, self.data_dir, as_json=self.as_json)

    def outcome(self) -> SoakError | None:
        try:
            exit_for(self.status)  # `stopped`: its line, then exit 130 (SystemExit)
        except SoakError as exc:
            return exc
        return None


def check_swaps(scenario_file: Path, scenario: Scenario) -> None:
    """The `upgrade:` section's checks, as the gate reads them (bad input raises); a
    warning line for a swap that leaves too little room for its verdicts."""
    from soak.upgrade.insoak import swap_plans, swap_warnings

    for line in swap_warnings(scenario, swap_plans(scenario)):
        click.echo(f"soak: warning: {scenario_file}: {line}", err=True)


# How often `start --wait` asks the service; a run's end is seconds to days away.
WAIT_POLL_S = 1.0


def wait_for_end(client: Client, run_id: str) -> dict[str, Any]:
    """The run's status once it has ended (a final status, its result and reports written)."""
    import time

    while True:
        status = client.status(run_id)
        if status.get("status") not in ACTIVE:
            return status
        time.sleep(WAIT_POLL_S)
