"""`soak validate FILE`: a scenario or an upgrade plan, every error with its YAML path."""

from __future__ import annotations

from pathlib import Path

import click

from soak.config import is_upgrade_plan, load_scenario, read_yaml


@click.command("validate")
@click.argument("file", type=click.Path(path_type=Path))
def validate_cmd(file: Path) -> None:
    """Check a scenario or an upgrade plan without starting anything."""
    if is_upgrade_plan(read_yaml(file)):
        from soak.upgrade.config import load_plan

        plan = load_plan(file)
        click.echo(f"{file}: upgrade plan {plan.name!r} is valid")
        return
    scenario = load_scenario(file)
    click.echo(
        f"{file}: scenario {scenario.name!r} is valid "
        f"({len(scenario.phases)} phases, {scenario.duration_s:.0f} s)"
    )
