"""Running the real `soak` command in tests: a subprocess, its data directory, its store."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "scenarios" / "pdns-recursor-dnsmasq.yaml"

# 1-s ticks and short leak windows, so a minute of soak has verdicts to give.
QUICK = [
    "--set", "samplers.interval_s=1",
    "--set", "leaks.window_s=5s",
    "--set", "leaks.interval_s=5s",
    "--set", "leaks.min_windows=3",
]  # fmt: skip


def soak_argv(*args: str) -> list[str]:
    return [sys.executable, "-m", "soak.cli", *args]


def run_soak(
    *args: str, env: dict[str, str] | None = None, timeout_s: float = 240.0
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        soak_argv(*args),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def last_json(stdout: str) -> Any:
    """The JSON document a `--json` command printed (after any other lines)."""
    start = stdout.index("{")
    return json.loads(stdout[start:])


def processes_under(path: Path) -> list[str]:
    """Command lines of live processes that mention `path` (a run's files): none should be."""
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in cmd:
            found.append(f"{proc.name}: {cmd.strip()}")
    return found
