"""Points written once, by a command that has no run to come back to them (an upgrade's
verdicts): the sinks opened, the points written, the sinks closed."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from soak.points import Point
from soak.runs.layout import UPGRADE_SPOOL_PREFIX
from soak.sinks import build_sinks
from soak.sinks.destinations import SinkConfig, SpoolConfig


def write_once(
    configs: list[SinkConfig], points: list[Point], *, default_sqlite_path: Path
) -> str | None:
    """None when every sink took the points; else a line saying where the rest is spooled
    (a temporary directory that stays: nothing will replay it)."""
    spool_dir = Path(tempfile.mkdtemp(prefix=UPGRADE_SPOOL_PREFIX))
    sinks = build_sinks(
        configs,
        SpoolConfig(),
        default_sqlite_path=default_sqlite_path,
        run_dir=Path.cwd(),
        default_spool_dir=spool_dir,
    )
    try:
        sinks.write(points)
    finally:
        sinks.close()
    if any(f.stat().st_size > 0 for f in spool_dir.rglob("*.spool")):
        return f"some points did not reach their sink; they are spooled in {spool_dir}"
    shutil.rmtree(spool_dir, ignore_errors=True)
    return None
