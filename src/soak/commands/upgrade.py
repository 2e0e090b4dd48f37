"""`soak upgrade PLAN`: old data under a new version, a checklist, JUnit for CI.

Exit 0 when every check passes, 1 when the upgrade fails (a check, a migrate step,
or the new version not starting on the old data), 2 for a plan that cannot run (a bad
plan, a missing image or binary, the old version failing on its own data or a setup
step on it: data, populate, snapshot, the load's start).
"""

from __future__ import annotations

from pathlib import Path

import click

from soak.commands.options import json_on_stdout
from soak.upgrade.gate import Reports


@click.command("upgrade")
@click.argument("plan_file", metavar="PLAN", type=click.Path(path_type=Path))
@click.option(
    "--set",
    "overrides",
    multiple=True,
    metavar="KEY.PATH=VALUE",
    help="Override a plan value, e.g. --set migrate=null.",
)
@click.option(
    "--junit",
    "junit_path",
    type=click.Path(path_type=Path),
    help="Write JUnit XML here: one test case per check.",
)
@click.option(
    "--json",
    "json_path",
    type=click.Path(path_type=Path),
    help="Write the result as JSON here (`-`: on stdout, the progress then on stderr).",
)
@click.option(
    "--old",
    "olds",
    multiple=True,
    metavar="LABEL",
    help="Run only these entries of the plan's `matrix:` (default: every entry).",
)
@click.option("--keep", is_flag=True, help="Keep the run directory (and a volume made for it).")
@click.option(
    "--work-dir",
    type=click.Path(path_type=Path),
    default=None,
    help="Where the run directory is made (default: the system temp dir).",
)
def upgrade_cmd(
    plan_file: Path,
    overrides: tuple[str, ...],
    junit_path: Path | None,
    json_path: Path | None,
    olds: tuple[str, ...],
    keep: bool,
    work_dir: Path | None,
) -> None:
    """Start the old version on the plan's data, populate, stop, migrate, start the new
    version on the same data and run the checklist; with a `matrix:`, once per old
    version (one JUnit testsuite each). SIGINT or SIGTERM at any moment stops the run,
    removes what it made and writes the reports so far (exit 130 or 143)."""
    with json_on_stdout(json_path) as json_file:
        _upgrade(plan_file, overrides, junit_path, json_file, olds, keep, work_dir)


def _upgrade(
    plan_file: Path,
    overrides: tuple[str, ...],
    junit_path: Path | None,
    json_path: Path | None,
    olds: tuple[str, ...],
    keep: bool,
    work_dir: Path | None,
) -> None:
    """The registered plan `upgrade` (soak.plans.upgrade_gate) run by the engine."""
    from soak.plans.engine import make_plan, run_plan

    reports = Reports(junit_path, json_path)
    run_plan(make_plan("upgrade", plan_file, overrides, olds, keep, work_dir, reports))
