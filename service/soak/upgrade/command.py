"""`soak upgrade PLAN`: old data under a new version, a checklist, JUnit for CI.

Exit 0 when every check passes, 1 when one fails (or a populate, snapshot or
migrate step does), 2 for a bad plan or a version that cannot start.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import click

from soak.errors import CheckFailed, TargetStartError
from soak.upgrade.config import UpgradePlan, load_plan
from soak.upgrade.report import (
    check_points,
    junit_xml,
    ready_points,
    summary_line,
    table,
    write_json,
    write_text,
)
from soak.upgrade.runner import UpgradeResult, UpgradeRunner

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
    keep: bool,
    work_dir: Path | None,
) -> None:
    """Start the old version on the plan's data, populate, stop, migrate, start the new
    version on the same data and run the checklist."""
    plan = load_plan(plan_file, overrides)  # a bad plan: exit 2, nothing started
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
    if junit_path is not None:
        write_text(junit_path, junit_xml(result))
    if json_path is not None:
        write_json(json_path, result)
    sink_warning = write_sinks(plan, result)
    if sink_warning:
        click.echo(f"soak: {sink_warning}", err=True)
    if result.start_error is not None:
        raise TargetStartError(result.start_error)
    if result.exit_code != 0:
        raise CheckFailed(summary_line(result))
