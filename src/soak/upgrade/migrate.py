"""A migrate step (forward, or the rollback's down-migration): a host command or a
one-shot container on the data volume; its output goes to a log in the run directory.

A failed migration is quoted from its stderr first (the reason is there, stdout is
progress), and its last output lines travel with the failure into the JUnit case and
the JSON: the run directory with the log goes away without `--keep`, the report stays.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from soak.placeholders import fill as fill_placeholders
from soak.upgrade import actions, docker_data
from soak.upgrade.actions import StepFailed
from soak.upgrade.config import Migrate
from soak.upgrade.template import Values

QUOTED_LINES = 3  # of stderr (else stdout) in the one-line message
KEPT_LINES = 40  # of each stream in the failed case


@dataclass(frozen=True)
class MigrateWhere:
    """Where a migration runs: the run directory, and the data (a directory or a volume)."""

    run_dir: Path
    data_dir: Path | None
    volume: str | None
    run_id: str


def _last_lines(text: str, count: int) -> list[str]:
    return [ln.rstrip() for ln in text.splitlines() if ln.strip()][-count:]


def failure_quote(stdout: str, stderr: str) -> str:
    """The one-line reason: stderr's last lines, else stdout's, else `no output`."""
    lines = _last_lines(stderr, QUOTED_LINES) or _last_lines(stdout, 1)
    return " | ".join(ln.strip()[:300] for ln in lines) or "no output"


def output_lines(stdout: str, stderr: str) -> list[str]:
    """What a failed step's case carries: stderr's last lines, then stdout's."""
    err, out = _last_lines(stderr, KEPT_LINES), _last_lines(stdout, KEPT_LINES)
    lines = [f"stderr: {ln}" for ln in err]
    return lines + [f"stdout: {ln}" for ln in out]


def run_migrate(migrate: Migrate, values: Values, where: MigrateWhere, log_path: Path) -> str:
    """The step's one-line result, its output in `log_path`; a non-zero exit is StepFailed
    quoting stderr."""
    placeholders = {"run_dir": str(where.run_dir)}
    if where.data_dir is not None:
        placeholders["data_dir"] = str(where.data_dir)
    if migrate.container is not None:
        source = where.volume or str(where.data_dir)  # a volume, or the host directory
        command = [
            fill_placeholders(a, placeholders) for a in values.render(migrate.container.command)
        ]
        container = migrate.container.model_validate(values.render(migrate.container.model_dump()))
        code, stdout, stderr = docker_data.run_one_shot(
            container,
            command,
            source,
            values.render(migrate.env),
            migrate.timeout_s,
            where.run_id,
            "-" + log_path.stem,
        )
        argv0 = f"container {container.image}"
    else:
        assert migrate.command is not None
        argv = [fill_placeholders(a, placeholders) for a in values.render(migrate.command)]
        proc = actions.run_host_command(
            argv, values.render(migrate.env), migrate.timeout_s, where.data_dir
        )
        code, stdout, stderr = proc.returncode, proc.stdout or "", proc.stderr or ""
        argv0 = argv[0]
    log_path.write_text(values.redact(stdout + stderr))
    if code != 0:
        quote = values.redact(failure_quote(stdout, stderr))
        lines = [values.redact(ln) for ln in output_lines(stdout, stderr)]
        raise StepFailed(f"{argv0} exited with {code}: {quote}", lines)
    return f"{argv0} -> exit 0 (output in {log_path.name})"
