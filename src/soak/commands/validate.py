"""`soak validate FILE`: a scenario or an upgrade plan, every error with its YAML path."""

from __future__ import annotations

from pathlib import Path

import click

from soak.analysis.judged import leaks_out_of_reach
from soak.clock import ns_to_s
from soak.config import Scenario, is_upgrade_plan, load_scenario, read_yaml
from soak.errors import InputError
from soak.placeholders import literal_secrets
from soak.preflight import check_scenario
from soak.runs.timeline import end_ns, timeline, warmup_end_ns
from soak.upgrade.insoak import swap_plans, swap_warnings
from soak.words import counted, plural


@click.command("validate")
@click.argument("file", type=click.Path(path_type=Path))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.PATH=VALUE",
    help="An upgrade plan: override a value, as `soak upgrade --set` does.",
)
@click.option(
    "--old",
    "olds",
    multiple=True,
    metavar="LABEL",
    help="An upgrade plan: only these matrix entries, as `soak upgrade --old` does.",
)
def validate_cmd(file: Path, overrides: tuple[str, ...], olds: tuple[str, ...]) -> None:
    """Check a scenario or an upgrade plan without starting anything: the same
    pre-flight as `soak start` and `soak upgrade` (files, binaries, images, rates,
    addresses, fixed ports). For a plan, `--set` and `--old` make it the exact
    command CI will run; every matrix entry is checked and named. A scenario's literal
    value under a secret's name (a token, a key, a password) is a warning (exit 0)."""
    if is_upgrade_plan(read_yaml(file)):
        from soak.upgrade.config import load_matrix
        from soak.upgrade.gate import preflight_problems

        plans = load_matrix(file, overrides, olds)
        problems = preflight_problems(plans)
        if problems:
            raise InputError("\n".join(problems.values()))
        if plans[0].matrix is None:
            click.echo(f"{file}: upgrade plan {plans[0].name!r} is valid")
        else:
            names = ", ".join(repr(plan.name) for plan in plans)
            entries = plural(len(plans), "entry")
            click.echo(f"{file}: upgrade plan, {len(plans)} matrix {entries} valid: {names}")
        return
    if overrides or olds:
        raise InputError(f"{file}: --set and --old are for upgrade plans; this is a scenario")
    scenario = load_scenario(file)
    swaps = swap_plans(scenario)  # the `upgrade:` section's checks, as the gate reads them
    check_scenario(scenario)
    for line in literal_secrets(scenario.model_dump(mode="json")):
        click.echo(f"soak: warning: {line}", err=True)
    out_of_reach = leaks_out_of_reach(scenario.leaks, scenario.criteria, judged_s(scenario))
    if out_of_reach is not None:  # valid, and said: the run would end NOT JUDGED
        click.echo(f"soak validate: warning: {file}: {out_of_reach}", err=True)
    for line in swap_warnings(scenario, swaps):  # valid, and said: a segment not judged
        click.echo(f"soak validate: warning: {file}: {line}", err=True)
    parts = [counted(len(scenario.phases), "phase"), f"{scenario.duration_s:.0f} s"]
    parts += [counted(len(swaps), "swap")] if swaps else []
    click.echo(f"{file}: scenario {scenario.name!r} is valid ({', '.join(parts)})")


def judged_s(scenario: Scenario) -> float:
    """The seconds after the leading warm-up phases: what criteria and verdicts judge."""
    spans = timeline(scenario, 0)
    return ns_to_s(end_ns(spans) - warmup_end_ns(spans)) if spans else 0.0
