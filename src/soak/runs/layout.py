"""The data directory: every file name in it is spelled here and nowhere else.

```
DATA_DIR/
  state.db            runs, their events and state (runs.state.StateStore)
  points.db           the embedded point store of runs without a sqlite sink path
  token               the control API's bearer token (0600)
  reserve.bin         space given back when the disk fills (runs.reserve)
  runs/<id>/          one run: result.json, report.html|json|md, spool/, target logs
  bench/<id>/         `soak bench` results (bench.json, bench.md, bench.html)
```
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from soak.config import Scenario
from soak.sinks.config import SinkConfig, SqliteSinkConfig

STATE_DB = "state.db"
POINTS_DB = "points.db"
TOKEN = "token"
RESERVE = "reserve.bin"
RUNS = "runs"
BENCH = "bench"
# In a run's directory:
RESULT = "result.json"
REPORTS = {"html": "report.html", "json": "report.json", "md": "report.md"}
SPOOL = "spool"
# In a bench's directory:
BENCH_RESULT = "bench.json"
BENCH_REPORTS = {"md": "bench.md", "html": "bench.html"}


def default_root() -> Path:
    """$SOAK_HOME, else ~/.local/share/soak (XDG_DATA_HOME honoured)."""
    if os.environ.get("SOAK_HOME"):
        return Path(os.environ["SOAK_HOME"])
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "soak"


@dataclass(frozen=True)
class DataDir:
    """A data directory's paths; nothing is created until a caller writes."""

    root: Path

    @classmethod
    def default(cls, root: Path | None = None) -> DataDir:
        return cls(root if root is not None else default_root())

    @property
    def state_db(self) -> Path:
        return self.root / STATE_DB

    @property
    def points_db(self) -> Path:
        return self.root / POINTS_DB

    @property
    def token(self) -> Path:
        return self.root / TOKEN

    @property
    def reserve(self) -> Path:
        return self.root / RESERVE

    @property
    def bench(self) -> Path:
        return self.root / BENCH

    def run_dir(self, run_id: str) -> Path:
        return self.root / RUNS / run_id

    def points_path(self, scenario: Scenario, run_dir: Path) -> Path:
        """Where a run's embedded store is (the first sqlite sink's path, else points.db)."""
        for cfg in scenario.sinks:
            if isinstance(cfg, SqliteSinkConfig) and cfg.path:
                path = Path(cfg.path)
                return path if path.is_absolute() else run_dir / path
        return self.points_db


def with_embedded_store(configs: list[SinkConfig]) -> list[SinkConfig]:
    """The sinks asked for, plus the embedded store if absent: verdicts and reports read it."""
    if any(isinstance(c, SqliteSinkConfig) for c in configs):
        return list(configs)
    return [*configs, SqliteSinkConfig(kind="sqlite")]


def result_path(run_dir: Path) -> Path:
    return run_dir / RESULT


def report_path(run_dir: Path, fmt: str) -> Path:
    return run_dir / REPORTS[fmt]


def spool_dir(run_dir: Path) -> Path:
    return run_dir / SPOOL


def read_result(run_dir: Path) -> dict[str, Any] | None:
    """A finished run's result file; None if it has none (yet) or it is unreadable."""
    try:
        data = json.loads(result_path(run_dir).read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def bench_result_path(out_dir: Path) -> Path:
    return out_dir / BENCH_RESULT
