"""What a bench records: its id, the host it ran on, the assembled result and the files
it is written to (bench.json, .md, .html)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from soak.bench.criteria import evaluate
from soak.bench.render_result import render_html, render_markdown
from soak.bench.side import Side
from soak.config.bench import BenchConfig
from soak.runs.layout import BENCH_REPORTS, DataDir, bench_result_path


def tool_version(argv: list[str]) -> str | None:
    if shutil.which(argv[0]) is None:
        return None
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return None
    text = (out.stdout or out.stderr).strip().splitlines()
    return text[0] if text else None


def host_environment(engine: str) -> dict[str, Any]:
    import soak

    env: dict[str, Any] = {
        "host": platform.node(),
        "kernel": platform.release(),
        "machine_cpus": os.cpu_count(),
        "generator_cpus": sorted(os.sched_getaffinity(0)),
        "python": platform.python_version(),
        "soak": getattr(soak, "__version__", "?"),
        "load_avg_start": [round(x, 2) for x in os.getloadavg()],
    }
    if engine == "dnsperf":
        env["dnsperf"] = tool_version(["dnsperf", "-h"]) or "?"
    return env


def assemble(
    run_id: str,
    side: Side,
    cfg: BenchConfig,
    engine: str,
    classes: list[dict[str, Any]],
    env: dict[str, Any],
    started: float,
) -> dict[str, Any]:
    load = side.scenario.load
    assert load is not None
    environment = {**env, **side.environment()}
    environment["load_avg_end"] = [round(x, 2) for x in os.getloadavg()]
    environment["workers"] = load.workers
    environment["flows"] = load.flows
    environment["max_outstanding"] = load.max_outstanding
    criteria = evaluate(classes, cfg.criteria)
    return {
        "kind": "soak-bench",
        "id": run_id,
        "scenario": side.scenario.name,
        "target": {"name": side.scenario.target.name, "version": side.scenario.target.version},
        "engine": engine,
        "started": datetime.fromtimestamp(started, UTC).isoformat(timespec="seconds"),
        "ended": datetime.now(UTC).isoformat(timespec="seconds"),
        "environment": environment,
        "config": cfg.model_dump(mode="json"),
        "classes": classes,
        "criteria": criteria,
        "notes": list(side.notes),
        "passed": all(c["ok"] for c in criteria),
    }


def write_outputs(result: dict[str, Any], out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    bench_result_path(out_dir).write_text(json.dumps(result, indent=2) + "\n")
    (out_dir / BENCH_REPORTS["md"]).write_text(render_markdown(result))
    (out_dir / BENCH_REPORTS["html"]).write_text(render_html(result))


def bench_dir(data_dir: Path | None) -> Path:
    return DataDir.default(data_dir).bench
