"""Old against new: two runs' (or two segments') figures side by side, each with a
verdict. Pure (`soak compare`, `soak bench compare`, a soak's segments across an upgrade).

A run (a bench result, or a soak run read from its store) is first reduced to
figures: name -> kind, unit and sample values (per-run values of a bench, the
per-run p99 of repeated fixed-rate runs, per-window values of a soak run or of a
fixed rate after its first window). Figures present in both runs are compared:
the medians, their relative difference with a bootstrap confidence interval,
Welch's t-test p-value, that p-value corrected for the number of figures compared
(Holm), and a verdict. The noise floor, after Vector's soak harness (p < 0.05 and
|delta| > 8.87 %, erratic above a coefficient of variation of 0.1):

- `better` / `worse`: only when the difference is beyond the figure's threshold
  (a percentage per kind) AND significant after the correction (Holm-adjusted
  p < ALPHA) AND outside the bootstrap interval's 0, and neither side is erratic;
- `erratic`: the difference is beyond the threshold but a side varies too much
  to tell (its coefficient of variation is above ERRATIC_CV and the difference,
  as a log ratio |ln(b/a)|, is within ERRATIC_SPAN times it): not a regression;
- `not judged`: too few values a side for a test (fewer than MIN_VALUES);
- `same`: otherwise.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from soak.analysis.stats import (
    bootstrap_ci,
    coefficient_of_variation,
    holm,
    median,
    rel_diff_pct,
    welch_t_test,
)

# Percent. Chosen for a shared machine: run-to-run spread of 20-s runs is a few
# percent for throughput (sdns seed: +-2-7 %), tail latency moves far more. None is
# below Vector's 8.87 %.
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
# Fewer values a side: no test, no interval, no verdict.
MIN_VALUES = 3
ALPHA = 0.05  # family-wise, after Holm's correction over every figure compared
ERRATIC_CV = 0.1  # a side whose values vary more than this is erratic...
ERRATIC_SPAN = 3.0  # ...for a difference up to this many times its coefficient of variation
# The difference is measured as a log ratio: a relative change cannot fall below
# -100 %, so a drop to a sixth (-84 %) beside a side at CV 0.29 would be "within 3 CVs"
# as a percentage, while as a fold change (ln 6 = 1.8) it is six spreads away. Near
# the threshold |ln(1 + d)| ~ |d|, so small differences are judged as before.
HIGHER_IS_BETTER = {"throughput"}


@dataclass
class Figure:
    kind: str  # a key of DEFAULT_THRESHOLDS_PCT
    unit: str
    values: list[float]
    # The figure as its own result shows it, where that is not the values' median (a fixed
    # rate's p50 over all its queries, against the per-second p50s the test compares):
    # the table's A and B, so that they match each bench's own report.
    shown: float | None = None


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
    p_adjusted: float | None = None  # Holm-corrected over the figures compared
    cv_a: float | None = None  # coefficient of variation of each side's values
    cv_b: float | None = None


def _fold(diff_pct: float) -> float:
    """|ln(b/a)| of a relative difference in percent (a drop to 0 is infinitely far)."""
    return math.inf if diff_pct <= -100.0 else abs(math.log1p(diff_pct / 100.0))


def verdict_of(
    kind: str,
    a: float,
    b: float,
    diff_pct: float,
    ci: tuple[float, float] | None,
    threshold_pct: float,
    p_adjusted: float | None = None,
    cv: tuple[float | None, float | None] = (None, None),
    unit: str = "",
) -> tuple[str, str]:
    """The verdict and a note, from the difference and its noise (see the module doc).
    `unit`: the figure's, in which ABS_MIN is read (the values are in it)."""
    if abs(b - a) < ABS_MIN.get(kind, 0.0):
        return "same", f"difference below {ABS_MIN[kind]:g} {unit}".rstrip()
    if ci is None or p_adjusted is None:
        return "not judged", f"fewer than {MIN_VALUES} values a side"
    if abs(diff_pct) <= threshold_pct:
        return "same", ""
    # Beyond the threshold: a side too noisy to tell says so, significant or not,
    # unless the difference is well beyond that side's own spread.
    worst_cv = max((c for c in cv if c is not None), default=0.0)
    if worst_cv > ERRATIC_CV and _fold(diff_pct) <= ERRATIC_SPAN * worst_cv:
        noisy = [
            f"{side} {c:.2f}" for side, c in zip("AB", cv, strict=True) if c and c > ERRATIC_CV
        ]
        return "erratic", f"coefficient of variation {', '.join(noisy)} > {ERRATIC_CV:g}"
    if p_adjusted >= ALPHA:
        return "same", f"not significant (p {p_adjusted:.2g} after Holm)"
    if ci[0] <= 0 <= ci[1]:
        return "same", "within the runs' noise"
    good = diff_pct > 0 if kind in HIGHER_IS_BETTER else diff_pct < 0
    return ("better" if good else "worse"), ""


def compare_figure(name: str, a: Figure, b: Figure, thresholds: dict[str, float]) -> Compared:
    """One figure, its p-value not yet corrected (compare_figures does that over all)."""
    ma = a.shown if a.shown is not None else median(a.values)
    mb = b.shown if b.shown is not None else median(b.values)
    diff = rel_diff_pct(ma, mb)
    ci = p = None
    if len(a.values) >= MIN_VALUES and len(b.values) >= MIN_VALUES:
        ci = bootstrap_ci(a.values, b.values)
        p = welch_t_test(a.values, b.values)[1]
    threshold = thresholds.get(a.kind, DEFAULT_THRESHOLDS_PCT.get(a.kind, 10.0))
    cv = (coefficient_of_variation(a.values), coefficient_of_variation(b.values))
    verdict, note = verdict_of(a.kind, ma, mb, diff, ci, threshold, p, cv, a.unit)
    return Compared(
        name, a.kind, a.unit, ma, mb, diff, ci, p, threshold, verdict, len(a.values),
        len(b.values), note, p_adjusted=p, cv_a=cv[0], cv_b=cv[1],
    )  # fmt: skip


def _corrected(row: Compared, p_adjusted: float | None) -> Compared:
    cv = (row.cv_a, row.cv_b)
    verdict, note = verdict_of(
        row.kind, row.a, row.b, row.diff_pct, row.ci_pct, row.threshold_pct, p_adjusted, cv,
        row.unit,
    )  # fmt: skip
    return replace(row, p_adjusted=p_adjusted, verdict=verdict, note=note)


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

    @property
    def erratic(self) -> list[str]:
        return [r.name for r in self.rows if r.verdict == "erratic"]

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
            "erratic": self.erratic,
            "correction": "holm",
            "alpha": ALPHA,
            "erratic_cv": ERRATIC_CV,
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
    raw = [
        compare_figure(name, a[name], b[name], chosen)
        for name in a
        if name in b and a[name].values and b[name].values
    ]
    adjusted = holm([r.p_value for r in raw])
    rows = [_corrected(r, p) for r, p in zip(raw, adjusted, strict=True)]
    return Comparison(
        a_id,
        b_id,
        rows,
        leaks or [],
        only_a=[n for n in a if n not in b],
        only_b=[n for n in b if n not in a],
    )
