"""The upgrade gate's parts (`soak upgrade PLAN`, run by soak.plans.upgrade_gate): the
reports, the result of a plan that did not run, the pre-flight, the points to the sinks,
and the error that gives the command its exit code."""

from __future__ import annotations

import os
import signal
import time
from datetime import UTC, datetime
from pathlib import Path

from pydantic import TypeAdapter

from soak.errors import CheckFailed, InputError, SoakError, TargetStartError
from soak.interrupt import Interrupted
from soak.runs.layout import UPGRADE_SQLITE
from soak.targets.specs import TargetConfig
from soak.upgrade.cases import cannot_run_case, planned_cases
from soak.upgrade.checklist import CheckResult
from soak.upgrade.config import UpgradePlan
from soak.upgrade.report import (
    check_points,
    junit_suites,
    ready_points,
    summary_line,
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
