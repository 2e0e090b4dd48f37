"""A bench result's figures for `soak compare` (the comparison itself:
soak.analysis.comparison)."""

from __future__ import annotations

from typing import Any

from soak.analysis.comparison import Figure, Figures
from soak.analysis.stats import median

# ---------------------------------------------------------------- figures of a bench


def _values(items: list[Any]) -> list[float]:
    return [float(v) for v in items if v is not None]


def bench_figures(result: dict[str, Any]) -> Figures:
    """A bench result's figures: per class, the saturation runs, the knee, the fixed rates."""
    out: Figures = {}
    for row in result["classes"]:
        cls = row["name"]
        sat = row.get("saturation")
        if sat:
            runs = sat["runs"]
            out[f"{cls} saturation q/s"] = Figure(
                "throughput", "q/s", _values([r["answered_qps"] for r in runs])
            )
            out[f"{cls} saturation avg latency"] = Figure(
                "latency", "ms", _values([r["latency_ms"].get("avg") for r in runs])
            )
            out[f"{cls} server CPU per query"] = Figure(
                "cpu", "µs", _values([r["cpu_us_per_query"] for r in runs])
            )
        knee = row.get("knee")
        if knee:
            out[f"{cls} knee (within SLO)"] = Figure(
                "throughput", "q/s", _values([knee["within_slo_qps"]])
            )
            out[f"{cls} capacity (open loop)"] = Figure(
                "throughput", "q/s", _values([knee["capacity_qps"]])
            )
        _fixed_figures(cls, row.get("fixed", []), out)
    return out


def _fixed_figures(cls: str, runs: list[dict[str, Any]], out: Figures) -> None:
    """Per fixed rate: p50 and CPU over the per-second windows after the first (its
    warm-up); p99 across repeated runs of that rate, one value a run (a window's p99
    is a few answers: one slow moment of one run is not a tail to compare)."""
    by_rate: dict[float, list[dict[str, Any]]] = {}
    for run in runs:
        by_rate.setdefault(float(run["offered_qps"]), []).append(run)
    for rate, same_rate in by_rate.items():
        at = f"{cls} @ {rate:g} q/s"
        p50: list[Any] = []
        cpu: list[Any] = []
        for run in same_rate:
            windows = run.get("windows", {})
            p50 += _steady(windows.get("p50_ms")) or [run["latency_ms"].get("p50")]
            cpu += _steady(windows.get("target_cores")) or [run.get("target_cores")]
        whole_run = _values([r["latency_ms"].get("p50") for r in same_rate])
        shown = median(whole_run) if whole_run else None
        out[f"{at} p50"] = Figure("latency", "ms", _values(p50), shown=shown)
        out[f"{at} p99"] = Figure(
            "tail", "ms", _values([r["latency_ms"].get("p99") for r in same_rate])
        )
        out[f"{at} server CPU"] = Figure("cpu", "cores", _values(cpu))


def _steady(windows: list[Any] | None) -> list[Any]:
    """Per-second windows without the first (warm-up) when there are more than two."""
    if not windows:
        return []
    return list(windows[1:]) if len(windows) > 2 else list(windows)
