"""`soak upgrade PLAN`: old data under a new version, a checklist, JUnit for CI.

Exit 0 when every check passes, 1 when the upgrade fails (a check, a migrate step,
or the new version not starting on the old data), 2 for a plan that cannot run (a bad
plan, a missing image or binary, the old version failing on its own data or a setup
step on it: data, populate, snapshot, the load's start).
"""

from __future__ import annotations

import os
from pathlib import Path

import click

from soak.commands.options import json_on_stdout
from soak.plans.upgrade import UpgradeRun
from soak.runs.layout import upgrade_run_dir
from soak.runs.runid import new_run_id
from soak.upgrade.cases import interrupted_case
from soak.upgrade.config import UpgradePlan
from soak.upgrade.gate import Reports, RunInterrupted, cannot_run, gate, raise_for
from soak.upgrade.interrupt import Interrupted, trap_signals
from soak.upgrade.result import UpgradeResult


def run_pair(plan: UpgradePlan, keep: bool, base: Path) -> UpgradeResult:
    """One old/new pair in a run directory under `base`, its steps shown as they happen
    (`phase  text`; a step under way ends with `...`)."""
    run_id = new_run_id(plan.name)
    run_dir = upgrade_run_dir(base, run_id).resolve()

    def show(phase: str, text: str) -> None:
        click.echo(f"{phase:<9} {text}")

    click.echo(f"soak upgrade {plan.name} (run {run_id})")
    run = UpgradeRun(
        plan, run_dir=run_dir, run_id=run_id, keep=keep, env=dict(os.environ), show=show
    )
    return run.run()


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
    reports = Reports(junit_path, json_path)
    with trap_signals():
        try:
            results = gate(plan_file, overrides, olds, keep, work_dir, reports, run_pair)
        except Interrupted as exc:  # before or after the runs: nothing of theirs is left
            reason = f"{exc.signal_name} before the run started: nothing was left running"
            results = reports.results or [cannot_run(plan_file.stem, interrupted_case(reason))]
            for result in results:
                result.interrupted = result.interrupted or exc.signal_name
            reports.write(results)
            raise RunInterrupted(exc) from None
        except Exception:  # a fault between the runs (a sink, the engine): what is known
            if reports.results:
                reports.write(reports.results)
            raise
    reports.write(results)
    raise_for(results)
