"""`soak audit`: a run's load figures checked against its ledger."""

from __future__ import annotations

from pathlib import Path

import click

from soak.errors import CheckFailed
from soak.runs.layout import DataDir


@click.command("audit")
@click.argument("run_id")
@click.option(
    "--data-dir",
    type=click.Path(path_type=Path),
    required=True,
    help="the data directory the run is in",
)
def audit_cmd(run_id: str, data_dir: Path) -> None:
    """Check a run's load figures (phases, classes, agents, criteria, result.json) against
    its ledger of one-second windows; exit 1 and one line per figure that disagrees."""
    from soak.results.reportinput import local_audit, local_witness_lines

    found = local_audit(DataDir(data_dir), run_id)
    for line in local_witness_lines(DataDir(data_dir), run_id):
        click.echo(line)
    if found:
        for line in found:
            click.echo(f"disagrees: {line}")
        raise CheckFailed(f"{len(found)} load figure(s) disagree with the run's ledger")
    click.echo(f"{run_id}: every load figure agrees with the run's ledger")
