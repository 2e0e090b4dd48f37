"""`soak upgrade PLAN`: old data under a new version, a checklist, JUnit for CI.

Exit 0 when every check passes, 1 when the upgrade fails (a check, a populate,
snapshot or migrate step, or the new version not starting on the old data), 2 for
a plan that cannot run (a bad plan, a missing image or binary, the old version
failing on its own data).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import click
from pydantic import TypeAdapter

from soak.errors import CheckFailed, InputError, TargetStartError
from soak.targets.config import TargetConfig
from soak.upgrade.config import UpgradePlan, load_matrix
from soak.upgrade.report import (
    check_points,
    junit_suites,
    ready_points,
    summary_line,
    table,
    to_json,
    write_json,
    write_text,
)
from soak.upgrade.runner import UpgradeResult, UpgradeRunner
from soak.upgrade.template import Values

# An upgrade plan's sqlite sink without a `path` writes here, in the current directory.
DEFAULT_SQLITE_NAME = "soak-upgrade.db"


def new_run_id(plan_name: str) -> tuple[str, str]:
    """(run id, run directory name); the directory name is short, since servers put
    unix sockets in it (pdns' controlsocket) and a socket path has at most 107 bytes."""
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    token = secrets.token_hex(2)
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in plan_name)[:40]
    return f"{safe}-{stamp}-{token}", f"soak-upgrade-{stamp}-{token}"


def write_sinks(plan: UpgradePlan, result: UpgradeResult) -> str | None:
    """`upgrade_check` points (and `ready` events) to the plan's sinks; none configured:
    nothing written. A sink that did not take them leaves its spool behind, and the
    returned line says where (there is no later run to replay it)."""
    if not plan.sinks:
        return None
    from soak.sinks import build_sinks
    from soak.sinks.config import SpoolConfig

    spool_dir = Path(tempfile.mkdtemp(prefix="soak-upgrade-spool-"))
    sinks = build_sinks(
        plan.sinks,
        SpoolConfig(dir=str(spool_dir)),
        default_sqlite_path=Path.cwd() / DEFAULT_SQLITE_NAME,
        run_dir=Path.cwd(),
    )
    now_ns = time.time_ns()
    versions = {"old": (plan.old.name, plan.old.version), "new": (plan.new.name, plan.new.version)}
    try:
        sinks.write(
            check_points(result, target=plan.new.name, version=plan.new.version, time_ns=now_ns)
            + ready_points(result, versions=versions, time_ns=now_ns)
        )
    finally:
        sinks.close()
    if any(f.stat().st_size > 0 for f in spool_dir.rglob("*.spool")):
        return f"some points did not reach their sink; they are spooled in {spool_dir}"
    shutil.rmtree(spool_dir, ignore_errors=True)
    return None


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
    "--json", "json_path", type=click.Path(path_type=Path), help="Write the result as JSON here."
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
    version (one JUnit testsuite each)."""
    plans = load_matrix(plan_file, overrides, olds)  # a bad plan: exit 2, nothing started
    for plan in plans:
        preflight_plan(plan)
    results = [run_one(plan, keep, work_dir) for plan in plans]
    if junit_path is not None:
        write_text(junit_path, junit_suites(results))
    if json_path is not None:
        if len(results) == 1:
            write_json(json_path, results[0])
        else:
            write_text(json_path, json.dumps(matrix_json(results), indent=2) + "\n")
    start_errors = [r.start_error for r in results if r.start_error is not None]
    if start_errors:
        raise TargetStartError("; ".join(start_errors))
    failed = [r for r in results if r.exit_code != 0]
    if len(results) == 1 and failed:
        raise CheckFailed(summary_line(failed[0]))
    if failed:  # a matrix: which pairs
        raise CheckFailed("; ".join(f"{r.plan}: {summary_line(r)}" for r in failed))


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


def run_one(plan: UpgradePlan, keep: bool, work_dir: Path | None) -> UpgradeResult:
    """One old/new pair: the steps as they happen, then the table; points to sinks."""
    run_id, dir_name = new_run_id(plan.name)
    base = work_dir if work_dir is not None else Path(tempfile.gettempdir())
    run_dir = (base / dir_name).resolve()

    def show(phase: str, text: str) -> None:
        click.echo(f"{phase:<9} {text}")

    click.echo(f"soak upgrade {plan.name} (run {run_id})")
    runner = UpgradeRunner(
        plan, run_dir=run_dir, run_id=run_id, keep=keep, env=dict(os.environ), show=show
    )
    result = runner.run()
    click.echo("")
    click.echo(table(result))
    sink_warning = write_sinks(plan, result)
    if sink_warning:
        click.echo(f"soak: {sink_warning}", err=True)
    return result


def matrix_json(results: list[UpgradeResult]) -> dict[str, object]:
    codes = [r.exit_code for r in results]
    exit_code = 2 if 2 in codes else max(codes)
    return {
        "matrix": True,
        "exit_code": exit_code,
        "ok": exit_code == 0,
        "runs": [to_json(r) for r in results],
    }
