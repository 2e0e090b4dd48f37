"""What `soak compare` compares: a bench result (its JSON file, its directory or its id)
or a soak run (by id, read from the data directory's state and point store)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from soak.analysis.comparison import Figures
from soak.analysis.soakfigures import soak_figures
from soak.bench.compare import bench_figures
from soak.clock import ns_to_s
from soak.errors import InputError
from soak.runs.layout import BENCH_RESULT, DataDir, bench_result_path, read_result


@dataclass
class RunFigures:
    id: str
    label: str  # target and version
    figures: Figures
    leaks: dict[str, dict[str, Any]] = field(default_factory=dict)  # resource -> verdict
    bench: dict[str, Any] | None = None  # the bench result, when it is one


def from_bench(result: dict[str, Any]) -> RunFigures:
    t = result.get("target", {})
    label = f"{t.get('name', '')} {t.get('version', '')}".strip()
    return RunFigures(result["id"], label, bench_figures(result), bench=result)


def _read_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text())
    except OSError as exc:
        raise InputError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise InputError(f"{path}: not JSON: {exc}") from None
    if not isinstance(data, dict) or data.get("kind") != "soak-bench":
        raise InputError(f"{path}: not a `soak bench` result ({BENCH_RESULT})")
    return data


def resolve(ref: str, data_dir: Path) -> RunFigures:
    """A path to bench.json (or its directory), a bench id, or a soak run id."""
    path = Path(ref)
    if path.is_dir():
        path = bench_result_path(path)
    if path.suffix == ".json" or path.exists():
        return from_bench(_read_json(path))
    for bench in _bench_paths(DataDir(data_dir).bench, ref):
        if bench.exists():
            return from_bench(_read_json(bench))
    return soak_run_figures(ref, data_dir)


def _bench_paths(root: Path, bench_id: str) -> list[Path]:
    """Where a bench id's result is: ID/bench.json, or ROOT-ID/A|B/bench.json of --compare."""
    paths = [bench_result_path(root / bench_id)]
    stem, sep, side = bench_id.rpartition("-")
    if sep and side in ("A", "B"):
        paths.append(bench_result_path(root / stem / side))
    return paths


def soak_run_figures(run_id: str, data_dir: Path) -> RunFigures:
    from soak.runs import timeline
    from soak.runs.state import PRUNED_EVENT, StateStore
    from soak.sinks.sqlite import SqliteStore

    layout = DataDir(data_dir)
    if not layout.state_db.exists():
        raise InputError(f"{run_id}: not a file, and no soak state in {data_dir}")
    state = StateStore(layout.state_db)
    try:
        record = state.get_run(run_id)
        pruned = [e for e in state.events(run_id) if e.kind == PRUNED_EVENT] if record else []
    finally:
        state.close()
    if record is None:
        raise InputError(f"{run_id}: no such bench result or soak run in {data_dir}")
    sc = record.scenario
    origin_ns = record.origin_ns if record.origin_ns is not None else record.created_ns
    since_ns = timeline.warmup_end_ns(timeline.timeline(sc, origin_ns))
    store = SqliteStore(layout.points_path(sc, record.run_dir))
    try:
        figures = soak_figures(store, run_id, since_ns, sc.samplers.interval_s)
    finally:
        store.close()
    if not figures:  # nothing to compare is not "no figure worse"
        if pruned:
            when = datetime.fromtimestamp(ns_to_s(pruned[-1].time_ns), UTC).isoformat(
                timespec="seconds"
            )
            raise InputError(
                f"{run_id}: its points were removed by soak prune ({when}); nothing to compare"
            )
        raise InputError(
            f"{run_id}: no points stored for this run (status {record.status}); nothing to compare"
        )
    result = read_result(record.run_dir) or {}
    leaks = {v["resource"]: v for v in result.get("verdicts", [])}
    label = f"{sc.target.name} {sc.target.version}".strip()
    return RunFigures(run_id, label, figures, leaks)


def leak_rows(a: RunFigures, b: RunFigures) -> list[dict[str, Any]]:
    """Both runs' leak slopes per resource (either run's verdicts)."""
    rows = []
    for resource in sorted(set(a.leaks) | set(b.leaks)):
        va, vb = a.leaks.get(resource, {}), b.leaks.get(resource, {})
        rows.append(
            {
                "resource": resource,
                "a_slope_per_hour": va.get("slope_per_hour"),
                "a_verdict": va.get("verdict"),
                "b_slope_per_hour": vb.get("slope_per_hour"),
                "b_verdict": vb.get("verdict"),
            }
        )
    return rows
