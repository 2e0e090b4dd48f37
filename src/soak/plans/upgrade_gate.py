"""`soak upgrade PLAN`, as a plan: each old/new pair of the plan (or its `matrix:`) run
in turn by soak.plans.upgrade.UpgradeRun, its reports, the exit code.

check: the plan read (a bad one is reported as one error case, exit 2) and each pair's
pre-flight (images, binaries, fixed ports: exit 2 before anything starts); both are in
the reports, so they are written where the reports are (`run`, first).
run: what runs killed outright left removed, then each pair in its run directory (its
steps shown as they happen: `phase  text`, a step under way ends with `...`), its
table, its points to the plan's sinks; an interrupted pair ends the gate, the pairs
after it reported as not run.
teardown: each pair's own, as it ends (UpgradeRun: the load, every version, every
container of the run by its labels, the volume and the run directory unless kept),
because each pair's clean-up is itself reported, step by step, in the JUnit and JSON.
outcome: upgrade.gate.raise_for: 0, 1 (an upgrade failed), 2 (a plan that cannot
run), 3 (a fault of soak), 130/143 (a signal: RunInterrupted, the reports say where).
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import click

from soak.errors import InputError, SoakError
from soak.interrupt import Interrupted
from soak.plans.engine import Teardown
from soak.plans.upgrade import UpgradeRun
from soak.runs.layout import upgrade_run_dir
from soak.runs.runid import new_run_id
from soak.upgrade.cases import cannot_run_case, interrupted_case
from soak.upgrade.config import UpgradePlan, load_matrix
from soak.upgrade.gate import (
    Reports,
    RunInterrupted,
    cannot_run,
    not_run,
    preflight_problems,
    raise_for,
    write_sinks,
)
from soak.upgrade.leftovers import remove_leftovers
from soak.upgrade.report import matrix_line, table
from soak.upgrade.result import UpgradeResult


class UpgradeGatePlan:
    stopped_note = ""  # an interruption is reported by the plan itself (RunInterrupted)

    def __init__(
        self,
        plan_file: Path,
        overrides: tuple[str, ...],
        olds: tuple[str, ...],
        keep: bool,
        work_dir: Path | None,
        reports: Reports,
    ) -> None:
        self.plan_file, self.overrides, self.olds = plan_file, overrides, olds
        self.keep, self.work_dir, self.reports = keep, work_dir, reports
        self.results: list[UpgradeResult] = []

    def check(self) -> None:
        """Nothing here: a bad plan is a report too (`run` writes it)."""

    def run(self, started: Teardown) -> None:
        reports = self.reports
        try:
            self.results = self._gate()
        except Interrupted as exc:  # before or after the runs: nothing of theirs is left
            reason = f"{exc.signal_name} before the run started: nothing was left running"
            stem = self.plan_file.stem
            results = reports.results or [cannot_run(stem, interrupted_case(reason))]
            for result in results:
                result.interrupted = result.interrupted or exc.signal_name
            reports.write(results)
            raise RunInterrupted(exc) from None
        except Exception:  # a fault between the runs (a sink, the engine): what is known
            if reports.results:
                reports.write(reports.results)
            raise
        reports.write(self.results)

    def outcome(self) -> SoakError | None:
        try:
            raise_for(self.results)
        except SoakError as exc:
            return exc
        return None

    def _gate(self) -> list[UpgradeResult]:
        """Every selected pair run in order; a plan that cannot run (exit 2) is reported."""
        reports, plan_file = self.reports, self.plan_file
        try:
            plans = load_matrix(plan_file, self.overrides, self.olds)
        except InputError as exc:  # a bad plan: one error case, nothing started
            reports.write([cannot_run(plan_file.stem, cannot_run_case("plan is valid", str(exc)))])
            raise
        reports.matrix = len(plans) > 1 or plans[0].matrix is not None
        problems = preflight_problems(plans)
        if problems:
            reports.write([not_run(plan, problems.get(plan.name), problems) for plan in plans])
            raise InputError("; ".join(problems.values()))
        base = self.work_dir if self.work_dir is not None else Path(tempfile.gettempdir())
        remove_leftovers(base)  # what runs killed outright left: before this one makes its own
        reports.results = [not_run(plan, None, {}, "not run: not reached yet") for plan in plans]
        for i, plan in enumerate(plans):
            result = reports.results[i] = run_pair(plan, self.keep, base)
            click.echo("")
            click.echo(table(result))
            if result.interrupted is None:  # a cancelled run writes nowhere else
                sink_warning = write_sinks(plan, result)
                if sink_warning:
                    click.echo(f"soak: {sink_warning}", err=True)
            else:
                reason = f"not run: interrupted by {result.interrupted}"
                for j in range(i + 1, len(plans)):
                    reports.results[j] = not_run(plans[j], None, {}, reason)
                    reports.results[j].interrupted = result.interrupted
                break
        if len(plans) > 1:
            click.echo(matrix_line(reports.results))
        return reports.results


def run_pair(plan: UpgradePlan, keep: bool, base: Path) -> UpgradeResult:
    """One old/new pair in a run directory under `base`, its steps shown as they happen."""
    run_id = new_run_id(plan.name)
    run_dir = upgrade_run_dir(base, run_id).resolve()

    def show(phase: str, text: str) -> None:
        click.echo(f"{phase:<9} {text}")

    click.echo(f"soak upgrade {plan.name} (run {run_id})")
    run = UpgradeRun(
        plan, run_dir=run_dir, run_id=run_id, keep=keep, env=dict(os.environ), show=show
    )
    return run.run()
