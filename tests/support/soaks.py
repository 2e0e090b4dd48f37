"""How a test starts a real soak and reads what it stored: one way for every e2e test.

`foreground(scenario, data, ...)` runs `soak start SCENARIO --foreground --json` into
the data directory `data` and returns the run's status (its exit code checked);
`started(...)` is the same command left running (a test that kills it, or waits for a
state mid-run); `stored(data)` opens the run's store for reading.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from soak.runs.layout import DataDir
from soak.sinks.sqlite import SqliteStore
from soak.traffic.capture_file import Capture, write_capture
from tests.support.servers import external_unbound, unbound_process_target

ROOT = Path(__file__).resolve().parents[2]


def soak_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "soak.cli", *args]


def last_json(stdout: str) -> Any:
    """The JSON document a `--json` command printed (after any other lines)."""
    start = stdout.index("{")
    return json.loads(stdout[start:])


def start_argv(scenario: Path, data: Path, *args: str, as_json: bool = True) -> list[str]:
    """`soak start SCENARIO --foreground [--json] --data-dir DATA ARGS...`"""
    json_flag = ("--json",) if as_json else ()
    return soak_argv(
        "start", str(scenario), "--foreground", *json_flag, "--data-dir", str(data), *args
    )


def foreground(
    scenario: Path,
    data: Path,
    *args: str,
    codes: tuple[int, ...] = (0, 1),
    timeout_s: float = 300.0,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """The run to its end; its exit code one of `codes` (default: judged, passed or
    failed: a busy machine may fail a criterion); its status as `--json` printed it."""
    done = subprocess.run(
        start_argv(scenario, data, *args),
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=timeout_s,
        env={**os.environ, **(env or {})},
    )
    assert done.returncode in codes, (done.returncode, done.stderr[-3000:])
    status: dict[str, Any] = last_json(done.stdout)
    return status


def started(
    scenario: Path, data: Path, *args: str, as_json: bool = False, output: bool = True
) -> subprocess.Popen[str]:
    """The same run left running; its output piped (`output`) or discarded."""
    pipe = subprocess.PIPE if output else subprocess.DEVNULL
    return subprocess.Popen(
        start_argv(scenario, data, *args, as_json=as_json),
        stdout=pipe,
        stderr=pipe,
        text=True,
        cwd=ROOT,
    )


@contextmanager
def stored(data: Path) -> Iterator[SqliteStore]:
    """The data directory's store, closed after."""
    store = SqliteStore(DataDir(data).points_db)
    try:
        yield store
    finally:
        store.close()


def unbound_phases_scenario(
    tmp_path: Path, port: int, name: str, phases: list[dict[str, Any]], **more: Any
) -> Path:
    """A scenario (tmp_path/s.yaml) against the unbound a test started on `port`: its
    `phases`, two load workers sending hits on one name and misses on random names,
    and `more` sections beside them."""
    doc = {
        "name": name,
        "target": external_unbound(port),
        "phases": phases,
        "load": {
            "workers": 2,
            "seed": more.pop("seed", 5),
            "mix": [
                {"name": "hit", "weight": 3, "queries": ["www.example.test A"]},
                {"name": "miss", "random": {"zone": "example.test"}},
            ],
        },
        **more,
    }
    path = tmp_path / "s.yaml"
    path.write_text(json.dumps(doc))
    return path


# A replay whose restart skips what fell due meanwhile: no criterion is the point.
RESTART_CRITERIA = {"leaks_ok": False, "lost_ratio_max": None}


def replay_scenario(
    tmp_path: Path,
    capture: Capture,
    name: str,
    phases: list[dict[str, Any]],
    criteria: dict[str, Any],
    **replay: Any,
) -> Path:
    """A scenario (tmp_path/replay.yaml) replaying `capture` (written to c.soakcap beside
    it) against an unbound process of the run's own, with `replay` options added."""
    write_capture(tmp_path / "c.soakcap", capture)
    doc = {
        "name": name,
        "target": unbound_process_target(),
        "phases": phases,
        "load": {"timeout_s": "1s", "replay": {"file": "c.soakcap", **replay}},
        "criteria": criteria,
    }
    path = tmp_path / "replay.yaml"
    path.write_text(json.dumps(doc))
    return path
