"""A migrate step (forward, or the rollback's down-migration): a host command or a
one-shot container on the data volume; its output goes to a log in the run directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soak.placeholders import fill as fill_placeholders
from soak.upgrade import actions, docker_data
from soak.upgrade.actions import StepFailed
from soak.upgrade.config import Migrate
from soak.upgrade.template import Values


@dataclass(frozen=True)
class MigrateWhere:
    """Where a migration runs: the run directory, and the data (a directory or a volume)."""

    run_dir: Path
    data_dir: Path | None
    volume: str | None
    run_id: str


def run_migrate(migrate: Migrate, values: Values, where: MigrateWhere, log_name: str) -> str:
    """The step's one-line result; a non-zero exit is StepFailed with its last line."""
    placeholders = {"run_dir": str(where.run_dir)}
    if where.data_dir is not None:
        placeholders["data_dir"] = str(where.data_dir)
    log_path = where.run_dir / log_name
    if migrate.container is not None:
        assert where.volume is not None
        command = [
            fill_placeholders(a, placeholders) for a in values.render(migrate.container.command)
        ]
        container = migrate.container.model_validate(values.render(migrate.container.model_dump()))
        code, output = docker_data.run_one_shot(
            container,
            command,
            where.volume,
            values.render(migrate.env),
            migrate.timeout_s,
            f"{where.run_id}-{log_name.removesuffix('.log')}",
        )
        argv0 = f"container {container.image}"
    else:
        assert migrate.command is not None
        argv = [fill_placeholders(a, placeholders) for a in values.render(migrate.command)]
        proc = actions.run_host_command(
            argv, values.render(migrate.env), migrate.timeout_s, where.data_dir
        )
        code, output = proc.returncode, (proc.stdout or "") + (proc.stderr or "")
        argv0 = argv[0]
    log_path.write_text(values.redact(output))
    if code != 0:
        last = output.strip().splitlines()[-1:] or ["no output"]
        raise StepFailed(f"{argv0} exited with {code}: {last[0][:300]}")
    return f"{argv0} -> exit 0 (output in {log_path.name})"
