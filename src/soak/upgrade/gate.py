"""The upgrade gate of `soak upgrade PLAN`: each old/new pair of a plan run in turn,
its reports, and the error that gives the command its exit code."""

from __future__ import annotations

import os
import signal
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

import click
from pydantic import TypeAdapter

from soak.errors import CheckFailed, InputError, SoakError, TargetStartError
from soak.runs.layout import UPGRADE_SQLITE
from soak.targets.specs import TargetConfig
from soak.upgrade.cases import cannot_run_case, planned_cases
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import UpgradePlan, load_matrix
from soak.upgrade.interrupt import Interrupted
from soak.upgrade.leftovers import remove_leftovers
from soak.upgrade.report import (
    check_points,
    junit_suites,
    matrix_line,
    ready_points,
    summary_line,
    table,
    write_json,
    write_text,
)
from soak.upgrade.result import UpgradeResult
from soak.upgrade.template import Values


def write_sinks(plan: UpgradePlan, result: UpgradeResult) -> str | None:
    """`upgrade_check` points, `ready` events and each step's event to the plan's sinks;
    none configured: nothing written. A sink that did not take them leaves its spool behind, and the
    returned line says where (there is no later run to replay it)."""
    if not plan.sinks:
        return None
    from soak.runs.once import write_once

    now_ns = time.time_ns()
    versions = {"old": (plan.old.name, plan.old.version), "new": (plan.new.name, plan.new.version)}
    points = check_points(
        result, target=plan.new.name, version=plan.new.version, time_ns=now_ns
    ) + ready_points(result, versions=versions, time_ns=now_ns)
    points += result.event_points  # its steps, as a soak run's events
    return write_once(plan.sinks, points, default_sqlite_path=Path.cwd() / UPGRADE_SQLITE)


# One old/new pair run in a run directory under a base directory (`keep`: kept after).
RunPair = Callable[[UpgradePlan, bool, Path], UpgradeResult]


class RunInterrupted(SoakError):
    """SIGINT or SIGTERM: what the run made is removed, the reports say so."""

    def __init__(self, exc: Interrupted, where: str = "") -> None:
        """`where`: the phase and the step under way (`during populate: ...`)."""
        where = f" {where}" if where else "; the run was stopped and cleaned up"
        super().__init__(f"{exc}{where} (see the reports)")
        self.exit_code = exc.exit_code


class Reports:
    """Where `--junit` and `--json` go; `results` so far (written on an interruption)."""

    def __init__(self, junit_path: Path | None, json_path: Path | None) -> None:
        self.junit_path = junit_path
        self.json_path = json_path
        self.results: list[UpgradeResult] = []
        self.matrix = False

    def write(self, results: list[UpgradeResult]) -> None:
        if self.junit_path is not None:
            write_text(self.junit_path, junit_suites(results))
        if self.json_path is not None:
            write_json(self.json_path, results, self.matrix)


def gate(
    plan_file: Path,
    overrides: tuple[str, ...],
    olds: tuple[str, ...],
    keep: bool,
    work_dir: Path | None,
    reports: Reports,
    run_pair: RunPair,
) -> list[UpgradeResult]:
    """Every selected pair run in order by `run_pair` (the upgrade plan, soak.plans.upgrade:
    the command hands it down, the plans being above this module); a plan that cannot run
    (exit 2) is reported too."""
    try:
        plans = load_matrix(plan_file, overrides, olds)
    except InputError as exc:  # a bad plan: one error case, nothing started
        reports.write([cannot_run(plan_file.stem, cannot_run_case("plan is valid", str(exc)))])
        raise
    reports.matrix = len(plans) > 1 or plans[0].matrix is not None
    problems = preflight_problems(plans)
    if problems:
        results = [not_run(plan, problems.get(plan.name), problems) for plan in plans]
        reports.write(results)
        raise InputError("; ".join(problems.values()))
    base = work_dir if work_dir is not None else Path(tempfile.gettempdir())
    remove_leftovers(base)  # what runs killed outright left: before this one makes its own
    reports.results = [not_run(plan, None, {}, "not run: not reached yet") for plan in plans]
    for i, plan in enumerate(plans):
        result = reports.results[i] = run_pair(plan, keep, base)
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


def raise_for(results: list[UpgradeResult]) -> None:
    stopped = next((r for r in results if r.interrupted), None)
    if stopped is not None and stopped.interrupted is not None:
        exc = Interrupted(signal.Signals[stopped.interrupted].value)
        raise RunInterrupted(exc, stopped.interrupted_where)
    internal = [r.internal_error for r in results if r.internal_error is not None]
    if internal:  # reported in the JUnit case with its traceback
        raise SoakError("internal error: " + "; ".join(internal))
    start_errors = [r.start_error for r in results if r.start_error is not None]
    if start_errors:
        raise TargetStartError("; ".join(start_errors))
    failed = [r for r in results if r.exit_code != 0]
    if len(results) == 1 and failed:
        raise CheckFailed(summary_line(failed[0]))
    if failed:  # a matrix: which pairs
        raise CheckFailed("; ".join(f"{r.plan}: {summary_line(r)}" for r in failed))


def _unstarted(name: str) -> UpgradeResult:
    """The result of a plan that never started: no run id, no run directory."""
    return UpgradeResult(name, "", Path(), False, datetime.now(UTC).isoformat(timespec="seconds"))


def cannot_run(name: str, cause: CheckResult) -> UpgradeResult:
    """The report of a plan that did not run: its one error case."""
    result = _unstarted(name)
    result.checks = [cause]
    result.start_error = cause.got
    return result


def not_run(
    plan: UpgradePlan, problem: str | None, problems: dict[str, str], reason: str = ""
) -> UpgradeResult:
    """A plan's report when it did not run: its own problem as an error case (exit 2),
    every planned case skipped (why: its problem, another pair's, or `reason`)."""
    if problem is not None:
        result = cannot_run(plan.name, cannot_run_case("plan can run", problem))
    else:
        result = _unstarted(plan.name)
    if not reason:
        reason = "not run: " + ("it cannot run" if problem else f"{', '.join(problems)} cannot run")
    result.checks += [case.skipped(reason) for case in planned_cases(plan)]
    return result


def preflight_problems(plans: list[UpgradePlan]) -> dict[str, str]:
    """Each plan's pre-flight problem (an image, a binary, a fixed port), by plan name."""
    problems: dict[str, str] = {}
    for plan in plans:
        try:
            preflight_plan(plan)
        except InputError as exc:  # a matrix entry's problem names the entry
            named = plan.matrix is not None or len(plans) > 1
            problems[plan.name] = f"{plan.name}: {exc}" if named else str(exc)
    return problems


def preflight_plan(plan: UpgradePlan) -> None:
    """The pre-flight of `soak start` for a plan's targets: addresses, files, binaries
    or images, fixed ports; InputError (exit 2) before the first version starts."""
    from soak.preflight import check_targets

    values = Values(plan.vars, dict(os.environ), plan.secrets)
    adapter: TypeAdapter[TargetConfig] = TypeAdapter(TargetConfig)
    targets = []
    for cfg in (plan.old, plan.new):
        try:  # `{{name}}` from vars (a matrix entry's image) and the environment
            raw = values.render(cfg.model_dump(by_alias=True, exclude_unset=True))
        except InputError:
            continue  # a name a populate step saves: known only when the version starts
        targets.append(adapter.validate_python(raw))
    check_targets(targets, plan.base_dir, plan.allow_targets)
