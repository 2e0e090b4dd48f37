"""Old against new: two runs' figures side by side, each with a verdict. Pure.

A run (a bench result, or a soak run read from its store) is first reduced to
figures: name -> kind, unit and sample values (per-run values of a bench,
per-window values of a soak run or of a fixed rate). Figures present in both
runs are compared: the medians, their relative difference with a bootstrap
confidence interval, the Mann-Whitney p-value, and a verdict against the
threshold of the figure's kind:

- `same`: the difference is within the threshold, or the interval holds 0
  (the runs' own noise covers it);
- `better` / `worse`: beyond the threshold and outside the noise (with fewer
  than CI_MIN_VALUES values a side there is no interval: twice the threshold).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from soak.bench.stats import bootstrap_ci, mann_whitney_u, median, rel_diff_pct

# Percent. Chosen for a shared machine: run-to-run spread of 20-s runs is a few
# percent for throughput (sdns seed: +-2-7 %), tail latency moves far more.
DEFAULT_THRESHOLDS_PCT = {
    "throughput": 10.0,
    "latency": 25.0,  # average and median
    "tail": 50.0,  # p99: a few slow answers move it, on a shared machine most of all
    "cpu": 15.0,
    "memory": 10.0,
    "count": 10.0,
}
# Below these absolute differences a change is noise whatever its percentage.
ABS_MIN = {"latency": 0.05, "tail": 0.1, "cpu": 0.02, "count": 1.0}
# A bootstrap of fewer values a side says little: no interval, the threshold alone decides.
CI_MIN_VALUES = 3
HIGHER_IS_BETTER = {"throughput"}


@dataclass
class Figure:
    kind: str  # a key of DEFAULT_THRESHOLDS_PCT
    unit: str
    values: list[float]


Figures = dict[str, Figure]


@dataclass
class Compared:
    name: str
    kind: str
    unit: str
    a: float
    b: float
    diff_pct: float
    ci_pct: tuple[float, float] | None
    p_value: float | None
    threshold_pct: float
    verdict: str
    n_a: int
    n_b: int
    note: str = ""


def verdict_of(
    kind: str,
    a: float,
    b: float,
    diff_pct: float,
    ci: tuple[float, float] | None,
    threshold_pct: float,
) -> tuple[str, str]:
    if abs(b - a) < ABS_MIN.get(kind, 0.0):
        return "same", f"difference below {ABS_MIN[kind]:g}"
    if math.isfinite(diff_pct) and abs(diff_pct) <= threshold_pct:
        return "same", ""
    if ci is not None and ci[0] <= 0 <= ci[1]:
        return "same", "within the runs' noise"
    if ci is None and abs(diff_pct) <= 2 * threshold_pct:
        # Nothing to measure the noise with (one value a side): only a difference of
        # twice the threshold counts.
        return "same", "few values: twice the threshold applies"
    good = diff_pct > 0 if kind in HIGHER_IS_BETTER else diff_pct < 0
    return ("better" if good else "worse"), "" if ci is not None else "few values"


def compare_figure(name: str, a: Figure, b: Figure, thresholds: dict[str, float]) -> Compared:
    ma, mb = median(a.values), median(b.values)
    diff = rel_diff_pct(ma, mb)
    ci = p = None
    if len(a.values) >= CI_MIN_VALUES and len(b.values) >= CI_MIN_VALUES:
        ci = bootstrap_ci(a.values, b.values)
        p = mann_whitney_u(a.values, b.values)[1]
    threshold = thresholds.get(a.kind, DEFAULT_THRESHOLDS_PCT.get(a.kind, 10.0))
    verdict, note = verdict_of(a.kind, ma, mb, diff, ci, threshold)
    return Compared(
        name, a.kind, a.unit, ma, mb, diff, ci, p, threshold, verdict, len(a.values),
        len(b.values), note,
    )  # fmt: skip


@dataclass
class Comparison:
    a_id: str
    b_id: str
    rows: list[Compared]
    leaks: list[dict[str, Any]] = field(default_factory=list)
    only_a: list[str] = field(default_factory=list)
    only_b: list[str] = field(default_factory=list)

    @property
    def worse(self) -> list[str]:
        return [r.name for r in self.rows if r.verdict == "worse"]

    def to_json(self) -> dict[str, Any]:
        return {
            "kind": "soak-compare",
            "a": self.a_id,
            "b": self.b_id,
            "figures": [asdict(r) for r in self.rows],
            "leaks": self.leaks,
            "only_a": self.only_a,
            "only_b": self.only_b,
            "worse": self.worse,
        }


def compare_figures(
    a_id: str,
    a: Figures,
    b_id: str,
    b: Figures,
    thresholds: dict[str, float] | None = None,
    leaks: list[dict[str, Any]] | None = None,
) -> Comparison:
    chosen = {**DEFAULT_THRESHOLDS_PCT, **(thresholds or {})}
    rows = [
        compare_figure(name, a[name], b[name], chosen)
        for name in a
        if name in b and a[name].values and b[name].values
    ]
    return Comparison(
        a_id,
        b_id,
        rows,
        leaks or [],
        only_a=[n for n in a if n not in b],
        only_b=[n for n in b if n not in a],
    )


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
        for run in row.get("fixed", []):
            at = f"{cls} @ {run['offered_qps']:g} q/s"
            windows = run.get("windows", {})
            for key, kind in (("p50", "latency"), ("p99", "tail")):
                values = windows.get(f"{key}_ms") or [run["latency_ms"].get(key)]
                out[f"{at} {key}"] = Figure(kind, "ms", _values(values))
            cpu = windows.get("target_cores") or [run["target_cores"]]
            out[f"{at} server CPU"] = Figure("cpu", "cores", _values(cpu))
    return out
