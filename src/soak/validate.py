"""`soak validate FILE`: a scenario or an upgrade plan, every error with its YAML path."""

from __future__ import annotations

from pathlib import Path

import click

from soak.config import is_upgrade_plan, load_scenario, read_yaml
from soak.preflight import check_scenario
from soak.words import counted


@click.command("validate")
@click.argument("file", type=click.Path(path_type=Path))
def validate_cmd(file: Path) -> None:
    """Check a scenario or an upgrade plan without starting anything: the same
    pre-flight as `soak start` and `soak upgrade` (files, binaries, images, rates,
    addresses, fixed ports)."""
    if is_upgrade_plan(read_yaml(file)):
        from soak.upgrade.command import preflight_plan
        from soak.upgrade.config import load_matrix

        plans = load_matrix(file)
        for plan in plans:
            preflight_plan(plan)
        click.echo(f"{file}: upgrade plan {plans[0].name!r} is valid")
        return
    scenario = load_scenario(file)
    check_scenario(scenario)
    click.echo(
        f"{file}: scenario {scenario.name!r} is valid "
        f"({counted(len(scenario.phases), 'phase')}, {scenario.duration_s:.0f} s)"
    )
